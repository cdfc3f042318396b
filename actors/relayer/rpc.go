package relayer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/shardkeeper/shardkeeper/near"
)

// RPC is the part of *near.Client the key actor uses: the seam where tests put a fake chain.
type RPC interface {
	Block(ctx context.Context, f near.Finality) (near.BlockRef, error)
	ViewAccessKey(ctx context.Context, accountID string, pk near.PublicKey, f near.Finality) (near.AccessKeyView, error)
	SendTx(ctx context.Context, signedTx []byte, wait near.TxExecutionStatus) (*near.TxOutcome, error)
	TxStatus(ctx context.Context, q near.TxQuery) (*near.TxOutcome, error)
}

var _ RPC = (*near.Client)(nil)

// Sender sends one key's transactions in the order of its calls: written is called once the
// request is on its way (or failed before it was), after which a later call cannot overtake
// it (near.OrderedSender, one HTTP/1.1 connection whose requests the node handles in order).
type Sender interface {
	SendTx(ctx context.Context, signedTx []byte, wait near.TxExecutionStatus, written func()) (*near.TxOutcome, error)
	Close() error
}

// senderOf returns the sender of one key's activation: ordered on one connection when rpc is
// a *near.Client, otherwise (a fake chain in tests) rpc's own SendTx, whose request counts as
// written once answered.
func senderOf(rpc RPC) Sender {
	if c, ok := rpc.(*near.Client); ok {
		return c.Ordered()
	}
	return answeredSender{rpc}
}

type answeredSender struct{ rpc RPC }

func (answeredSender) Close() error { return nil }

func (s answeredSender) SendTx(ctx context.Context, raw []byte, wait near.TxExecutionStatus, written func()) (*near.TxOutcome, error) {
	defer written()
	return s.rpc.SendTx(ctx, raw, wait)
}

// SendWait is the wait_until of sends: NONE. The node hands the transaction to its client and
// answers at once, so the answer of a send means the transaction is queued at the node ahead
// of anything sent after it: that is what keeps a key's sends in nonce order (see sequencer).
// No refusal comes back at this level; the status query by signed bytes tells it instead.
// (INCLUDED would bring refusals back from the send itself, but hold each send for a block,
// and the order of requests on different connections would again be left to the network.)
const SendWait = near.TxNone

// StatusWait is the wait_until of status queries: NONE, answered at once with how far the
// transaction got. At any other level nearcore keeps polling a transaction it does not know
// until its timeout, so a dropped or refused one would never be learned to be unknown. Status
// is asked with the signed bytes rather than the hash: a node that does not know them checks
// them and answers the refusal it would give (InvalidNonce, Expired, NotEnoughBalance, …),
// which proves a stale transaction dead, or rejects the intent, in one question. An intent
// ends only on an answer at FINAL or EXECUTED (see final in decide.go); until then the poll,
// about once a block, asks again.
const StatusWait = near.TxNone

// outcomeJSON carries a TxOutcome from an effect to its handler.
type outcomeJSON struct {
	Level  near.TxExecutionStatus `json:"level"`
	Status json.RawMessage        `json:"status,omitempty"`
}

func encodeOutcome(o *near.TxOutcome) ([]byte, error) {
	if o == nil {
		return json.Marshal(outcomeJSON{})
	}
	// The receipts-aware verdict: a delegate's inner failure shows only in its receipts, and
	// the stored status must say so (decodeOutcome then reads it as failed).
	out := OutcomeOf(o)
	return json.Marshal(outcomeJSON{Level: out.Level, Status: out.Status})
}

func decodeOutcome(b []byte) (*Outcome, error) {
	var v outcomeJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("decode outcome: %w", err)
	}
	o := &near.TxOutcome{FinalExecutionStatus: v.Level, Status: v.Status}
	return &Outcome{Level: v.Level, Kind: o.Kind(), Status: v.Status}, nil
}

// sequencer keeps the sends of one activation reaching the node in nonce order: the send of
// nonce N+1 does not start before the sends of smaller nonces requested before it have been
// written (or failed). NEAR applies a key's transactions in nonce order only if the smaller
// one arrives first: a larger nonce landing first makes every smaller one InvalidNonce, which
// costs a replacement. Written is enough because the key's Sender keeps one connection,
// whose requests the node handles in order (requests on different connections are handled in
// any order: the fake node's test reproduces it); so sends are pipelined, not one round trip
// apart.
//
// The order is taken on the mailbox, where sends are requested in nonce order. Across
// activations there is no order to keep: a new activation sends nothing before Activate,
// which re-sends what is in flight in nonce order.
type sequencer struct {
	mu      sync.Mutex
	pending map[uint64]chan struct{} // nonce → closed once its request was written or ended
}

// ticket is one send's place in the order.
type ticket struct {
	s      *sequencer
	nonce  uint64
	done   chan struct{}
	before []chan struct{}
	once   sync.Once
}

// take registers a send of nonce, on the mailbox, behind every pending send of a smaller
// nonce.
func (s *sequencer) take(nonce uint64) *ticket {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil {
		s.pending = map[uint64]chan struct{}{}
	}
	t := &ticket{s: s, nonce: nonce, done: make(chan struct{})}
	for n, ch := range s.pending {
		if n < nonce {
			t.before = append(t.before, ch)
		}
	}
	if old, ok := s.pending[nonce]; ok {
		t.before = append(t.before, old) // an earlier send of the same bytes
	}
	s.pending[nonce] = t.done
	return t
}

// wait blocks until every send ahead has been answered or ended, or ctx is done.
func (t *ticket) wait(ctx context.Context) error {
	for _, ch := range t.before {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// release lets the sends behind go: it was answered, or it ended.
func (t *ticket) release() {
	t.once.Do(func() {
		close(t.done)
		t.s.mu.Lock()
		if t.s.pending[t.nonce] == t.done {
			delete(t.s.pending, t.nonce)
		}
		t.s.mu.Unlock()
	})
}

// noRPC is the RPC of a node without NEAR RPC URLs: every call fails, and what is in flight
// waits for a configuration that has them.
type noRPC struct{}

var errNoRPC = errors.New("no NEAR RPC URL is configured (--near-rpc)")

func (noRPC) Block(context.Context, near.Finality) (near.BlockRef, error) {
	return near.BlockRef{}, errNoRPC
}
func (noRPC) ViewAccessKey(context.Context, string, near.PublicKey, near.Finality) (near.AccessKeyView, error) {
	return near.AccessKeyView{}, errNoRPC
}
func (noRPC) SendTx(context.Context, []byte, near.TxExecutionStatus) (*near.TxOutcome, error) {
	return nil, errNoRPC
}
func (noRPC) TxStatus(context.Context, near.TxQuery) (*near.TxOutcome, error) { return nil, errNoRPC }
