package relayer

import (
	"errors"
	"fmt"
	"strings"
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
