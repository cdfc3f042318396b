// Command fakearweave runs the fake Arweave node (test/fakearweave) on an address.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/shardkeeper/shardkeeper/test/fakearweave"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:1984", "listen address")
	interval := flag.Duration("block-interval", 100*time.Millisecond, "how often a block is mined")
	seed := flag.Uint64("seed", 1, "seed of the fault dice")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakearweave:", err)
		os.Exit(1)
	}
	f := fakearweave.New(fakearweave.Config{BlockInterval: *interval, Seed: *seed})
	fmt.Println("fakearweave listening on", ln.Addr())
	if err := http.Serve(ln, f); err != nil {
		fmt.Fprintln(os.Stderr, "fakearweave:", err)
		os.Exit(1)
	}
}
