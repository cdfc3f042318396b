package relayer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/ident"
	"github.com/shardkeeper/shardkeeper/near"
)

// The access-key actor, kind relayer-key: one actor per configured access key, id
// "<account_id>/<public key>", the single submitter of that key's transactions.
//
// # Storage layout
//
// See the keys in intent.go: records i/, the FIFO queue of unsigned intents q/<seq>, the
// in-flight index f/<nonce>, the retention index r/, the queue count c/queued and the key's
// meta m (next nonce, last nonce used, the latest block seen, the last error).
//
// Invariants, after every committed message:
//   - every record is in exactly one of: the queue (status queued, one q/ entry at its seq),
//     the in-flight index (status submitted, one f/ entry at its nonce, with its signed bytes
//     and tx hash stored), or the retention index (terminal, one r/ entry at its remove_at);
//   - c/queued counts the q/ entries, c/flights the f/ entries, c/landed the f/ entries
//     whose record is marked landed; the f/ entries not landed are at most
//     Config.MaxInFlight plus the transactions signed before a change of that setting;
//   - next_nonce, once known, is above every nonce the key used (last_used), so that no
//     transaction of its own is refused for its nonce; a nonce is used at most once;
//   - a signed transaction's bytes and hash are committed before any send of them (effects
//     start after the commit); a transaction is signed again only once provably dead (see
//     decide.go), so an intent lands at most once;
//   - while anything is queued or in flight the "poll" alarm is pending (after a failover the
//     runtime wakes the actor only through it); while any r/ entry exists the "retention"
//     alarm is pending, due no later than the smallest remove_at.
//
// # Methods
//
// MethodSubmit (SubmitRequest → Submitted), MethodGet (GetRequest → Intent), MethodStatus
// (→ KeyStatus). Outcomes: invalid_request, invalid_id, unsupported_action,
// invalid_delegate, idempotency_conflict, unknown_intent, unknown_relayer.

// KindName is the kind's name.
const KindName = "relayer-key"

// The kind's methods.
const (
	MethodSubmit = "submit"
	MethodGet    = "get"
	MethodStatus = "status"
	// methodAdopt is submit from another key of the account: a queued intent moving off a
	// key that is no longer configured (move.go), keeping its creation time.
	methodAdopt = "adopt"
)

// Defaults of Config's zero fields.
const (
	DefaultMaxInFlight    = 32
	DefaultMaxQueued      = 10000
	DefaultRetention      = 168 * time.Hour
	DefaultPollInterval   = time.Second
	MinPollInterval       = 50 * time.Millisecond
	DefaultValidityBlocks = 86400 // mainnet's transaction validity period
	DefaultCallTimeout    = 10 * time.Second
	DefaultBlockMaxAge    = time.Minute
)

// Config configures the kind. Zero fields take their defaults.
type Config struct {
	Keys *Keys // the signers; a key actor whose key is not here only drives what it signed
	RPC  RPC
	// Caller reaches the other actors of the relayer (from effects only; see move.go). Nil
	// (a key tested alone): queued intents of a removed key stay, and no index is kept.
	Caller actors.Caller
	// MaxQueued bounds the accepted, unsigned intents of one key: more are queue_full.
	MaxQueued int
	// MaxInFlight bounds the signed, non-terminal transactions of one key.
	MaxInFlight int
	// Retention is how long terminal records are kept.
	Retention time.Duration
	// PollInterval bounds the period of status polls while anything is in flight, which is
	// otherwise about one block of the chain as the key sees it (at least MinPollInterval).
	PollInterval time.Duration
	// ValidityBlocks is NEAR's transaction validity period: a transaction whose block hash is
	// more blocks behind the head than this can no longer land.
	ValidityBlocks uint64
	// CallTimeout bounds one RPC call of an effect.
	CallTimeout time.Duration
	// BlockMaxAge: a block hash seen longer ago is refreshed before signing with it.
	BlockMaxAge time.Duration
	// Witnesses are RPC's endpoints, asked one by one (near.Client.Each). With two or more, a
	// transaction one endpoint declares dead is signed again only when a second one agrees,
	// each on its own check of the signed bytes, and none knows it (ConfirmDeath): one node's
	// word cannot make an intent land twice.
	Witnesses []RPC
	// Metrics records what the keys do (nil: nothing).
	Metrics *Metrics
}

func (c Config) withDefaults() Config {
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.RPC == nil {
		c.RPC = noRPC{}
	}
	if c.MaxQueued <= 0 {
		c.MaxQueued = DefaultMaxQueued
	}
	if c.Retention <= 0 {
		c.Retention = DefaultRetention
	}
	if c.PollInterval <= 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.ValidityBlocks == 0 {
		c.ValidityBlocks = DefaultValidityBlocks
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.BlockMaxAge <= 0 {
		c.BlockMaxAge = DefaultBlockMaxAge
	}
	if nc, ok := c.RPC.(*near.Client); ok && c.Witnesses == nil {
		for _, e := range nc.Each() {
			c.Witnesses = append(c.Witnesses, e)
		}
	}
	return c
}

// Kind is the access-key actor kind.
func Kind(cfg Config) actors.Kind {
	cfg = cfg.withDefaults()
	// A key keeps a send, a status query and a death check going per transaction in flight,
	// plus the block, the access key, and moves.
	return actors.Kind{Name: KindName, New: func(id string) actors.Handler { return newKeyActor(cfg, id) },
		MaxEffects: 3*cfg.MaxInFlight + 16}
}

// ActorID is the id of the actor of an access key.
func ActorID(account string, pk near.PublicKey) string { return account + "/" + pk.String() }

// ParseActorID splits an actor id into account and public key.
func ParseActorID(id string) (string, near.PublicKey, error) {
	account, key, ok := strings.Cut(id, "/")
	if !ok {
		return "", near.PublicKey{}, fmt.Errorf("relayer key actor id %s is not <account_id>/<public key>", ident.Quote(id))
	}
	if err := near.ValidateAccountID(account); err != nil {
		return "", near.PublicKey{}, fmt.Errorf("relayer key actor id: %w", err)
	}
	pk, err := near.ParsePublicKey(key)
	if err != nil {
		return "", near.PublicKey{}, fmt.Errorf("relayer key actor id: %w", err)
	}
	return account, pk, nil
}

// Effect names: what they act on.
const (
	effectAccessKey = "ak"
	effectBlock     = "block"
	effectSend      = "send/"    // + nonce
	effectStatus    = "status/"  // + nonce
	effectConfirm   = "confirm/" // + nonce: every endpoint asked whether it is dead
)

// keyActor is one activation of a key actor. Its in-memory fields are caches of this
// activation only: busy names the effects it requested whose results it has not handled (so
// that one question is not asked twice at once), the gate orders its sends.
type keyActor struct {
	cfg     Config
	account string
	pk      near.PublicKey
	idErr   error
	signer  near.Signer // nil: the key is not configured (any more)

	sender Sender // created with the activation: one connection per key
	met    *keyMetrics
	// blockEvery estimates the chain's block interval from the blocks seen: polls come about
	// once a block (within MinPollInterval and PollInterval).
	blockEvery time.Duration
	rose       struct { // the last rise of the block height seen, for blockEvery
		height uint64
		at     time.Time
	}
	busy map[string]bool
	// queueLow and flightLow bound the q/ and f/ keys from below: no queued intent has a
	// smaller seq, no transaction in flight a smaller nonce. Scans start there instead of at
	// the prefix, whose deleted entries (every intent leaves a q/ and an f/ tombstone) would
	// otherwise be stepped over on every scan until compaction. Reset when a message's writes
	// are discarded.
	queueLow, flightLow uint64
	// resend holds the nonces a status answer found unknown and alive, admitted before (the
	// node lost them): the next poll re-sends them, in nonce order.
	resend map[uint64]bool
	gate   gate
	gc     actors.GCAlarm // "retention"
	poll   actors.GCAlarm // "poll"

	// What the current message requested, newly held or settled, undone if its writes roll
	// back.
	added   []string
	held    []uint64
	settled []uint64
}

func newKeyActor(cfg Config, id string) *keyActor {
	a := &keyActor{cfg: cfg, busy: map[string]bool{}, resend: map[uint64]bool{}, gc: actors.GCAlarm{Name: "retention"}, poll: actors.GCAlarm{Name: "poll"}}
	a.sender = senderOf(cfg.RPC)
	a.account, a.pk, a.idErr = ParseActorID(id)
	if a.idErr == nil {
		a.met = cfg.Metrics.forKey(id)
	}
	if a.idErr == nil && cfg.Keys != nil {
		if kp, ok := cfg.Keys.Signer(a.account, a.pk); ok {
			a.signer = kp
		}
	}
	return a
}

// begin starts a message; end takes its outcome: an error other than a domain outcome
// discards the message's writes and effects, so what it requested is forgotten too.
func (a *keyActor) begin() { a.added, a.held, a.settled = a.added[:0], a.held[:0], a.settled[:0] }

func (a *keyActor) end(err error) {
	var outcome *actors.Error
	if err == nil || errors.As(err, &outcome) {
		return
	}
	for _, name := range a.added {
		delete(a.busy, name)
	}
	a.queueLow, a.flightLow = 0, 0
	for _, n := range a.held {
		a.gate.admit(n) // its send never starts
	}
	for _, n := range a.settled {
		a.gate.hold(n) // still in flight after all (a send already let through stays sent)
	}
	a.gc.Observe(err)
	a.poll.Observe(err)
}

var methods = actors.Dispatch[*keyActor]{Name: "relayer key", Methods: map[string]actors.Method[*keyActor]{
	MethodSubmit: actors.JSON(func(a *keyActor, ctx *actors.Context, req SubmitRequest) ([]byte, error) {
		return a.submit(ctx, moveRequest{SubmitRequest: req})
	}),
	methodAdopt:  actors.JSON((*keyActor).submit),
	MethodGet:    actors.JSON((*keyActor).get),
	MethodStatus: func(a *keyActor, ctx *actors.Context, _ actors.Request) ([]byte, error) { return a.status(ctx) },
}}

// Receive implements actors.Handler.
func (a *keyActor) Receive(ctx *actors.Context, req actors.Request) ([]byte, error) {
	a.begin()
	if a.idErr != nil {
		return nil, actors.Errorf("unknown_relayer", "%s", a.idErr)
	}
	out, err := methods.Receive(a, ctx, req)
	a.end(err)
	return out, err
}

// Activate implements actors.Activator: reconcile every in-flight transaction before new work
// — re-send its identical bytes, in nonce order, and ask for its status, whose answer ends it,
// proves it dead or leaves it to the next poll — and keep the poll alarm set while anything is
// in flight. Nothing is ever signed again here: what the previous activation sent may land.
func (a *keyActor) Activate(ctx *actors.Context) error {
	a.begin()
	if a.idErr != nil {
		return nil
	}
	err := a.reconcile(ctx)
	a.end(err)
	return err
}

func (a *keyActor) reconcile(ctx *actors.Context) error {
	flights, err := ctx.List(actors.ListOptions{Prefix: prefixFlight})
	if err != nil {
		return err
	}
	if len(flights) > 0 {
		a.request(ctx, effectBlock, a.fetchBlock)
	}
	// Re-send first, in nonce order (f/ keys sort by nonce), so that the sends of this
	// activation keep the key's order; re-sending what may have landed is harmless.
	landed := 0
	for _, kv := range flights {
		r, ok, err := loadRecord(ctx, string(kv.Value))
		if err != nil {
			return err
		}
		if ok && r.Landed {
			landed++
		}
		if ok && !r.terminal() && r.Nonce != nil {
			if a.send(ctx, r) {
				a.met.resent()
			}
			a.query(ctx, r)
		}
	}
	// The counts are kept by every message that changes f/; a new activation checks them
	// against the index it just read (they only drive the pipeline's bound and the status).
	for _, c := range []struct {
		counter actors.Counter
		want    int
	}{{flightCount, len(flights)}, {landedCount, landed}} {
		if n, err := c.counter.Get(ctx); err != nil {
			return err
		} else if n != c.want {
			c.counter.Set(ctx, c.want)
		}
	}
	if err := a.resumeMoves(ctx); err != nil {
		return err
	}
	return a.driveAndArm(ctx)
}

// Deactivate implements actors.Deactivator: the key's connection and gauges go with its
// activation.
func (a *keyActor) Deactivate() {
	go a.sender.Close() // it may wait for a write or a dial under way: not on the mailbox
	a.met.drop()
}

// Alarm implements actors.AlarmHandler.
func (a *keyActor) Alarm(ctx *actors.Context, al actors.Alarm) error {
	a.begin()
	var err error
	switch al.Name {
	case a.poll.Name:
		err = a.tick(ctx)
	case a.gc.Name:
		err = a.collect(ctx)
	}
	a.end(err)
	return err
}

// tick is a poll: refresh the block, ask for the hash of every in-flight transaction not
// already being asked about or sent, then drive the queue.
func (a *keyActor) tick(ctx *actors.Context) error {
	a.poll.Forget()
	if a.idErr != nil {
		return nil
	}
	flights, err := ctx.List(actors.ListOptions{Prefix: prefixFlight, Start: flightKey(a.flightLow)})
	if err != nil {
		return err
	}
	if len(flights) > 0 {
		a.flightLow = keyNumber(flights[0].Key) // later ones are signed with larger nonces
	}
	a.request(ctx, effectBlock, a.fetchBlock)
	now := ctx.Now().UnixMilli()
	// Re-send, in nonce order, the transactions found unknown and alive. Each is held again
	// (see gate): nothing later goes before the node took it.
	resend := maps.Clone(a.resend)
	clear(a.resend)
	for _, kv := range flights { // in nonce order
		r, ok, err := loadRecord(ctx, string(kv.Value))
		if err != nil {
			return err
		}
		if !ok || r.terminal() || r.Nonce == nil {
			continue
		}
		if resend[*r.Nonce] && a.send(ctx, r) {
			a.met.resent()
			r.SentAt = now
			if err := putJSON(ctx, intentKey(r.IdempotencyKey), r); err != nil {
				return err
			}
		}
		if !a.busy[effectSend+nonceName(*r.Nonce)] {
			a.query(ctx, r)
		}
	}
	if err := a.resumeMoves(ctx); err != nil {
		return err
	}
	work, err := a.drive(ctx)
	if err != nil {
		return err
	}
	if work {
		// Set, not Arm: the firing alarm still reads as pending, and the runtime deletes it
		// after this firing unless it is set again.
		return a.poll.Set(ctx, ctx.Now().Add(a.pollEvery()).UnixMilli())
	}
	a.poll.Dropped()
	return nil
}

// collect removes the terminal records whose retention ended.
func (a *keyActor) collect(ctx *actors.Context) error {
	a.gc.Forget()
	now := ctx.Now().UnixMilli()
	const batch = 256
	due, err := retention.Before(ctx, now+1, nil, batch)
	if err != nil {
		return err
	}
	for _, kv := range due {
		t, idem, err := retention.Parse(kv.Key)
		if err != nil {
			return err
		}
		ctx.Delete(intentKey(idem))
		retention.Delete(ctx, t, idem)
		if a.cfg.Caller != nil {
			ctx.Put(forgetKey(idem), []byte{})
		}
	}
	if err := a.forgetIndexed(ctx); err != nil {
		return err
	}
	if len(due) == batch {
		return a.gc.Set(ctx, now)
	}
	t, _, ok, err := retention.First(ctx, nil)
	if err != nil {
		return err
	}
	if !ok {
		a.gc.Dropped()
		return nil
	}
	return a.gc.Set(ctx, t)
}

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

// submit queues a new intent, or returns the record of an identical earlier request.
func (a *keyActor) submit(ctx *actors.Context, req moveRequest) ([]byte, error) {
	c, err := req.check()
	if err != nil {
		return nil, err
	}
	if r, ok, err := loadRecord(ctx, c.idem); err != nil {
		return nil, err
	} else if ok {
		if string(r.RequestHash) != string(c.requestHash) {
			return nil, conflict(c.idem)
		}
		return json.Marshal(Submitted{Intent: r.Intent, Existed: true})
	}
	if a.signer == nil {
		return nil, actors.Errorf("unknown_relayer", "key %s of %s is not configured", a.pk, a.account)
	}
	m, err := loadMeta(ctx)
	if err != nil {
		return nil, err
	}
	if c.delegate != nil && m.Block != nil && c.maxBlock <= m.Block.Height {
		return nil, actors.Errorf("invalid_delegate", "signed_delegate expired at block %d (the chain is at %d)", c.maxBlock, m.Block.Height)
	}
	q, err := queuedCount.Get(ctx)
	if err != nil {
		return nil, err
	}
	if q >= a.cfg.MaxQueued {
		return nil, &actors.Error{Code: "queue_full", Message: fmt.Sprintf("key %s of %s has %d intents queued", a.pk, a.account, q), RetryAfter: time.Second}
	}
	now := ctx.Now().UnixMilli()
	created := now
	if req.CreatedAt > 0 {
		created = req.CreatedAt
	}
	r := &record{
		Intent: Intent{IdempotencyKey: c.idem, AccountID: a.account, PublicKey: a.pk.String(), Status: StatusQueued,
			CreatedAt: created, UpdatedAt: now},
		ReceiverID: c.receiverID, Actions: c.actions, SignedDelegate: c.delegate, RequestHash: c.requestHash,
		Seq: m.NextSeq,
	}
	m.NextSeq++
	if err := putJSON(ctx, keyMeta, m); err != nil {
		return nil, err
	}
	ctx.Put(queueKey(r.Seq), []byte(c.idem))
	queuedCount.Set(ctx, q+1)
	a.met.event(eventAccepted)
	if err := putJSON(ctx, intentKey(c.idem), r); err != nil {
		return nil, err
	}
	if err := a.driveAndArm(ctx); err != nil {
		return nil, err
	}
	if r, _, err = loadRecord(ctx, c.idem); err != nil {
		return nil, err
	}
	return json.Marshal(Submitted{Intent: r.Intent})
}

// GetRequest is the body of MethodGet.
type GetRequest struct {
	IdempotencyKey string `json:"idempotency_key"`
}

func (a *keyActor) get(ctx *actors.Context, req GetRequest) ([]byte, error) {
	r, ok, err := loadRecord(ctx, req.IdempotencyKey)
	if err != nil {
		return nil, err
	}
	if !ok || (r.terminal() && r.RemoveAt <= ctx.Now().UnixMilli()) {
		return nil, unknownIntent(req.IdempotencyKey)
	}
	return json.Marshal(r.Intent)
}

// KeyStatus is the reply of MethodStatus.
type KeyStatus struct {
	PublicKey string    `json:"public_key"`
	NextNonce *uint64   `json:"next_nonce"`
	Queued    int       `json:"queued"`
	InFlight  int       `json:"in_flight"`
	LastError *KeyError `json:"last_error"`
}

func (a *keyActor) status(ctx *actors.Context) ([]byte, error) {
	m, err := loadMeta(ctx)
	if err != nil {
		return nil, err
	}
	q, err := queuedCount.Get(ctx)
	if err != nil {
		return nil, err
	}
	inFlight, err := flightCount.Get(ctx)
	if err != nil {
		return nil, err
	}
	return json.Marshal(KeyStatus{PublicKey: a.pk.String(), NextNonce: m.NextNonce, Queued: q, InFlight: inFlight, LastError: m.LastError})
}
