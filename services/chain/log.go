package chain

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/cid"
	"github.com/shardkeeper/shardkeeper/tlog"
	"golang.org/x/mod/sumdb/note"
)

// The transparency log: an RFC 6962 Merkle tree over the chain's confirmed events, in seq
// order (leaf seq-1 is event seq's canonical attestation JSON), stored as its complete
// subtrees under t/. A bare hash chain can be checked only by walking all of it, and cannot
// prove that today's chain extends yesterday's; the tree's checkpoints (C2SP tlog-checkpoint,
// signed notes) and proofs can. Only confirmed events enter it: they are final, so the tree
// only ever grows.

// treeKey is the stored node of the tree at level, index.
func treeKey(level int, index int64) []byte { return fmt.Appendf(nil, "t/%02x%016x", level, index) }

// treeReader reads the stored tree through a message's context.
type treeReader struct{ ctx *actors.Context }

func (r treeReader) Node(level int, index int64) (tlog.Hash, error) {
	b, found, err := r.ctx.Get(treeKey(level, index))
	var h tlog.Hash
	switch {
	case err != nil:
		return h, err
	case !found || len(b) != len(h):
		return h, fmt.Errorf("chain %s: tree node %d/%d missing", r.ctx.ID(), level, index)
	}
	copy(h[:], b)
	return h, nil
}

// Leaf is an event's leaf in the log: its canonical attestation JSON.
func Leaf(a Attestation) []byte {
	b, _ := json.Marshal(a)
	c, _ := cid.Canonical(b)
	return c
}

// attestationOf is the attestation of a signed event, as its payload holds it.
func attestationOf(r record) Attestation {
	return Attestation{PI: r.EntityID, Ver: r.Ver, CID: r.CID, Op: r.Op, Vis: r.Vis, TS: r.TS, PrevTx: r.PrevTx, PrevCID: r.PrevCID, Seq: r.Seq}
}

// appendLeaf adds confirmed event r (seq = tree size + 1) to the tree.
func appendLeaf(ctx *actors.Context, r record) error {
	nodes, err := tlog.Append(treeReader{ctx}, r.Seq-1, tlog.LeafHash(Leaf(attestationOf(r))))
	if err != nil {
		return err
	}
	for _, n := range nodes {
		ctx.Put(treeKey(n.Level, n.Index), n.Hash[:])
	}
	return nil
}

// Origin is the first line of a chain's checkpoints: the log key's name and the chain's.
func Origin(keyName, chain string) string { return keyName + "/" + chain }

// checkpoint is the chain's latest checkpoint: the tree of its confirmed events.
func (a *actor) checkpoint(ctx *actors.Context) ([]byte, error) {
	if a.cfg.LogSigner == nil {
		return nil, actors.Errorf("chain_log_disabled", "checkpoints are disabled: no --chain-log-key configured")
	}
	m, _, err := load[meta](ctx, metaKey)
	if err != nil {
		return nil, err
	}
	if m.ConfirmedSeq == 0 {
		return nil, actors.Errorf("unknown_event", "chain %s has no confirmed event yet", ctx.ID())
	}
	return a.signCheckpoint(ctx, m.ConfirmedSeq)
}

// signCheckpoint is the checkpoint of the tree of the first size events, a C2SP
// tlog-checkpoint signed by the log key.
func (a *actor) signCheckpoint(ctx *actors.Context, size int64) ([]byte, error) {
	root, err := tlog.Root(treeReader{ctx}, size)
	if err != nil {
		return nil, err
	}
	body := fmt.Sprintf("%s\n%d\n%s\n", Origin(a.cfg.LogSigner.Name(), ctx.ID()), size, base64.StdEncoding.EncodeToString(root[:]))
	return note.Sign(&note.Note{Text: body}, a.cfg.LogSigner)
}

// CheckpointEntity is the entity of the events that anchor the chain's own checkpoints:
// version N, op "checkpoint", holds the signed checkpoint of the first N events as its
// manifest {"checkpoint": "<signed note>"}. Clients cannot append to it.
const CheckpointEntity = "shardkeeper.checkpoint"

// anchorCheckpoint queues the event anchoring the checkpoint of the first size events (all
// confirmed, so in the tree).
func (a *actor) anchorCheckpoint(ctx *actors.Context, m meta, size int64) (meta, error) {
	if _, found, err := ctx.Get(versionKey(CheckpointEntity, size)); err != nil || found {
		return m, err
	}
	signed, err := a.signCheckpoint(ctx, size)
	if err != nil {
		return m, err
	}
	manifest, _ := json.Marshal(map[string]string{"checkpoint": string(signed)})
	e := Event{EntityID: CheckpointEntity, Ver: size, Op: "checkpoint", Vis: "public", Manifest: manifest}
	if err := e.Normalize(); err != nil {
		return m, err
	}
	return a.enqueue(ctx, m, &e), nil
}

// Proof is the answer of the proof methods: hashes base64 (standard), in RFC 6962 order.
type Proof struct {
	Seq    int64    `json:"seq,omitempty"`
	Size   int64    `json:"size,omitempty"`
	From   int64    `json:"from,omitempty"`
	To     int64    `json:"to,omitempty"`
	Hashes []string `json:"hashes"`
}

// proof answers an inclusion proof (seq in the tree of size) or a consistency proof (the tree
// of from in the tree of to); sizes at most the confirmed events.
func (a *actor) proof(ctx *actors.Context, q Proof) ([]byte, error) {
	m, _, err := load[meta](ctx, metaKey)
	if err != nil {
		return nil, err
	}
	var hs []tlog.Hash
	r := treeReader{ctx}
	switch {
	case q.Seq > 0:
		if q.Size < q.Seq || q.Size > m.ConfirmedSeq {
			return nil, actors.Errorf("invalid_request", "need 1 <= seq <= size <= %d (the confirmed events)", m.ConfirmedSeq)
		}
		hs, err = tlog.InclusionProof(r, q.Seq-1, q.Size)
	default:
		if q.From < 1 || q.To < q.From || q.To > m.ConfirmedSeq {
			return nil, actors.Errorf("invalid_request", "need 1 <= from <= to <= %d (the confirmed events)", m.ConfirmedSeq)
		}
		hs, err = tlog.ConsistencyProof(r, q.From, q.To)
	}
	if err != nil {
		return nil, err
	}
	q.Hashes = make([]string, len(hs))
	for i, h := range hs {
		q.Hashes[i] = base64.StdEncoding.EncodeToString(h[:])
	}
	return json.Marshal(q)
}

// ParseCheckpoint reads a checkpoint's body: origin, size, root (further lines, extensions,
// are allowed and ignored).
func ParseCheckpoint(text string) (origin string, size int64, root tlog.Hash, err error) {
	lines := strings.SplitN(text, "\n", 4)
	if len(lines) < 4 || lines[0] == "" {
		return "", 0, root, fmt.Errorf("not a checkpoint")
	}
	if size, err = strconv.ParseInt(lines[1], 10, 64); err != nil || size < 1 {
		return "", 0, root, fmt.Errorf("checkpoint size %q", lines[1])
	}
	b, err := base64.StdEncoding.DecodeString(lines[2])
	if err != nil || len(b) != len(root) {
		return "", 0, root, fmt.Errorf("checkpoint root %q", lines[2])
	}
	copy(root[:], b)
	return lines[0], size, root, nil
}
