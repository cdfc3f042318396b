package chain

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/shardkeeper/shardkeeper/arweave"
	"github.com/shardkeeper/shardkeeper/tlog"
	"golang.org/x/mod/sumdb/note"
)

// Reader is what the verifier reads from: transaction headers and data (arweave.Client).
type Reader interface {
	Tx(ctx context.Context, id string) (*arweave.Tx, error)
	Data(ctx context.Context, id string) ([]byte, error)
}

// Lister is what the verifier lists a wallet's transactions with, to find those of the chain
// off its walk (arweave.Client, through a gateway's GraphQL API).
type Lister interface {
	Transactions(ctx context.Context, address string, tags map[string]string) ([]arweave.Listed, error)
}

// Report is the outcome of a verification, as `shardkeeper chain verify --json` prints it.
type Report struct {
	OK         bool    `json:"ok"`
	Checked    int     `json:"checked"`
	Head       Ref     `json:"head"`
	FirstError *Broken `json:"first_error"`
	// Transactions counts the L1 transactions walked: the events' in the L1 mode, the
	// bundles' wrappers in bundle mode.
	Transactions int `json:"transactions"`
	// Orphans are mined transactions of the chain's wallet tagged with its name that the walk
	// does not pass (a fork, or an upload no event names); OrphanCheck says whether they were
	// looked for: "ok" once the gateway listed the wallet's transactions, otherwise why not.
	Orphans     []string          `json:"orphans,omitempty"`
	OrphanCheck string            `json:"orphan_check,omitempty"`
	Checkpoint  *CheckpointResult `json:"checkpoint,omitempty"`
	// Anchored are the checkpoints the chain itself anchors (CheckpointEntity events), newest
	// first; each one's root was checked against the events walked.
	Anchored []Anchored `json:"anchored_checkpoints,omitempty"`
	// Leaves are the events' leaf hashes, event seq's at seq-1, once the walk reached seq 1.
	Leaves []tlog.Hash `json:"-"`
}

// Anchored is a checkpoint anchored in the chain: event Seq holds the checkpoint of the
// first Size events.
type Anchored struct {
	Seq  int64  `json:"seq"`
	TxID string `json:"tx_id"`
	Size int64  `json:"size"`
	Note []byte `json:"-"` // the signed note
}

// text is the checkpoint's body, without its signatures.
func (cp Anchored) text() string {
	text, _, _ := strings.Cut(string(cp.Note), "\n\n")
	return text + "\n"
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
// and the next event's prev_tx and prev_cid naming it. Each checkpoint anchored in the chain
// must then be the tree of the events before it (its signature is the caller's to check:
// Anchored). progress, when set, is called after each event checked, with its attestation.
//
// A head that is a bundle's wrapper (bundle mode) is walked through its bundles: each wrapper
// is checked as a transaction (signature, id, data root, one wallet), its tags name its seq
// range and the wrapper before it, and its data is an ANS-104 bundle whose items — each
// signature and id checked, one signer — are the events of that range in seq order. A first
// bundle that starts after seq 1 and names no bundle before it belongs to a chain that was in
// the L1 mode until then: the walk goes on through the transactions of the events before it.
//
// Once the walk reached seq 1, a g that is also a Lister lists the L1 transactions of the
// chain's wallet tagged with its name: one mined, not walked, and holding an event up to the
// head's is an orphan, and fails the verification (findOrphans). Those still pending are not
// (the node watches a replaced one); a gateway that cannot list leaves OrphanCheck saying why.
func Verify(ctx context.Context, g Reader, head string, progress func(checked int, a Attestation)) Report {
	r := Report{Head: Ref{TxID: head}}
	var (
		id      = head
		owners  = map[bool][]byte{} // by whether the events are data items
		chain   string
		wantSeq int64 = -1 // unknown until the head is read (reported as 0)
		later   *Attestation
		leaves  []tlog.Hash // from the head down
		// walkedTx are the L1 transactions walked, from the head down; wallet signed them.
		walkedTx []string
		// walkedIDs are the events walked: their items' ids in bundle mode. A gateway that
		// does not honour the listing's bundledIn filter lists items too (arlocal does so).
		walkedIDs []string
		wallet    []byte
	)
	broken := func(seq int64, format string, args ...any) Report {
		r.FirstError = &Broken{Seq: max(seq, 0), TxID: id, Reason: fmt.Sprintf(format, args...)}
		return r
	}
	var src eventSource = l1Events{g}
	if b, first, err := openBundles(ctx, g, head); err != nil {
		return broken(wantSeq, "%v", err)
	} else if b != nil {
		src, id = b, first
	}
	for {
		if err := ctx.Err(); err != nil {
			return broken(wantSeq, "interrupted: %v", err)
		}
		ev, err := src.event(ctx, id, wantSeq)
		if err != nil {
			return broken(wantSeq, "%v", err)
		}
		// One signer for the events of each kind (a chain switched from the L1 mode to
		// bundles has both), and one wallet for every transaction.
		if o := owners[ev.item]; o != nil && string(ev.owner) != string(o) {
			signer := map[bool]string{false: "wallet", true: "key"}[ev.item]
			return broken(wantSeq, "signed by %s %s, the chain's later events by %s", signer, arweave.AddressOf(ev.owner), arweave.AddressOf(o))
		}
		if wallet != nil && string(ev.wallet) != string(wallet) {
			return broken(wantSeq, "its transaction is signed by wallet %s, the chain's later ones by %s", arweave.AddressOf(ev.wallet), arweave.AddressOf(wallet))
		}
		owners[ev.item], wallet = ev.owner, ev.wallet
		if len(walkedTx) == 0 || walkedTx[len(walkedTx)-1] != ev.tx {
			walkedTx = append(walkedTx, ev.tx)
		}
		walkedIDs = append(walkedIDs, id)
		data, tx := ev.data, ev
		a, manifest, err := ParsePayload(data)
		if err != nil {
			if a.Seq > 0 {
				return broken(a.Seq, "%v", err)
			}
			return broken(wantSeq, "%v", err)
		}
		tags := tagMap(tx.tags)
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
		if a.PI == CheckpointEntity && a.Op == "checkpoint" {
			cp, err := anchoredCheckpoint(a, manifest)
			if err != nil {
				return broken(a.Seq, "%v", err)
			}
			cp.TxID = id
			r.Anchored = append(r.Anchored, cp)
		}
		if wantSeq < 0 {
			r.Head.Seq = a.Seq
		}
		leaves = append(leaves, tlog.LeafHash(Leaf(a)))
		r.Checked++
		if progress != nil {
			progress(r.Checked, a)
		}
		if a.Seq == 1 {
			if a.PrevTx != nil || a.PrevCID != nil {
				return broken(1, "the first event names a previous one")
			}
			slices.Reverse(leaves)
			r.Leaves = leaves
			if cp, err := checkAnchored(r.Anchored, leaves); err != nil {
				id = cp.TxID
				return broken(cp.Seq, "the checkpoint it anchors: %v", err)
			}
			r.Transactions = len(walkedTx)
			if l, ok := g.(Lister); ok {
				return findOrphans(ctx, l, g, r, chain, wallet, slices.Concat(walkedTx, walkedIDs))
			}
			r.OK, r.OrphanCheck = true, "not looked for: the reader lists no transactions"
			return r
		}
		if a.PrevTx == nil || a.PrevCID == nil {
			return broken(a.Seq, "event %d names no previous event", a.Seq)
		}
		later, wantSeq, id = &a, a.Seq-1, *a.PrevTx
	}
}

// findOrphans completes r, a walk that reached seq 1 through walked (the transactions signed
// by wallet, and the events' own ids), with the chain's mined transactions that it does not
// pass and that hold events up to its head: those holding only later events are not the
// walk's business (a head that is not the newest, or events mined since it was read).
func findOrphans(ctx context.Context, l Lister, g Reader, r Report, chain string, wallet []byte, walked []string) Report {
	listed, err := l.Transactions(ctx, arweave.AddressOf(wallet), map[string]string{"App-Name": "shardkeeper", "Chain": chain})
	if err != nil {
		r.OK, r.OrphanCheck = true, fmt.Sprintf("not looked for: %v", err)
		return r
	}
	on := make(map[string]bool, len(walked))
	for _, id := range walked {
		on[id] = true
	}
	type orphan struct {
		id   string
		seq  int64 // its first event (0: unreadable)
		what string
	}
	var found []orphan
	for _, t := range listed {
		if t.Height < 0 || on[t.ID] {
			continue
		}
		o := orphan{id: t.ID, what: "an upload of the chain"}
		if tx, err := readHeader(ctx, g, t.ID); err == nil {
			tags := tagMap(tx.Tags)
			if first := tags["First-Seq"]; first != "" {
				o.what = fmt.Sprintf("a bundle of events %s to %s", first, tags["Last-Seq"])
				o.seq, _ = strconv.ParseInt(first, 10, 64)
			} else if s := tags["Seq"]; s != "" {
				o.what = "an upload of event " + s
				o.seq, _ = strconv.ParseInt(s, 10, 64)
			}
		}
		if o.seq > r.Head.Seq {
			continue // later than the head
		}
		found = append(found, o)
		r.Orphans = append(r.Orphans, t.ID)
	}
	r.OrphanCheck = "ok"
	if len(found) == 0 {
		r.OK = true
		return r
	}
	o := found[len(found)-1] // the oldest (the listing is newest first)
	r.FirstError = &Broken{Seq: o.seq, TxID: o.id, Reason: fmt.Sprintf("%s, mined, is off the walk from the head: an orphan or a fork (%d such)", o.what, len(found))}
	return r
}

// anchoredCheckpoint reads the checkpoint anchored by event a.
func anchoredCheckpoint(a Attestation, manifest []byte) (Anchored, error) {
	var m struct {
		Checkpoint string `json:"checkpoint"`
	}
	if json.Unmarshal(manifest, &m) != nil || m.Checkpoint == "" {
		return Anchored{}, fmt.Errorf("a checkpoint event without a checkpoint")
	}
	cp := Anchored{Seq: a.Seq, Note: []byte(m.Checkpoint)}
	if !strings.Contains(m.Checkpoint, "\n\n") {
		return Anchored{}, fmt.Errorf("the anchored checkpoint is not a signed note")
	}
	_, size, _, err := ParseCheckpoint(cp.text())
	switch {
	case err != nil:
		return Anchored{}, fmt.Errorf("the anchored checkpoint: %v", err)
	case size != a.Ver || size >= a.Seq:
		return Anchored{}, fmt.Errorf("the anchored checkpoint of %d events is version %d, event %d", size, a.Ver, a.Seq)
	}
	cp.Size = size
	return cp, nil
}

// CheckCheckpoint checks a checkpoint of the chain offline: its signature by the log key
// vkey, and its root against the tree of the events' leaves from seq 1 on (Report.Leaves). It
// returns the checkpoint's size.
func CheckCheckpoint(signed []byte, vkey string, leaves []tlog.Hash) (int64, error) {
	text, err := openCheckpoint(signed, vkey)
	if err != nil {
		return 0, err
	}
	return checkRoot(text, leaves)
}

// openCheckpoint checks a checkpoint's signature by the log key vkey and returns its text.
func openCheckpoint(signed []byte, vkey string) (string, error) {
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return "", fmt.Errorf("log key: %v", err)
	}
	n, err := note.Open(signed, note.VerifierList(v))
	if err != nil {
		return "", fmt.Errorf("checkpoint signature: %v", err)
	}
	return n.Text, nil
}

// CheckInclusion checks offline, by the inclusion proof p (GET …/proof/inclusion), that
// event a is event a.Seq of the tree of checkpoint signed (by the log key vkey).
func CheckInclusion(signed []byte, vkey string, a Attestation, p Proof) error {
	text, err := openCheckpoint(signed, vkey)
	if err != nil {
		return err
	}
	_, size, root, err := ParseCheckpoint(text)
	switch {
	case err != nil:
		return err
	case p.Size != size || p.Seq != a.Seq:
		return fmt.Errorf("the proof is of event %d in a tree of %d events; the event is %d, the checkpoint's tree has %d", p.Seq, p.Size, a.Seq, size)
	}
	hashes, err := decodeHashes(p.Hashes)
	if err != nil {
		return err
	}
	if err := tlog.VerifyInclusion(tlog.LeafHash(Leaf(a)), a.Seq-1, size, hashes, root); err != nil {
		return fmt.Errorf("event %d is not in the checkpoint's tree of %d events: %v", a.Seq, size, err)
	}
	return nil
}

// CheckConsistency checks offline, by the consistency proof p (GET …/proof/consistency),
// that the tree of checkpoint older is a prefix of the tree of checkpoint newer (both signed
// by the log key vkey): the log only grew between them.
func CheckConsistency(older, newer []byte, vkey string, p Proof) error {
	var sizes [2]int64
	var roots [2]tlog.Hash
	for i, signed := range [][]byte{older, newer} {
		text, err := openCheckpoint(signed, vkey)
		if err != nil {
			return err
		}
		if _, sizes[i], roots[i], err = ParseCheckpoint(text); err != nil {
			return err
		}
	}
	if p.From != sizes[0] || p.To != sizes[1] {
		return fmt.Errorf("the proof is from %d to %d events; the checkpoints have %d and %d", p.From, p.To, sizes[0], sizes[1])
	}
	hashes, err := decodeHashes(p.Hashes)
	if err != nil {
		return err
	}
	if err := tlog.VerifyConsistency(sizes[0], sizes[1], hashes, roots[0], roots[1]); err != nil {
		return fmt.Errorf("the tree of %d events is not a prefix of the tree of %d: %v", sizes[0], sizes[1], err)
	}
	return nil
}

// decodeHashes reads a proof's hashes (base64, standard).
func decodeHashes(b64 []string) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(b64))
	for i, s := range b64 {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b) != len(out[i]) {
			return nil, fmt.Errorf("proof hash %d is not a base64 SHA-256", i)
		}
		copy(out[i][:], b)
	}
	return out, nil
}

// checkRoot checks the root of checkpoint text against the tree of leaves (leaves[i] is event
// i+1's), and returns its size.
func checkRoot(text string, leaves []tlog.Hash) (int64, error) {
	_, size, root, err := ParseCheckpoint(text)
	if err != nil {
		return 0, err
	}
	return size, newLeafTree(leaves).check(size, root)
}

// checkAnchored checks the root of every anchored checkpoint against the tree of leaves,
// built once (a tree's complete subtrees do not change as it grows); it returns the first
// that fails.
func checkAnchored(cps []Anchored, leaves []tlog.Hash) (Anchored, error) {
	t := newLeafTree(leaves)
	for _, cp := range cps {
		_, size, root, err := ParseCheckpoint(cp.text())
		if err == nil {
			err = t.check(size, root)
		}
		if err != nil {
			return cp, err
		}
	}
	return Anchored{}, nil
}

// leafTree is the tree of a walk's leaves, in memory.
type leafTree struct {
	nodes memTree
	size  int64
}

func newLeafTree(leaves []tlog.Hash) *leafTree {
	t := &leafTree{nodes: memTree{}, size: int64(len(leaves))}
	for i, leaf := range leaves {
		nodes, _ := tlog.Append(t.nodes, int64(i), leaf) // reads only nodes stored before
		for _, nd := range nodes {
			t.nodes[[2]int64{int64(nd.Level), nd.Index}] = nd.Hash
		}
	}
	return t
}

// check checks that the tree of the first size leaves has root root.
func (t *leafTree) check(size int64, root tlog.Hash) error {
	if size > t.size {
		return fmt.Errorf("the checkpoint covers %d events; the chain walked has %d", size, t.size)
	}
	got, err := tlog.Root(t.nodes, size)
	if err != nil {
		return err
	}
	if got != root {
		return fmt.Errorf("the checkpoint's root is not the tree of events 1 to %d", size)
	}
	return nil
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
