// Command printinfo prints buildinfo.Get(), so that a test can check what -ldflags -X sets.
package main

import (
	"fmt"

	"github.com/shardkeeper/shardkeeper/buildinfo"
)

func main() { fmt.Println(buildinfo.Get()) }
