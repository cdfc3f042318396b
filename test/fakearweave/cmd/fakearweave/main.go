// Command fakearweave runs the fake Arweave node and gateway (test/fakearweave) on an address.
// Its HTTP /admin surface drives it while it runs: POST /admin/mine, /admin/reorg?depth=N,
// /admin/faults, /admin/tamper/{id}; GET /admin/mined, /admin/bundles/{id}.
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
	interval := flag.Duration("block-interval", 100*time.Millisecond, "how often a block is mined (Arweave: about 2m)")
	manual := flag.Bool("manual", false, "mine only on POST /admin/mine")
	maxTxs := flag.Int("max-block-txs", 1000, "transactions a block holds at most (Arweave's BLOCK_TX_COUNT_LIMIT)")
	anchorDepth := flag.Int("anchor-depth", 50, "how many recent blocks a transaction's anchor may name")
	suggested := flag.Int("suggested-anchor-depth", 1, "which newest block GET /tx_anchor names (1: the tip; a node names its 6th)")
	latency := flag.Duration("latency", 0, "added to every answer but /admin's (POST /admin/faults changes it)")
	seed := flag.Uint64("seed", 1, "seed of the fault dice")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakearweave:", err)
		os.Exit(1)
	}
	f := fakearweave.New(fakearweave.Config{BlockInterval: *interval, Manual: *manual, MaxBlockTxs: *maxTxs,
		AnchorDepth: *anchorDepth, SuggestedAnchorDepth: *suggested, Seed: *seed})
	f.SetFaults(fakearweave.Faults{Latency: *latency})
	fmt.Println("fakearweave listening on", ln.Addr())
	if err := http.Serve(ln, f); err != nil {
		fmt.Fprintln(os.Stderr, "fakearweave:", err)
		os.Exit(1)
	}
}
