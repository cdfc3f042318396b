// Command testnode is `shardkeeper serve` serving the test kinds instead of the services
// (testkinds.Service): it parses the same flags, logs to stderr, exits 0 after a graceful
// shutdown on SIGTERM or SIGINT, and exits 2 with a message when the configuration is invalid
// or the node cannot start.
//
// Besides the node's operational endpoints it serves one generic route,
//
//	POST /test/{kind}/{id}/{method}
//
// whose body (at most 64 KiB) is the Request.Body of a runtime call. It answers 200 with the
// reply bytes, or the error body of api.Codes.WriteError (503 with Retry-After when unavailable).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/shardkeeper/shardkeeper/node"
	"github.com/shardkeeper/shardkeeper/services"
	"github.com/shardkeeper/shardkeeper/test/testkinds"
)

func main() {
	err := node.Serve(os.Args[1:], node.Options{Services: []services.Service{testkinds.Service()}})
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testnode:", err)
		os.Exit(2)
	}
}
