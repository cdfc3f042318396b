package relayer

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/ident"
	"github.com/shardkeeper/shardkeeper/near"
)

// Signing and sending: the next nonce of the key signed in order, the signed bytes sent
// (and sent again, the same bytes), and the queries that learn each transaction's fate.

// driveAndArm drives the queue and keeps the poll alarm pending while there is work.
func (a *keyActor) driveAndArm(ctx *actors.Context) error {
	work, err := a.drive(ctx)
	if err != nil || !work {
		return err
	}
	return a.poll.Arm(ctx, ctx.Now().Add(a.pollEvery()).UnixMilli())
}

// resendAfter is how long after its last send a transaction the node does not know is left
// to reach a block before it is sent again: three blocks (three polls before the block
// interval is known).
func (a *keyActor) resendAfter() time.Duration { return 3 * a.pollEvery() }

// pollEvery is the poll period: about one block, within MinPollInterval and PollInterval.
func (a *keyActor) pollEvery() time.Duration {
	if a.blockEvery <= 0 {
		return a.cfg.PollInterval
	}
	return min(max(a.blockEvery, MinPollInterval), a.cfg.PollInterval)
}

// drive signs and sends queued intents while the key's nonce and a recent block are known and
// fewer than MaxInFlight are in flight, asking for what is missing; a key no longer
// configured moves them to the account's other keys instead. It reports whether anything is
// queued, in flight, moving or to be forgotten in the index.
func (a *keyActor) drive(ctx *actors.Context) (bool, error) {
	queued, err := queuedCount.Get(ctx)
	if err != nil {
		return false, err
	}
	inFlight, err := flightCount.Get(ctx)
	if err != nil {
		return false, err
	}
	work := queued > 0 || inFlight > 0
	a.met.depth(queued, inFlight)
	for _, p := range [][]byte{prefixMoving, prefixForget} {
		if work {
			break
		}
		pending, err := ctx.List(actors.ListOptions{Prefix: p, Limit: 1})
		if err != nil {
			return false, err
		}
		work = len(pending) > 0
	}
	if queued == 0 {
		return work, nil
	}
	if a.signer == nil {
		return true, a.moveQueued(ctx, queued)
	}
	m, err := loadMeta(ctx)
	if err != nil {
		return work, err
	}
	now := ctx.Now()
	if m.NextNonce == nil {
		a.request(ctx, effectAccessKey, a.fetchAccessKey)
	}
	fresh := m.Block != nil && now.Sub(time.UnixMilli(m.Block.SeenAt)) <= a.cfg.BlockMaxAge
	if !fresh {
		a.request(ctx, effectBlock, a.fetchBlock)
	}
	landed, err := landedCount.Get(ctx)
	if err != nil {
		return work, err
	}
	n := Signable(m.NextNonce != nil, fresh, queued, inFlight-landed, a.cfg.MaxInFlight)
	if n == 0 {
		return work, nil
	}
	next, err := ctx.List(actors.ListOptions{Prefix: prefixQueue, Start: queueKey(a.queueLow), Limit: n})
	if err != nil {
		return work, err
	}
	if len(next) > 0 {
		a.queueLow = keyNumber(next[len(next)-1].Key) + 1
	}
	for _, kv := range next {
		ctx.Delete(kv.Key)
		r, ok, err := loadRecord(ctx, string(kv.Value))
		if err != nil {
			return work, err
		}
		if !ok || r.Status != StatusQueued {
			continue
		}
		if err := a.sign(ctx, &m, r); err != nil {
			return work, err
		}
	}
	queuedCount.Set(ctx, queued-len(next))
	signed, err := flightCount.Get(ctx)
	if err != nil {
		return work, err
	}
	a.met.depth(queued-len(next), signed)
	return work, putJSON(ctx, keyMeta, m)
}

// sign signs r's transaction with the key's next nonce and the latest block, stores the bytes
// and hash, and sends them: the send starts only after this message's commit, so a
// transaction is never out there without its record.
func (a *keyActor) sign(ctx *actors.Context, m *meta, r *record) error {
	now := ctx.Now().UnixMilli()
	tx := near.Transaction{SignerID: a.account, PublicKey: a.pk, Nonce: *m.NextNonce, ReceiverID: r.ReceiverID, BlockHash: m.Block.Hash}
	var err error
	if r.SignedDelegate != nil {
		var sda *near.SignedDelegateAction
		if sda, err = near.DecodeSignedDelegateAction(r.SignedDelegate); err == nil {
			tx.ReceiverID, tx.Actions = sda.DelegateAction.SenderID, []near.Action{*sda}
		}
	} else {
		tx.Actions, err = near.ParseActions(r.Actions)
	}
	var signed *near.SignedTransaction
	var hash near.Hash
	var raw []byte
	if err == nil {
		if signed, hash, err = near.SignTransaction(tx, a.signer); err == nil {
			raw, err = signed.Encode()
		}
	}
	if err != nil {
		// Validated at submit, so this cannot happen; if it does, the intent can never land.
		r.Status, r.UpdatedAt = StatusRejected, now
		r.Error = &IntentError{Code: "unsignable", Message: ident.Clip(err.Error())}
		a.met.event(eventRejected)
		r.RemoveAt = ctx.Now().Add(a.cfg.Retention).UnixMilli()
		retention.Put(ctx, r.RemoveAt, r.IdempotencyKey, []byte{})
		if err := a.gc.Arm(ctx, r.RemoveAt); err != nil {
			return err
		}
		return putJSON(ctx, intentKey(r.IdempotencyKey), r)
	}
	a.met.event(eventSigned)
	nonce, txHash := tx.Nonce, hash.String()
	r.Status, r.Nonce, r.TxHash = StatusSubmitted, &nonce, &txHash
	r.Attempts++
	r.Signed, r.BlockHeight, r.Stale, r.SentAt, r.UpdatedAt = raw, m.Block.Height, false, now, now
	m.LastUsed = nonce
	next := nonce + 1
	m.NextNonce = &next
	ctx.Put(flightKey(nonce), []byte(r.IdempotencyKey))
	n, err := flightCount.Get(ctx)
	if err != nil {
		return err
	}
	flightCount.Set(ctx, n+1)
	if err := putJSON(ctx, intentKey(r.IdempotencyKey), r); err != nil {
		return err
	}
	a.send(ctx, r)
	return nil
}

// request asks for the effect name unless it is already under way in this activation.
func (a *keyActor) request(ctx *actors.Context, name string, fn actors.EffectFunc) {
	if a.busy[name] {
		return
	}
	if err := ctx.Effect(name, fn); err != nil {
		panic(err) // the kind implements EffectHandler: it cannot happen
	}
	a.busy[name] = true
	a.added = append(a.added, name)
}

// send sends r's stored bytes once every smaller nonce in flight is admitted at the node
// (see gate): the send's effect waits for them.
func (a *keyActor) send(ctx *actors.Context, r *record) bool {
	name := effectSend + nonceName(*r.Nonce)
	if a.busy[name] {
		return false
	}
	// Held on the mailbox, before any later send is requested. A nonce newly held by a message
	// whose writes are then discarded is let go (its send and its record are discarded too);
	// one held before stays held until a send or a status answer admits it, or it is settled.
	if a.gate.hold(*r.Nonce) {
		a.held = append(a.held, *r.Nonce)
	}
	nonce, raw, sender, g, timeout := *r.Nonce, r.Signed, a.sender, &a.gate, a.cfg.CallTimeout
	a.request(ctx, name, func(c context.Context) ([]byte, error) {
		out, retried, err := sendOnce(c, g, sender, nonce, raw, timeout)
		if err != nil {
			return nil, err
		}
		return encodeOutcome(out, retried)
	})
	return true
}

// query asks for r's transaction by its signed bytes (see StatusWait).
func (a *keyActor) query(ctx *actors.Context, r *record) {
	nonce, raw, rpc, g, timeout := *r.Nonce, r.Signed, a.cfg.RPC, &a.gate, a.cfg.CallTimeout
	a.request(ctx, effectStatus+nonceName(nonce), func(c context.Context) ([]byte, error) {
		c, cancel := context.WithTimeout(c, timeout)
		defer cancel()
		out, err := rpc.TxStatus(c, near.TxQuery{SignedTx: raw, WaitUntil: StatusWait})
		if err != nil {
			return nil, err
		}
		g.admit(nonce) // the node knows it
		return encodeOutcome(out, nil)
	})
}

// confirm asks every endpoint about r's transaction, which one endpoint declared dead, and
// decides each answer as DecideStatus does, on that answer alone: not on the flight's stale
// mark, nor on the head of the chain, which came from one endpoint too. So each endpoint
// votes dead only with a refusal of its own check of the signed bytes (InvalidNonce, Expired).
func (a *keyActor) confirm(ctx *actors.Context, r *record, f Flight) {
	f.Stale = false
	const head = 0 // the window rule needs a head no single endpoint may dictate
	raw, witnesses, window, timeout := r.Signed, a.cfg.Witnesses, a.cfg.ValidityBlocks, a.cfg.CallTimeout
	a.request(ctx, effectConfirm+nonceName(*r.Nonce), func(c context.Context) ([]byte, error) {
		c, cancel := context.WithTimeout(c, timeout)
		defer cancel()
		ws := make([]Witness, len(witnesses))
		var wg sync.WaitGroup
		for i, rpc := range witnesses {
			wg.Go(func() {
				out, err := rpc.TxStatus(c, near.TxQuery{SignedTx: raw, WaitUntil: StatusWait})
				o := OutcomeOf(out)
				if err != nil {
					o = nil
				}
				ws[i] = Witness{Decision: DecideStatus(f, head, window, o, err), Outcome: o}
			})
		}
		wg.Wait()
		return json.Marshal(ws)
	})
}

// fetchAccessKey reads the key's nonce at the head (optimistic: a final view lags by a few
// blocks and would miss a recent use of the key).
func (a *keyActor) fetchAccessKey(c context.Context) ([]byte, error) {
	c, cancel := context.WithTimeout(c, a.cfg.CallTimeout)
	defer cancel()
	v, err := a.cfg.RPC.ViewAccessKey(c, a.account, a.pk, near.FinalityOptimistic)
	if err != nil {
		return nil, err
	}
	return json.Marshal(keyView{Nonce: v.Nonce, Height: v.BlockHeight, Hash: v.BlockHash})
}

// fetchBlock reads the latest final block: its hash can never be forked away, so a
// transaction signed against it stays valid for the whole window.
func (a *keyActor) fetchBlock(c context.Context) ([]byte, error) {
	c, cancel := context.WithTimeout(c, a.cfg.CallTimeout)
	defer cancel()
	b, err := a.cfg.RPC.Block(c, near.FinalityFinal)
	if err != nil {
		return nil, err
	}
	return json.Marshal(b)
}

func nonceName(n uint64) string { return fmt.Sprint(n) }

func parseNonceName(s string) (uint64, bool) {
	var n uint64
	_, err := fmt.Sscan(s, &n)
	return n, err == nil
}
