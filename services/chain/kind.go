package chain

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/arweave"
	"github.com/shardkeeper/shardkeeper/arweave/ans104"
	"golang.org/x/mod/sumdb/note"
)

// The chain actor, kind "chain": one actor per chain name, the single writer of its chain.
//
// Invariants, after every committed message:
//   - every accepted version is queued (one q/ entry), signed (one e/ entry at its seq), or
//     failed; seq counts the signed events: 1..meta.Seq, each e/ entry linking to the one
//     before it, so the chain has no gap and no fork;
//   - an event's signed transaction is committed before it is posted (effects start after the
//     commit) and kept until the event is confirmed; it is posted again only with those same
//     bytes, so a crash between posting and recording the outcome leaves no orphan;
//   - while an event is signed and not confirmed, the "poll" alarm is pending; while events
//     are queued and may be signed (room under the bounds, nothing to sign again), a
//     "prepare" effect or the "pump" alarm is, or a post or poll result will start one.

// KindName is the kind's name.
const KindName = "chain"

// The kind's methods.
const (
	MethodAppend  = "append"
	MethodHead    = "head"
	MethodEvent   = "event"
	MethodEntity  = "entity"
	MethodVersion = "version"
	MethodRetry   = "retry"
	// MethodCheckpoint (→ signed note), MethodProof (Proof → Proof): the transparency log.
	MethodCheckpoint = "checkpoint"
	MethodProof      = "proof"
)

// MaxAttempts is how many times in a row preparing the next events may fail (the gateway
// unreachable or refusing) before the first queued event is marked failed and the chain goes
// on without it.
const MaxAttempts = 5

// Gateway is what the chain needs of an Arweave node (arweave.Client).
type Gateway interface {
	Anchor(ctx context.Context) ([]byte, error)
	Height(ctx context.Context) (int64, error)
	Price(ctx context.Context, size int) (string, error)
	Post(ctx context.Context, t *arweave.Tx) error
	// PostHeader and PostChunks are Post in two steps (bundle mode: a wrapper is taken once
	// its header is, and its data follows).
	PostHeader(ctx context.Context, t *arweave.Tx) error
	PostChunks(ctx context.Context, t *arweave.Tx) error
	StatusOf(ctx context.Context, id string) (arweave.Status, error)
}

// Config configures the kind. Zero fields take their defaults.
type Config struct {
	Gateway Gateway
	Wallet  *arweave.Wallet
	// MaxInFlight bounds the posts (POST /tx) under way (default 256); they start in seq
	// order.
	MaxInFlight int
	// MaxUnconfirmed bounds the events signed and not yet confirmed (default 10000): what
	// stays stored with its transaction, and what an expired anchor may leave to sign again.
	MaxUnconfirmed int
	// MaxQueued bounds the events accepted and not yet signed (default DefaultMaxQueued):
	// past it a new event is queue_full. Without it a chain whose gateway is down would store
	// every event offered, manifests of up to 64 KiB each, until the gateway came back.
	MaxQueued int
	// AnchorReuse is how long an anchor and prices read from the gateway are used for signing
	// (default 30s; sooner renewed when the polls see the chain grow by a fifth of
	// AnchorDepth).
	AnchorReuse time.Duration
	Metrics     *Metrics
	// Confirmations is how deep an event's block must be for it to count as confirmed
	// (default 1).
	Confirmations int64
	// PollInterval is how often unconfirmed events are checked (default 5s).
	PollInterval time.Duration
	// CallTimeout bounds each gateway call (default 30s).
	CallTimeout time.Duration
	// LogSigner signs the chain's checkpoints (nil: no checkpoints; proofs are served).
	LogSigner note.Signer
	// AnchorDepth is how many blocks an anchor stays valid on the network (default 50, as
	// Arweave): a transaction unmined that many blocks after its anchor can never be mined.
	AnchorDepth int64
	// ReorgDepth is, in bundle mode, how many blocks deep a bundle's wrapper must be before
	// the node drops its bytes (default AnchorDepth, at least Confirmations): until then a
	// reorg that drops it, confirmed or not, is repaired by posting it again.
	ReorgDepth int64
	// CheckpointEvery, with LogSigner, anchors a checkpoint in the chain each time this many
	// more events are confirmed (0: never).
	CheckpointEvery int64
	// MaxReward is the highest reward, in winston, a transaction is signed for (default
	// DefaultMaxReward): the wallet pays whatever the gateway quotes, so a wrong or hostile
	// quote must not drain it.
	MaxReward uint64
	// Mode is ModeL1 (default: one transaction per event) or ModeBundle (events as data
	// items, in bundles; bundle.go).
	Mode string
	// ItemSigner signs the data items in bundle mode (default: the wallet, RSA). A chain that
	// signed an item stays in bundles whatever Mode says.
	ItemSigner ans104.Signer
	// BundleInterval is the longest an event waits for its bundle, BundleMaxItems and
	// BundleMaxBytes (the items' bytes) a bundle's size: it is made when full, or at the
	// interval (defaults DefaultBundleInterval, DefaultBundleMaxItems, DefaultBundleMaxBytes).
	BundleInterval time.Duration
	BundleMaxItems int
	BundleMaxBytes int
}

// DefaultMaxReward is the default --chain-max-reward: 0.01 AR, in winston.
const DefaultMaxReward = 10_000_000_000

// DefaultMaxQueued is the default --chain-max-queued: as many as --chain-max-unconfirmed, about
// 80 s of signing at the pace the default --chain-max-in-flight allows (128 events/s), and at
// most 10000 manifests of 64 KiB stored per chain while its gateway is down.
const DefaultMaxQueued = 10000

func (c Config) withDefaults() Config {
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = 256
	}
	if c.MaxUnconfirmed <= 0 {
		c.MaxUnconfirmed = 10000
		if c.Mode == ModeBundle {
			// A bundle waits minutes for its block: events keep coming meanwhile.
			c.MaxUnconfirmed = DefaultMaxUnconfirmedBundled
		}
	}
	if c.Mode == "" {
		c.Mode = ModeL1
	}
	if c.ItemSigner == nil && c.Wallet != nil {
		if s, err := ans104.NewArweaveSigner(c.Wallet); err == nil { // (a wallet that loaded signs)
			c.ItemSigner = s
		}
	}
	if c.BundleInterval <= 0 {
		c.BundleInterval = DefaultBundleInterval
	}
	if c.BundleMaxItems <= 0 {
		c.BundleMaxItems = DefaultBundleMaxItems
	}
	if c.BundleMaxBytes <= 0 {
		c.BundleMaxBytes = DefaultBundleMaxBytes
	}
	if c.MaxQueued <= 0 {
		c.MaxQueued = DefaultMaxQueued
	}
	if c.AnchorReuse <= 0 {
		c.AnchorReuse = 30 * time.Second
	}
	if c.Confirmations <= 0 {
		c.Confirmations = 1
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 5 * time.Second
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = 30 * time.Second
	}
	if c.AnchorDepth <= 0 {
		c.AnchorDepth = 50
	}
	if c.ReorgDepth <= 0 {
		c.ReorgDepth = c.AnchorDepth
	}
	c.ReorgDepth = max(c.ReorgDepth, c.Confirmations)
	if c.MaxReward == 0 {
		c.MaxReward = DefaultMaxReward
	}
	return c
}

// Kind returns the chain kind.
func Kind(cfg Config) actors.Kind {
	cfg = cfg.withDefaults()
	// Every post under way is an effect, with a prepare, a poll, a quote and a bundle beside
	// them.
	return actors.Kind{Name: KindName, MaxEffects: cfg.MaxInFlight + 4,
		New: func(name string) actors.Handler { return &actor{cfg: cfg, name: name} }}
}

// actor is one chain's activation. Its fields live in memory only: a new activation starts
// with none of them, and learns what was under way from storage.
type actor struct {
	cfg       Config
	name      string
	preparing bool            // a "prepare" effect is running
	polling   bool            // a "poll" effect is running
	renewing  bool            // a "quote" effect is running
	bundling  bool            // a "bundle" effect is running
	bundleAt  time.Time       // the "bundle" alarm this activation set is due then
	inflight  map[string]bool // transactions posted and not answered yet
	// Bundle mode: the wrappers whose header post is under way (their data follows once it
	// is taken), and those whose data upload is.
	posting   map[string]*arweave.Tx
	uploading map[string]bool
	// signerWarned: this activation logged that its item signer is not the chain's.
	signerWarned bool
	// bundleFailure is the cause of the last failure to prepare a bundle's wrapper, logged
	// when it starts or changes ("" since the last success).
	bundleFailure string
	quote         quote     // the anchor and prices last read
	quoteGen      int       // bumped each time the quote is dropped
	height        int64     // the highest height a poll read
	retryAt       time.Time // a failed prepare is tried again from then on
	// resignReady: the polls saw every transaction from meta.ResignFrom on mined or dead;
	// resignNext is the lowest event they have yet to (see resign.go).
	resignReady bool
	resignNext  int64
}

// Appended is the reply of MethodAppend.
type Appended struct {
	Chain     string `json:"chain"`
	EntityID  string `json:"entity_id"`
	Ver       int64  `json:"ver"`
	CID       string `json:"cid"`
	Status    string `json:"status"`
	CreatedAt int64  `json:"created_at"`
	Created   bool   `json:"created"` // 201 rather than 200 (not in the HTTP answer)
}

// eventView is the reply of MethodEvent.
type eventView struct {
	Seq      int64   `json:"seq"`
	EntityID string  `json:"entity_id"`
	Ver      int64   `json:"ver"`
	CID      string  `json:"cid"`
	Op       string  `json:"op"`
	Vis      string  `json:"vis"`
	TS       int64   `json:"ts"`
	TxID     string  `json:"tx_id"`
	PrevTx   *string `json:"prev_tx"`
	PrevCID  *string `json:"prev_cid"`
	Status   string  `json:"status"`
}

// Head is the reply of MethodHead.
type Head struct {
	Chain        string  `json:"chain"`
	Seq          int64   `json:"seq"`
	TxID         *string `json:"tx_id"`
	CID          *string `json:"cid"`
	ConfirmedSeq int64   `json:"confirmed_seq"`
	// BundleTx is the wrapper of the chain's last bundle (bundle mode): where a walk of the
	// chain on Arweave starts.
	BundleTx  *string `json:"bundle_tx,omitempty"`
	Queued    int     `json:"queued"`
	Failed    int     `json:"failed"`
	UpdatedAt int64   `json:"updated_at"`
}

func (a *actor) Receive(ctx *actors.Context, req actors.Request) ([]byte, error) {
	switch req.Method {
	case MethodAppend:
		var e Event
		if err := json.Unmarshal(req.Body, &e); err != nil {
			return nil, actors.Errorf("invalid_request", "malformed event")
		}
		return a.append(ctx, &e)
	case MethodHead:
		m, _, err := load[meta](ctx, metaKey)
		if err != nil {
			return nil, err
		}
		h := Head{Chain: ctx.ID(), Seq: m.Seq, ConfirmedSeq: m.ConfirmedSeq, Queued: m.Queued, Failed: m.Failed, UpdatedAt: m.UpdatedAt}
		if m.TxID != "" {
			h.TxID, h.CID = &m.TxID, &m.CID
		}
		if m.BundleTx != "" {
			h.BundleTx = &m.BundleTx
		}
		return json.Marshal(h)
	case MethodEvent:
		seq, err := strconv.ParseInt(string(req.Body), 10, 64)
		if err != nil {
			return nil, actors.Errorf("invalid_request", "seq must be an integer")
		}
		r, found, err := load[record](ctx, eventKey(seq))
		if err != nil || !found {
			return nil, orNotFound(err, "unknown_event", "no event %d in chain %s", seq, ctx.ID())
		}
		return json.Marshal(r.eventView)
	case MethodEntity:
		r, found, err := load[json.RawMessage](ctx, latestKey(string(req.Body)))
		if err != nil || !found {
			return nil, orNotFound(err, "unknown_entity", "no version of this entity is anchored in chain %s", ctx.ID())
		}
		return r, nil
	case MethodVersion:
		entity, verStr, _ := strings.Cut(string(req.Body), "\x00")
		ver, _ := strconv.ParseInt(verStr, 10, 64)
		v, found, err := load[version](ctx, versionKey(entity, ver))
		if err != nil || !found {
			return nil, orNotFound(err, "unknown_version", "no version %d of this entity in chain %s", ver, ctx.ID())
		}
		return json.Marshal(map[string]any{"entity_id": v.EntityID, "ver": v.Ver, "cid": v.CID, "status": v.Status,
			"tx_id": nullable(v.TxID), "seq": v.Seq, "ts": v.TS, "error": nullable(v.Error)})
	case MethodRetry:
		return a.retry(ctx)
	case MethodCheckpoint:
		return a.checkpoint(ctx)
	case MethodProof:
		var q Proof
		if err := json.Unmarshal(req.Body, &q); err != nil {
			return nil, actors.Errorf("invalid_request", "malformed proof request")
		}
		return a.proof(ctx, q)
	}
	return nil, fmt.Errorf("chain: unknown method %q", req.Method)
}

// maxRetry bounds the versions one retry requeues (one write): a caller finding more calls
// again.
const maxRetry = 10000

// retry puts the failed versions (up to maxRetry) back at the end of the queue.
func (a *actor) retry(ctx *actors.Context) ([]byte, error) {
	m, _, err := load[meta](ctx, metaKey)
	if err != nil {
		return nil, err
	}
	failed, err := ctx.List(actors.ListOptions{Prefix: []byte("f/"), Limit: maxRetry})
	if err != nil {
		return nil, err
	}
	for _, kv := range failed {
		key := kv.Key[len("f/"):]
		v, _, err := load[version](ctx, key)
		if err != nil {
			return nil, err
		}
		v.Status, v.Error, v.Queue = StatusQueued, "", m.Accepted
		store(ctx, key, v)
		ctx.Put(queueKey(m.Accepted), key)
		ctx.Delete(kv.Key)
		m.Accepted++
		m.Queued++
		m.Failed--
	}
	m.UpdatedAt = ctx.Now().UnixMilli()
	store(ctx, metaKey, m)
	if err := a.pump(ctx, m); err != nil {
		return nil, err
	}
	return json.Marshal(map[string]int{"requeued": len(failed)})
}

// enqueue queues new version e (normalized) at the end of the queue, with the partition
// clock's time when it has none.
func (a *actor) enqueue(ctx *actors.Context, m meta, e *Event) meta {
	now := ctx.Now().UnixMilli()
	if e.TS == 0 {
		e.TS = now
	}
	key := versionKey(e.EntityID, e.Ver)
	ctx.Put(queueKey(m.Accepted), key)
	store(ctx, key, version{Event: *e, Status: StatusQueued, CreatedAt: now, Queue: m.Accepted})
	m.Accepted++
	m.Queued++
	m.UpdatedAt = now
	a.cfg.Metrics.event(eventAccepted, 1)
	return m
}

// queueFull is the outcome of a new event past MaxQueued. The queue shrinks as events are
// signed, which the chain does at its next prepare: RetryAfter is when that is, after a failed
// one, and otherwise PollInterval, the pace at which confirmations make room for signing.
func (a *actor) queueFull(ctx *actors.Context, m meta) *actors.Error {
	e := actors.Errorf("queue_full", "chain %s holds %d events accepted and not yet signed, the most allowed", ctx.ID(), m.Queued)
	e.RetryAfter = max(a.cfg.PollInterval, a.retryAt.Sub(ctx.Now()))
	return e
}

func orNotFound(err error, code, format string, args ...any) error {
	if err != nil {
		return err
	}
	return actors.Errorf(code, format, args...)
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// append accepts an event: the version record and its queue entry in one write, or the
// record already there for an identical repeat.
func (a *actor) append(ctx *actors.Context, e *Event) ([]byte, error) {
	if err := e.Normalize(); err != nil {
		return nil, err
	}
	if e.EntityID == CheckpointEntity {
		return nil, actors.Errorf("invalid_id", "entity_id %s is the chain's own, for its checkpoints", CheckpointEntity)
	}
	key := versionKey(e.EntityID, e.Ver)
	v, found, err := load[version](ctx, key)
	if err != nil {
		return nil, err
	}
	if found {
		if !v.Same(e) {
			return nil, actors.Errorf("event_conflict", "version %d of this entity was accepted with other content", e.Ver)
		}
		return json.Marshal(Appended{Chain: ctx.ID(), EntityID: v.EntityID, Ver: v.Ver, CID: v.CID, Status: v.Status, CreatedAt: v.CreatedAt})
	}
	m, _, err := load[meta](ctx, metaKey)
	if err != nil {
		return nil, err
	}
	if m.Queued >= a.cfg.MaxQueued { // after the repeat check: a repeat is answered even when full
		return nil, a.queueFull(ctx, m)
	}
	m = a.enqueue(ctx, m, e)
	store(ctx, metaKey, m)
	if err := a.pump(ctx, m); err != nil {
		return nil, err
	}
	return json.Marshal(Appended{Chain: ctx.ID(), EntityID: e.EntityID, Ver: e.Ver, CID: e.CID, Status: StatusQueued, CreatedAt: m.UpdatedAt, Created: true})
}
