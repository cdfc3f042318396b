package relayer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

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

// Sender sends one key's transactions (the gate orders them).
type Sender interface {
	SendTx(ctx context.Context, signedTx []byte, wait near.TxExecutionStatus) (*near.TxOutcome, error)
	Close() error
}

// senderOf returns the sender of one key's activation: one persistent connection when rpc is
// a *near.Client (near.OrderedSender, which also writes again, in order, what a broken
// connection left unanswered), otherwise (a fake chain in tests) rpc's own SendTx.
func senderOf(rpc RPC) Sender {
	if c, ok := rpc.(*near.Client); ok {
		return orderedSender{c.Ordered()}
	}
	return plainSender{rpc}
}

type orderedSender struct{ *near.OrderedSender }

func (s orderedSender) SendTx(ctx context.Context, raw []byte, wait near.TxExecutionStatus) (*near.TxOutcome, error) {
	return s.OrderedSender.SendTx(ctx, raw, wait, nil)
}

type plainSender struct{ rpc RPC }

func (plainSender) Close() error { return nil }

func (s plainSender) SendTx(ctx context.Context, raw []byte, wait near.TxExecutionStatus) (*near.TxOutcome, error) {
	return s.rpc.SendTx(ctx, raw, wait)
}

// SendWait is the wait_until of sends: NONE. The node hands the transaction to its client and
// answers at once, so the answer of a send means the transaction is queued at the node ahead
// of anything sent after it: that is what keeps a key's sends in nonce order (see gate).
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

// outcomeJSON carries a TxOutcome from an effect to its handler, and the error of an attempt
// of the same send that went unanswered before it (for the key's last_error).
type outcomeJSON struct {
	Level   near.TxExecutionStatus `json:"level"`
	Status  json.RawMessage        `json:"status,omitempty"`
	Retried string                 `json:"retried,omitempty"`
}

func encodeOutcome(o *near.TxOutcome, retried error) ([]byte, error) {
	var v outcomeJSON
	if o != nil {
		// The receipts-aware verdict: a delegate's inner failure shows only in its receipts,
		// and the stored status must say so (decodeOutcome then reads it as failed).
		out := OutcomeOf(o)
		v.Level, v.Status = out.Level, out.Status
	}
	if retried != nil {
		v.Retried = retried.Error()
	}
	return json.Marshal(v)
}

// decodeOutcome reads an effect's answer: the outcome, and the error of an unanswered
// attempt before it ("" for none).
func decodeOutcome(b []byte) (*Outcome, string, error) {
	var v outcomeJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, "", fmt.Errorf("decode outcome: %w", err)
	}
	o := &near.TxOutcome{FinalExecutionStatus: v.Level, Status: v.Status}
	return &Outcome{Level: v.Level, Kind: o.Kind(), Status: v.Status}, v.Retried, nil
}

// gate keeps the sends of one key's activation reaching the node in nonce order: the send
// of nonce N goes out only once every smaller nonce the activation holds is admitted — its
// send was answered (the node queued it ahead of anything sent after), a status answer knew
// it, or it is settled (refused for good, ended, replaced). NEAR lands a key's transactions
// in nonce order only if the smaller one reaches the pool first: a larger nonce landing first
// makes every smaller one InvalidNonce, which costs a replacement and shows a transaction that
// never lands. Pipelining the next send behind one merely written is not enough: a node, or
// the load balancer in front of it, may answer 503 or 408 to one request without taking it
// and take the next. So a key sends one transaction per round trip, and more keys send more;
// a send refused before it was admitted is sent again before anything later goes.
//
// The gate is of one activation, in memory: a new activation holds every flight it re-sends
// (Activate re-sends them in nonce order), since what the node took is not known then.
type gate struct {
	mu      sync.Mutex
	held    map[uint64]bool // in flight, not known to be admitted
	changed chan struct{}   // closed and replaced whenever held shrinks
}

// hold marks nonce as in flight and not admitted: sends of larger nonces wait for it. It
// reports whether nonce was not held before.
func (g *gate) hold(nonce uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held == nil {
		g.held = map[uint64]bool{}
	}
	if g.held[nonce] {
		return false
	}
	g.held[nonce] = true
	return true
}

// admit marks nonce as admitted or settled: it no longer holds larger nonces.
func (g *gate) admit(nonce uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.held[nonce] {
		return
	}
	delete(g.held, nonce)
	if g.changed != nil {
		close(g.changed)
		g.changed = nil
	}
}

// wait blocks until no smaller nonce than nonce is held, or ctx ends.
func (g *gate) wait(ctx context.Context, nonce uint64) error {
	for {
		g.mu.Lock()
		free := true
		for n := range g.held {
			if n < nonce {
				free = false
				break
			}
		}
		if free {
			g.mu.Unlock()
			return nil
		}
		if g.changed == nil {
			g.changed = make(chan struct{})
		}
		ch := g.changed
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w: waiting for a smaller nonce of the key to be admitted", ctx.Err())
		}
	}
}

// errHeld is the result of a send that never went out: a smaller nonce was not admitted
// before the send's time ran out.
var errHeld = errors.New("near rpc: not sent, a smaller nonce of the key is not admitted yet")

// sendRetries bounds the attempts of one send effect after a send got no answer about the
// transaction; past them the status query and the poll take over (DecideStatus: Held).
const sendRetries = 3

// sendOnce sends raw (nonce) once every smaller held nonce is admitted, waiting at most
// timeout for that, then giving the sends timeout of their own. An answer — the transaction
// queued, or refused for good — admits it. No answer about it (503, 408, a refused
// connection, no answer at all) leaves it held, nothing later goes, and the same bytes are
// sent again at once, up to sendRetries times: a send refused before the node took it costs a
// round trip, not a poll. A copy that did land answers the re-send with a stale refusal,
// which the status query then resolves. retried is the last unanswered attempt's error when a
// later one was answered; a refusal after an unanswered attempt is returned joined with it,
// so that it is not taken for the fate of the first copy (near.IsRefused).
func sendOnce(ctx context.Context, g *gate, sender Sender, nonce uint64, raw []byte, timeout time.Duration) (out *near.TxOutcome, retried, err error) {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	err = g.wait(wctx, nonce)
	cancel()
	if err != nil {
		return nil, nil, fmt.Errorf("%w (%w)", errHeld, err)
	}
	ctx, cancel = context.WithTimeout(ctx, timeout)
	defer cancel()
	pause := 10 * time.Millisecond
	for attempt := 0; ; attempt++ {
		out, err = sender.SendTx(ctx, raw, SendWait)
		if err == nil || near.IsRefused(err) {
			g.admit(nonce)
			if err != nil && retried != nil {
				return nil, nil, errors.Join(err, retried)
			}
			return out, retried, err
		}
		if !near.IsOutcomeUnknown(err) || attempt == sendRetries {
			return nil, nil, err
		}
		retried = err
		select {
		case <-ctx.Done():
			return nil, nil, err
		case <-time.After(pause):
		}
		pause *= 2
	}
}

// isHeld reports whether nonce is held.
func (g *gate) isHeld(nonce uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held[nonce]
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
