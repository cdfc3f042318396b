package main

import (
	"context"
	"crypto/rand"
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

	"github.com/shardkeeper/shardkeeper/arweave"
	"github.com/shardkeeper/shardkeeper/services/chain"
	"golang.org/x/mod/sumdb/note"
)

const chainUsage = `Usage: shardkeeper chain verify --gateway URL (--head TX_ID | --chain NAME [--addr host:port]) [--json]
       shardkeeper chain proof --log-key VKEY --checkpoint FILE (--inclusion FILE --event FILE | --consistency FILE --older FILE)
       shardkeeper chain log-key --name NAME --out FILE
       shardkeeper chain signer-key --out FILE

Walks an attestation chain on Arweave from its head back to seq 1 and checks every event: the
transaction's signature and id, its data against its data root, the manifest against its CID,
its tags, one signer for the whole chain, seq without gaps, and each event's prev_tx and
prev_cid naming the event before it; and every checkpoint the chain anchors (events of
entity shardkeeper.checkpoint) must be the tree of the events before it. Exits 0 when the chain
is whole, 1 naming the first break found (walking back from the head) and why.

proof checks, offline, a proof the node served against checkpoints signed by the log key:
--inclusion FILE (GET …/proof/inclusion?seq=N&size=M) with --event FILE (GET …/events/N)
proves event N in the tree of --checkpoint (size M); --consistency FILE (GET
…/proof/consistency?from=A&to=B) with --older FILE (a checkpoint of size A) proves the tree of
--checkpoint (size B) extends it. Exits 0 when the proof holds, 1 saying why not.

log-key makes the key pair that signs the chains' checkpoints: the private key goes to FILE
(readable by its owner only; give it to the nodes with --chain-log-key), the verifier key is
printed (give it to whoever checks checkpoints).

signer-key makes the Ed25519 key that signs the data items of bundle mode (--chain-mode
bundle): the key goes to FILE (readable by its owner only; give it to the nodes with
--chain-signer-key), and its owner (public key) and address are printed as JSON.

Flags of verify:
  --gateway URL   Arweave node or gateway (its HTTP API: /tx/{id}, /{id})
  --head TX_ID    the chain's last event, or in bundle mode its last bundle's transaction
  --chain NAME    instead of --head: the chain whose head a node reports (GET /v1/chains/NAME/head)
  --addr host:port  that node's HTTP address (default "127.0.0.1:8080")
  --json          print {ok, checked, head: {seq, tx_id}, first_error: {seq, tx_id, reason} | null,
                  anchored_checkpoints?: [{seq, tx_id, size}], checkpoint?: {size, ok, reason}}
  --checkpoint FILE  also check a checkpoint (GET /v1/chains/NAME/checkpoint) offline: its
                  signature by --log-key, and its root against the events walked
  --log-key VKEY  the log's verifier key (as shardkeeper chain log-key printed it); the
                  checkpoints anchored in the chain must be signed by it

Flags of proof:
  --log-key VKEY       the log's verifier key
  --checkpoint FILE    the signed checkpoint the proof is checked against
  --inclusion FILE     an inclusion proof, with --event FILE: the event it proves
  --consistency FILE   a consistency proof, with --older FILE: the older signed checkpoint

Flags of log-key:
  --name NAME     the log's name, which its checkpoints and verifier key carry
  --out FILE      where to write the private key (an existing file is never replaced)

Flags of signer-key:
  --out FILE      where to write the key (an existing file is never replaced)
`

// chainCmd runs "shardkeeper chain".
func chainCmd(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, chainUsage)
		if len(args) == 0 {
			return usageError{errors.New("chain: missing subcommand (verify, proof, log-key, signer-key)")}
		}
		return flag.ErrHelp
	}
	switch args[0] {
	case "log-key":
		return logKey(args[1:], stdout)
	case "signer-key":
		return signerKey(args[1:], stdout)
	case "proof":
		return checkProof(args[1:], stdout)
	case "verify":
	default:
		return usageError{fmt.Errorf("chain: unknown subcommand %q (verify, proof, log-key, signer-key)", args[0])}
	}
	fs := flag.NewFlagSet("chain verify", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	gateway := fs.String("gateway", "", "")
	head := fs.String("head", "", "")
	name := fs.String("chain", "", "")
	addr := fs.String("addr", "127.0.0.1:8080", "")
	asJSON := fs.Bool("json", false, "")
	checkpoint := fs.String("checkpoint", "", "")
	logKey := fs.String("log-key", "", "")
	if err := parseChainFlags(fs, args[1:], stdout); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usageError{fmt.Errorf("chain verify: unexpected argument %q", fs.Arg(0))}
	case *gateway == "":
		return usageError{errors.New("chain verify: --gateway is required")}
	case (*head == "") == (*name == ""):
		return usageError{errors.New("chain verify: give --head or --chain")}
	case *checkpoint != "" && *logKey == "":
		return usageError{errors.New("chain verify: --checkpoint needs --log-key")}
	}
	if *name != "" {
		var h struct {
			Seq      int64   `json:"seq"`
			TxID     *string `json:"tx_id"`
			BundleTx *string `json:"bundle_tx"` // bundle mode: the walk starts at the last bundle
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
		if h.BundleTx != nil {
			*head = *h.BundleTx
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	last := time.Now()
	progress := func(checked int, a chain.Attestation) {
		if time.Since(last) >= 2*time.Second { // long chains: say where the walk is
			fmt.Fprintf(stderr, "checked %d events, at seq %d\n", checked, a.Seq)
			last = time.Now()
		}
	}
	r := chain.Verify(ctx, arweave.NewClient(*gateway, nil), *head, progress)
	if r.OK && *logKey != "" {
		if err := checkAnchored(&r, *logKey); err != nil {
			return err
		}
	}
	if r.OK && *checkpoint != "" {
		signed, err := os.ReadFile(*checkpoint)
		if err != nil {
			return fmt.Errorf("chain verify: %w", err)
		}
		size, err := chain.CheckCheckpoint(signed, *logKey, r.Leaves)
		r.Checkpoint = &chain.CheckpointResult{Size: size, OK: err == nil}
		if err != nil {
			r.OK = false
			r.Checkpoint.Reason = err.Error()
		}
	}
	if *asJSON {
		b, _ := json.MarshalIndent(r, "", "  ")
		fmt.Fprintln(stdout, string(b))
	} else if r.OK {
		fmt.Fprintf(stdout, "chain whole: %d events in %d transactions, head seq %d (%s)\n", r.Checked, r.Transactions, r.Head.Seq, r.Head.TxID)
		if r.OrphanCheck == "ok" {
			fmt.Fprintln(stdout, "no orphan: every mined transaction of the wallet tagged with the chain is on it")
		} else {
			fmt.Fprintf(stdout, "orphans %s\n", r.OrphanCheck)
		}
		if n := len(r.Anchored); n > 0 {
			signed := map[bool]string{true: ", each signed by the log key", false: " (give --log-key to check their signatures)"}[*logKey != ""]
			fmt.Fprintf(stdout, "%d checkpoints anchored in it, the latest of %d events: each the tree of the events before it%s\n", n, r.Anchored[0].Size, signed)
		}
	}
	if r.Checkpoint != nil && !r.Checkpoint.OK {
		return fmt.Errorf("chain whole, but the checkpoint does not hold: %s", r.Checkpoint.Reason)
	}
	if r.Checkpoint != nil && !*asJSON {
		fmt.Fprintf(stdout, "checkpoint of %d events: its root is the tree of the chain's events\n", r.Checkpoint.Size)
	}
	if !r.OK {
		if r.FirstError.Seq == 0 {
			return fmt.Errorf("chain not verified: its head (transaction %s): %s", r.FirstError.TxID, r.FirstError.Reason)
		}
		return fmt.Errorf("chain broken at seq %d (transaction %s): %s", r.FirstError.Seq, r.FirstError.TxID, r.FirstError.Reason)
	}
	return nil
}

// parseChainFlags parses the flags of a chain subcommand: -h or --help prints the chain
// command's usage (every subcommand's) on stdout and returns flag.ErrHelp; another error is
// a usage error.
func parseChainFlags(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, chainUsage)
		return err
	case err != nil:
		return usageError{err}
	}
	return nil
}

// checkAnchored checks the signature of every checkpoint anchored in the chain by the log
// key vkey; the first one that fails breaks the chain at its event.
func checkAnchored(r *chain.Report, vkey string) error {
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return usageError{fmt.Errorf("chain verify: --log-key: %v", err)}
	}
	for _, cp := range r.Anchored {
		if _, err := note.Open(cp.Note, note.VerifierList(v)); err != nil {
			r.OK = false
			r.FirstError = &chain.Broken{Seq: cp.Seq, TxID: cp.TxID, Reason: fmt.Sprintf("the checkpoint of %d events it anchors: signature: %v", cp.Size, err)}
			return nil
		}
	}
	return nil
}

// checkProof runs "shardkeeper chain proof": an inclusion or consistency proof checked
// offline against signed checkpoints.
func checkProof(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("chain proof", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	logKey := fs.String("log-key", "", "")
	checkpoint := fs.String("checkpoint", "", "")
	inclusion := fs.String("inclusion", "", "")
	event := fs.String("event", "", "")
	consistency := fs.String("consistency", "", "")
	older := fs.String("older", "", "")
	if err := parseChainFlags(fs, args, stdout); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usageError{fmt.Errorf("chain proof: unexpected argument %q", fs.Arg(0))}
	case *logKey == "" || *checkpoint == "":
		return usageError{errors.New("chain proof: --log-key and --checkpoint are required")}
	case (*inclusion == "") == (*consistency == ""):
		return usageError{errors.New("chain proof: give --inclusion (with --event) or --consistency (with --older)")}
	case *inclusion != "" && *event == "", *consistency != "" && *older == "":
		return usageError{errors.New("chain proof: --inclusion needs --event, --consistency needs --older")}
	}
	read := func(path string, v any) ([]byte, error) {
		b, err := os.ReadFile(path)
		if err == nil && v != nil {
			if err = json.Unmarshal(b, v); err != nil {
				err = fmt.Errorf("%s: %v", path, err)
			}
		}
		return b, err
	}
	signed, err := read(*checkpoint, nil)
	if err != nil {
		return fmt.Errorf("chain proof: %w", err)
	}
	var p chain.Proof
	if *inclusion != "" {
		var e struct {
			chain.Attestation
			EntityID string `json:"entity_id"`
		}
		if _, err := read(*inclusion, &p); err != nil {
			return fmt.Errorf("chain proof: %w", err)
		}
		if _, err := read(*event, &e); err != nil {
			return fmt.Errorf("chain proof: %w", err)
		}
		e.PI = e.EntityID // an event as GET …/events/{seq} answers it
		if err := chain.CheckInclusion(signed, *logKey, e.Attestation, p); err != nil {
			return fmt.Errorf("chain proof: %w", err)
		}
		fmt.Fprintf(stdout, "event %d is in the checkpoint's tree of %d events\n", p.Seq, p.Size)
		return nil
	}
	old, err := read(*older, nil)
	if err == nil {
		_, err = read(*consistency, &p)
	}
	if err != nil {
		return fmt.Errorf("chain proof: %w", err)
	}
	if err := chain.CheckConsistency(old, signed, *logKey, p); err != nil {
		return fmt.Errorf("chain proof: %w", err)
	}
	fmt.Fprintf(stdout, "the tree of %d events is a prefix of the tree of %d: the log only grew\n", p.From, p.To)
	return nil
}

// signerKey runs "shardkeeper chain signer-key".
func signerKey(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("chain signer-key", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	out := fs.String("out", "", "")
	if err := parseChainFlags(fs, args, stdout); err != nil {
		return err
	}
	if *out == "" {
		return usageError{errors.New("chain signer-key: --out is required")}
	}
	content, owner, address, err := chain.NewSignerKey()
	if err != nil {
		return fmt.Errorf("chain signer-key: %w", err)
	}
	if err := writeNew(*out, content); err != nil {
		return fmt.Errorf("chain signer-key: %w", err)
	}
	return json.NewEncoder(stdout).Encode(map[string]string{"owner": owner, "address": address})
}

// writeNew writes content to a new file readable by its owner only; an existing file is
// never replaced.
func writeNew(path, content string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// logKey runs "shardkeeper chain log-key".
func logKey(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("chain log-key", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	name := fs.String("name", "", "")
	out := fs.String("out", "", "")
	if err := parseChainFlags(fs, args, stdout); err != nil {
		return err
	}
	if *name == "" || *out == "" {
		return usageError{errors.New("chain log-key: --name and --out are required")}
	}
	skey, vkey, err := note.GenerateKey(rand.Reader, *name)
	if err != nil {
		return usageError{fmt.Errorf("chain log-key: %v", err)}
	}
	if err := writeNew(*out, skey+"\n"); err != nil {
		return fmt.Errorf("chain log-key: %w", err)
	}
	fmt.Fprintln(stdout, vkey)
	return nil
}
