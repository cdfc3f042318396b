package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"time"

	"github.com/shardkeeper/shardkeeper/actors/chain"
	"github.com/shardkeeper/shardkeeper/arweave"
)

const chainUsage = `Usage: shardkeeper chain verify --gateway URL (--head TX_ID | --chain NAME [--addr host:port]) [--json]

Walks an attestation chain on Arweave from its head back to seq 1 and checks every event: the
transaction's signature and id, its data against its data root, the manifest against its CID,
its tags, one signer for the whole chain, seq without gaps, and each event's prev_tx and
prev_cid naming the event before it. Exits 0 when the chain is whole, 1 naming the first break
found (walking back from the head) and why.

Flags:
  --gateway URL   Arweave node or gateway (its HTTP API: /tx/{id}, /{id})
  --head TX_ID    the chain's last event
  --chain NAME    instead of --head: the chain whose head a node reports (GET /v1/chains/NAME/head)
  --addr host:port  that node's HTTP address (default "127.0.0.1:8080")
  --json          print {ok, checked, head: {seq, tx_id}, first_error: {seq, tx_id, reason} | null}
`

// chainCmd runs "shardkeeper chain".
func chainCmd(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, chainUsage)
		if len(args) == 0 {
			return usageError{errors.New("chain: missing subcommand (verify)")}
		}
		return flag.ErrHelp
	}
	if args[0] != "verify" {
		return usageError{fmt.Errorf("chain: unknown subcommand %q (verify)", args[0])}
	}
	fs := flag.NewFlagSet("chain verify", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	gateway := fs.String("gateway", "", "")
	head := fs.String("head", "", "")
	name := fs.String("chain", "", "")
	addr := fs.String("addr", "127.0.0.1:8080", "")
	asJSON := fs.Bool("json", false, "")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, chainUsage)
			return err
		}
		return usageError{err}
	}
	switch {
	case fs.NArg() > 0:
		return usageError{fmt.Errorf("chain verify: unexpected argument %q", fs.Arg(0))}
	case *gateway == "":
		return usageError{errors.New("chain verify: --gateway is required")}
	case (*head == "") == (*name == ""):
		return usageError{errors.New("chain verify: give --head or --chain")}
	}
	if *name != "" {
		var h struct {
			Seq  int64   `json:"seq"`
			TxID *string `json:"tx_id"`
		}
		status, err := adminCall(*addr, http.MethodGet, "/v1/chains/"+url.PathEscape(*name)+"/head", "", nil, &h)
		switch {
		case err != nil:
			return fmt.Errorf("chain verify: %w", err)
		case status != http.StatusOK:
			return fmt.Errorf("chain verify: the node at %s answered %d for chain %q", *addr, status, *name)
		case h.TxID == nil:
			return fmt.Errorf("chain verify: chain %q has no event yet", *name)
		}
		*head = *h.TxID
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	last := time.Now()
	progress := func(checked int, seq int64) {
		if time.Since(last) >= 2*time.Second { // long chains: say where the walk is
			fmt.Fprintf(stderr, "checked %d events, at seq %d\n", checked, seq)
			last = time.Now()
		}
	}
	r := chain.Verify(ctx, arweave.NewClient(*gateway, nil), *head, progress)
	if *asJSON {
		b, _ := json.MarshalIndent(r, "", "  ")
		fmt.Fprintln(stdout, string(b))
	} else if r.OK {
		fmt.Fprintf(stdout, "chain whole: %d events, head seq %d (%s)\n", r.Checked, r.Head.Seq, r.Head.TxID)
	}
	if !r.OK {
		if r.FirstError.Seq == 0 {
			return fmt.Errorf("chain not verified: its head (transaction %s): %s", r.FirstError.TxID, r.FirstError.Reason)
		}
		return fmt.Errorf("chain broken at seq %d (transaction %s): %s", r.FirstError.Seq, r.FirstError.TxID, r.FirstError.Reason)
	}
	return nil
}
