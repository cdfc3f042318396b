package relayer

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/ident"
	"github.com/shardkeeper/shardkeeper/near"
)

// What the key actor does with its effects' results: the access key and block it
// fetched, and each transaction's verdict, applied to the record by decide.go's rules.

// HandleEffect implements actors.EffectHandler.
func (a *keyActor) HandleEffect(ctx *actors.Context, res actors.EffectResult) error {
	a.begin()
	delete(a.busy, res.Name)
	err := a.handle(ctx, res)
	if err == nil {
		err = a.driveAndArm(ctx)
	}
	a.end(err)
	return err
}

func (a *keyActor) handle(ctx *actors.Context, res actors.EffectResult) error {
	switch {
	case res.Name == effectAccessKey:
		return a.onAccessKey(ctx, res)
	case res.Name == effectBlock:
		return a.onBlock(ctx, res)
	case strings.HasPrefix(res.Name, effectSend):
		return a.onTx(ctx, res, strings.TrimPrefix(res.Name, effectSend), true)
	case strings.HasPrefix(res.Name, effectStatus):
		return a.onTx(ctx, res, strings.TrimPrefix(res.Name, effectStatus), false)
	case strings.HasPrefix(res.Name, effectConfirm):
		return a.onConfirm(ctx, res, strings.TrimPrefix(res.Name, effectConfirm))
	case strings.HasPrefix(res.Name, effectMove):
		return a.onMove(ctx, res, strings.TrimPrefix(res.Name, effectMove))
	case res.Name == effectForget:
		return a.onForget(ctx, res)
	}
	return nil
}

// keyView carries an access key view from its effect.
type keyView struct {
	Nonce  uint64    `json:"nonce"`
	Height uint64    `json:"height"`
	Hash   near.Hash `json:"hash"`
}

func (a *keyActor) onAccessKey(ctx *actors.Context, res actors.EffectResult) error {
	m, err := loadMeta(ctx)
	if err != nil {
		return err
	}
	if res.Err != nil {
		m.LastError = &KeyError{Code: "access_key_unavailable", Message: ident.Clip(res.Err.Error()), At: ctx.Now().UnixMilli()}
		return putJSON(ctx, keyMeta, m)
	}
	var v keyView
	if err := json.Unmarshal(res.Output, &v); err != nil {
		return fmt.Errorf("relayer key %s: decode access key: %w", ctx.ID(), err)
	}
	next := NextNonce(m.LastUsed, v.Nonce)
	if m.NextNonce != nil {
		next = max(next, *m.NextNonce)
	}
	m.NextNonce = &next
	return putJSON(ctx, keyMeta, m)
}

func (a *keyActor) onBlock(ctx *actors.Context, res actors.EffectResult) error {
	if res.Err != nil {
		return nil // the next poll asks again; signing waits for a block
	}
	var b near.BlockRef
	if err := json.Unmarshal(res.Output, &b); err != nil {
		return fmt.Errorf("relayer key %s: decode block: %w", ctx.ID(), err)
	}
	m, err := loadMeta(ctx)
	if err != nil {
		return err
	}
	if m.Block != nil && b.Height < m.Block.Height {
		return nil // an answer older than one already seen
	}
	if now := ctx.Now(); b.Height > a.rose.height {
		// Sampled only when the height rises, against when the last rise was seen: answers
		// that repeat a height say nothing of the block interval.
		if a.rose.height > 0 {
			every := now.Sub(a.rose.at) / time.Duration(b.Height-a.rose.height)
			if a.blockEvery == 0 {
				a.blockEvery = every
			} else {
				a.blockEvery = (3*a.blockEvery + every) / 4
			}
		}
		a.rose.height, a.rose.at = b.Height, now
	}
	m.Block = &blockRecord{Height: b.Height, Hash: b.Hash, SeenAt: ctx.Now().UnixMilli()}
	return putJSON(ctx, keyMeta, m)
}

// onTx takes the answer to a send (sent) or a status query of the transaction of nonce.
func (a *keyActor) onTx(ctx *actors.Context, res actors.EffectResult, nonceStr string, sent bool) error {
	n, ok := parseNonceName(nonceStr)
	if !ok {
		return nil
	}
	idem, found, err := ctx.Get(flightKey(n))
	if err != nil || !found {
		return err // ended or replaced meanwhile: the answer is about the past
	}
	r, found, err := loadRecord(ctx, string(idem))
	if err != nil || !found || r.terminal() || r.Nonce == nil || *r.Nonce != n {
		return err
	}
	var o *Outcome
	var retried string
	if res.Err == nil {
		if o, retried, err = decodeOutcome(res.Output); err != nil {
			return fmt.Errorf("relayer key %s: %w", ctx.ID(), err)
		}
	}
	m, err := loadMeta(ctx)
	if err != nil {
		return err
	}
	var d Decision
	if sent {
		d = DecideSend(r.flight(), o, res.Err)
	} else {
		var head uint64
		if m.Block != nil {
			head = m.Block.Height
		}
		f := r.flight()
		f.Recent = ctx.Now().Sub(time.UnixMilli(r.SentAt)) < a.resendAfter()
		f.Held = a.gate.isHeld(n)
		d = DecideStatus(f, head, a.cfg.ValidityBlocks, o, res.Err)
		if d.Verdict == Replace && len(a.cfg.Witnesses) > 1 {
			// Dead on one endpoint's word: every endpoint is asked before signing again, and
			// nothing of this answer is kept (not its stale mark, nonce or block): it may lie.
			a.confirm(ctx, r, f)
			d = Decision{Verdict: Wait}
		}
	}
	if retried != "" {
		m.LastError = &KeyError{Code: "outcome_unknown", Message: ident.Clip(retried), At: ctx.Now().UnixMilli()}
		if err := putJSON(ctx, keyMeta, m); err != nil {
			return err
		}
	}
	return a.apply(ctx, &m, r, d, o, res.Err)
}

// apply carries out a decision about r's transaction.
func (a *keyActor) apply(ctx *actors.Context, m *meta, r *record, d Decision, o *Outcome, rpcErr error) error {
	now := ctx.Now().UnixMilli()
	a.met.rpcError(rpcErr)
	// The meta is written only when it changes: most answers say "not final yet".
	changed := false
	if rpcErr != nil && !errors.As(rpcErr, new(*near.UnknownTransactionError)) && !errors.Is(rpcErr, errHeld) {
		m.LastError = &KeyError{Code: errorCode(rpcErr), Message: ident.Clip(rpcErr.Error()), At: now}
		changed = true
	}
	if d.AkNonce != nil {
		next := NextNonce(m.LastUsed, *d.AkNonce)
		if m.NextNonce != nil {
			next = max(next, *m.NextNonce)
		}
		m.NextNonce, changed = &next, true
	}
	if d.NonceUnknown {
		m.NextNonce, changed = nil, true // learned again; NextNonce keeps it above last_used
	}
	if d.BlockStale {
		m.Block, changed = nil, true // the block signed with is too old: fetch one before signing again
	}
	if changed {
		if err := putJSON(ctx, keyMeta, m); err != nil {
			return err
		}
	}
	if d.Stale && !r.Stale {
		r.Stale = true
		r.UpdatedAt = now
		if err := putJSON(ctx, intentKey(r.IdempotencyKey), r); err != nil {
			return err
		}
	}
	if d.Landed && !r.Landed {
		a.met.landed(r.CreatedAt, ctx.Now())
		if err := a.setLanded(ctx, r, true); err != nil {
			return err
		}
	}
	switch d.Verdict {
	case Query:
		a.query(ctx, r)
	case Resend:
		if a.gate.isHeld(*r.Nonce) {
			// Refused before the node took it, and the key's later sends wait for it: now.
			if a.send(ctx, r) {
				a.met.resent()
			}
			return nil
		}
		a.resend[*r.Nonce] = true // at the next poll, with the others, in nonce order
	case Replace:
		// Provably dead: back to the queue at its first place, to be signed with a new nonce.
		a.met.event(eventReplaced)
		if err := a.dropFlight(ctx, r); err != nil {
			return err
		}
		r.Status, r.Signed, r.Stale, r.UpdatedAt = StatusQueued, nil, false, now
		ctx.Put(queueKey(r.Seq), []byte(r.IdempotencyKey))
		a.queueLow = min(a.queueLow, r.Seq)
		q, err := queuedCount.Get(ctx)
		if err != nil {
			return err
		}
		queuedCount.Set(ctx, q+1)
		return putJSON(ctx, intentKey(r.IdempotencyKey), r)
	case Succeeded, Failed, Rejected:
		return a.finish(ctx, r, d, o)
	}
	return nil
}

// finish makes r terminal.
func (a *keyActor) finish(ctx *actors.Context, r *record, d Decision, o *Outcome) error {
	now := ctx.Now()
	if d.Verdict != Rejected && !r.Landed {
		a.met.landed(r.CreatedAt, now)
	}
	if err := a.dropFlight(ctx, r); err != nil {
		return err
	}
	switch d.Verdict {
	case Succeeded:
		r.Status = StatusSucceeded
	case Failed:
		r.Status = StatusFailed
	case Rejected:
		r.Status = StatusRejected
		r.Error = &IntentError{Code: d.Code, Message: ident.Clip(d.Message)}
	}
	a.met.event(string(r.Status))
	if o != nil && d.Verdict != Rejected {
		r.Outcome = json.RawMessage(o.Status)
	}
	r.Signed, r.Stale = nil, false
	r.UpdatedAt = now.UnixMilli()
	r.RemoveAt = now.Add(a.cfg.Retention).UnixMilli()
	retention.Put(ctx, r.RemoveAt, r.IdempotencyKey, []byte{})
	if err := putJSON(ctx, intentKey(r.IdempotencyKey), r); err != nil {
		return err
	}
	return a.gc.Arm(ctx, r.RemoveAt)
}

// dropFlight takes r's transaction out of the in-flight index (the caller stores r): it is
// settled, and no longer holds the sends of larger nonces.
func (a *keyActor) dropFlight(ctx *actors.Context, r *record) error {
	ctx.Delete(flightKey(*r.Nonce))
	a.gate.admit(*r.Nonce)
	a.settled = append(a.settled, *r.Nonce)
	n, err := flightCount.Get(ctx)
	if err != nil {
		return err
	}
	flightCount.Set(ctx, n-1)
	return a.setLanded(ctx, r, false)
}

// setLanded marks r's transaction as in a block or not, keeping c/landed the count of the
// in-flight records marked (the caller stores r).
func (a *keyActor) setLanded(ctx *actors.Context, r *record, landed bool) error {
	if r.Landed == landed {
		return nil
	}
	n, err := landedCount.Get(ctx)
	if err != nil {
		return err
	}
	if landed {
		n++
	} else {
		n--
	}
	landedCount.Set(ctx, n)
	r.Landed = landed
	if landed {
		return putJSON(ctx, intentKey(r.IdempotencyKey), r)
	}
	return nil
}

// errorCode names an RPC error for the key's last_error.
func errorCode(err error) string {
	var it near.InvalidTx
	switch {
	case near.IsOutcomeUnknown(err):
		return "outcome_unknown"
	case errors.As(err, &it):
		return it.InvalidTxName()
	}
	return "rpc_error"
}

// onConfirm takes the endpoints' answers about the transaction of nonce (ConfirmDeath).
func (a *keyActor) onConfirm(ctx *actors.Context, res actors.EffectResult, nonceStr string) error {
	n, ok := parseNonceName(nonceStr)
	if !ok || res.Err != nil {
		return nil // the poll asks again
	}
	idem, found, err := ctx.Get(flightKey(n))
	if err != nil || !found {
		return err
	}
	r, found, err := loadRecord(ctx, string(idem))
	if err != nil || !found || r.terminal() || r.Nonce == nil || *r.Nonce != n {
		return err
	}
	var ws []Witness
	if err := json.Unmarshal(res.Output, &ws); err != nil {
		return fmt.Errorf("relayer key %s: decode witnesses: %w", ctx.ID(), err)
	}
	d, o := ConfirmDeath(ws)
	verdict := "inconclusive"
	switch {
	case d.Verdict == Replace:
		verdict = "confirmed"
	case slices.ContainsFunc(ws, func(w Witness) bool { return w.Outcome != nil }):
		verdict = "refuted" // an endpoint knows the transaction
	}
	a.met.confirmed(verdict)
	m, err := loadMeta(ctx)
	if err != nil {
		return err
	}
	return a.apply(ctx, &m, r, d, o, nil)
}
