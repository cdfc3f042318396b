package chain

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/shardkeeper/shardkeeper/arweave"
	"github.com/shardkeeper/shardkeeper/tlog"
	"golang.org/x/mod/sumdb/note"
)

// Reader is what the verifier reads from: transaction headers and data (arweave.Client).
type Reader interface {
	Tx(ctx context.Context, id string) (*arweave.Tx, error)
	Data(ctx context.Context, id string) ([]byte, error)
}

// Report is the outcome of a verification, as `shardkeeper chain verify --json` prints it.
type Report struct {
	OK         bool              `json:"ok"`
	Checked    int               `json:"checked"`
	Head       Ref               `json:"head"`
	FirstError *Broken           `json:"first_error"`
	Checkpoint *CheckpointResult `json:"checkpoint,omitempty"`
}

// CheckpointResult is the outcome of checking a checkpoint against the events walked.
type CheckpointResult struct {
	Size   int64  `json:"size"`
	OK     bool   `json:"ok"`
	Reason string `json:"reason,omitempty"`
}

// Ref names an event of a chain.
type Ref struct {
	Seq  int64  `json:"seq"`
	TxID string `json:"tx_id"`
}

// Broken is the first break found, walking back from the head. Seq is 0 when the head itself
// could not be read.
type Broken struct {
	Seq    int64  `json:"seq"`
	TxID   string `json:"tx_id"`
	Reason string `json:"reason"`
}

// Verify walks the chain whose last event is transaction head back to seq 1, checking each
// event on its own — the transaction's signature and id, its data against its data root, the
// manifest against its CID, its tags — and each against the next: one signer, seq one less,
// and the next event's prev_tx and prev_cid naming it. progress, when set, is called after
// each event checked, with its attestation.
func Verify(ctx context.Context, g Reader, head string, progress func(checked int, a Attestation)) Report {
	r := Report{Head: Ref{TxID: head}}
	var (
		id      = head
		owner   []byte
		chain   string
		wantSeq int64 = -1 // unknown until the head is read (reported as 0)
		later   *Attestation
	)
	broken := func(seq int64, format string, args ...any) Report {
		r.FirstError = &Broken{Seq: max(seq, 0), TxID: id, Reason: fmt.Sprintf(format, args...)}
		return r
	}
	for {
		if err := ctx.Err(); err != nil {
			return broken(wantSeq, "interrupted: %v", err)
		}
		tx, err := g.Tx(ctx, id)
		switch {
		case errors.Is(err, arweave.ErrNotFound):
			return broken(wantSeq, "the gateway does not know the transaction")
		case errors.Is(err, arweave.ErrPending):
			return broken(wantSeq, "the transaction is not mined yet")
		case err != nil:
			return broken(wantSeq, "cannot read the transaction: %v", err)
		}
		if err := tx.Verify(); err != nil {
			return broken(wantSeq, "%v", err)
		}
		if tx.IDString() != id {
			return broken(wantSeq, "the gateway answered transaction %s", tx.IDString())
		}
		if owner != nil && string(tx.Owner) != string(owner) {
			return broken(wantSeq, "signed by wallet %s, the chain's later events by %s", arweave.AddressOf(tx.Owner), arweave.AddressOf(owner))
		}
		owner = tx.Owner
		data, err := g.Data(ctx, id)
		if err != nil {
			return broken(wantSeq, "cannot read the data: %v", err)
		}
		tx.Data = data
		if err := tx.Verify(); err != nil { // now with the data: its size and root
			return broken(wantSeq, "%v", err)
		}
		a, _, err := ParsePayload(data)
		if err != nil {
			if a.Seq > 0 {
				return broken(a.Seq, "%v", err)
			}
			return broken(wantSeq, "%v", err)
		}
		tags := map[string]string{}
		for _, t := range tx.Tags {
			tags[string(t.Name)] = string(t.Value)
		}
		if chain == "" {
			chain = tags["Chain"]
		}
		switch {
		case tags["App-Name"] != "shardkeeper" || tags["Chain"] != chain:
			return broken(a.Seq, "tagged App-Name %q, Chain %q: not an event of chain %q", tags["App-Name"], tags["Chain"], chain)
		case tags["Seq"] != strconv.FormatInt(a.Seq, 10) || tags["Entity"] != a.PI:
			return broken(a.Seq, "its tags (Seq %q, Entity %q) disagree with its attestation", tags["Seq"], tags["Entity"])
		case wantSeq >= 0 && a.Seq != wantSeq:
			return broken(a.Seq, "seq %d where %d was due: a gap or a fork", a.Seq, wantSeq)
		case a.Seq < 1:
			return broken(a.Seq, "seq %d", a.Seq)
		case later != nil && *later.PrevCID != a.CID:
			return broken(a.Seq, "event %d names prev_cid %s, this event's cid is %s", later.Seq, *later.PrevCID, a.CID)
		}
		if wantSeq < 0 {
			r.Head.Seq = a.Seq
		}
		r.Checked++
		if progress != nil {
			progress(r.Checked, a)
		}
		if a.Seq == 1 {
			if a.PrevTx != nil || a.PrevCID != nil {
				return broken(1, "the first event names a previous one")
			}
			r.OK = true
			return r
		}
		if a.PrevTx == nil || a.PrevCID == nil {
			return broken(a.Seq, "event %d names no previous event", a.Seq)
		}
		later, wantSeq, id = &a, a.Seq-1, *a.PrevTx
	}
}

// CheckCheckpoint checks a checkpoint of the chain offline: its signature by the log key
// vkey, and its root against the tree of the events' attestations from seq 1 to its size
// (leaf gives each, as a walk of the chain read them). It returns the checkpoint's size.
func CheckCheckpoint(signed []byte, vkey string, leaf func(seq int64) (Attestation, bool)) (int64, error) {
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return 0, fmt.Errorf("log key: %v", err)
	}
	n, err := note.Open(signed, note.VerifierList(v))
	if err != nil {
		return 0, fmt.Errorf("checkpoint signature: %v", err)
	}
	_, size, root, err := ParseCheckpoint(n.Text)
	if err != nil {
		return 0, err
	}
	tree := memTree{}
	for seq := int64(1); seq <= size; seq++ {
		a, ok := leaf(seq)
		if !ok {
			return size, fmt.Errorf("the checkpoint covers %d events; event %d was not read", size, seq)
		}
		nodes, err := tlog.Append(tree, seq-1, tlog.LeafHash(Leaf(a)))
		if err != nil {
			return size, err
		}
		for _, nd := range nodes {
			tree[[2]int64{int64(nd.Level), nd.Index}] = nd.Hash
		}
	}
	got, err := tlog.Root(tree, size)
	if err != nil {
		return size, err
	}
	if got != root {
		return size, fmt.Errorf("the checkpoint's root is not the tree of events 1 to %d", size)
	}
	return size, nil
}

// memTree is a tree in memory (tlog.Reader).
type memTree map[[2]int64]tlog.Hash

func (m memTree) Node(level int, index int64) (tlog.Hash, error) {
	h, ok := m[[2]int64{int64(level), index}]
	if !ok {
		return h, fmt.Errorf("tree node %d/%d missing", level, index)
	}
	return h, nil
}
