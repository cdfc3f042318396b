// Package oracle is the replay-protection nonce oracle (seed: ADR-005): it issues single-use
// nonces to organisations and accepts each one at most once.
//
// # Sharding
//
// Nonces live in Shards actors, ids "00" … "ff", independent of the organisation, so that one
// organisation issuing at full speed is spread over every partition instead of queueing on one
// actor. The API picks a shard at random per issue (RandomShard) and the nonce carries its
// shard, so consuming or reading one needs no lookup (ShardOf):
//
//	<shard: 2 lower-case hex digits> "_" <32 random bytes, base64url without padding>
//
// 46 characters in all, within the contract's ^[A-Za-z0-9_-]{1,128}$. A string of any other
// shape was never issued. The organisation is checked against the stored record.
//
// # Lifetime
//
// A nonce is issued at issued_at (the partition clock, ctx.Now) and expires at
// expires_at = issued_at + Config.TTL. Used or not, it is kept until
// remove_at = expires_at + Config.Retention, so that a replay is answered nonce_used or
// nonce_expired rather than unknown_nonce; from remove_at on it is treated as absent
// (unknown_nonce), whether or not it has been collected yet. Deletion is only garbage
// collection by the "gc" alarm, so no outcome depends on when collection runs.
//
// # Storage layout
//
// User keys of one shard actor:
//
//	n/<nonce>                          record (JSON): org_id, issued_at, expires_at, remove_at,
//	                                   used_at and request_id once consumed; c, while it is
//	                                   unused, the epoch that counted it toward the bound
//	t/<remove_at u64 BE><nonce>        empty; the removal index, earliest first (a
//	                                   actors.TimeIndex)
//	o/<org_id>                         the organisation's mark: at least its counted, unused
//	                                   nonces here (an actors.Counter, absent at zero;
//	                                   outstanding.go)
//
// Invariants, after every committed message:
//   - every n/ record has exactly one t/ entry, carrying its remove_at, and vice versa
//     (remove_at is fixed at issue, so the entry never moves);
//   - while any t/ entry exists the "gc" alarm is pending, due no later than the smallest
//     remove_at (or retried later by the runtime after a failed firing);
//   - the organisation's n/ records that are counted and unused number at most o/<org_id>;
//   - a shard whose nonces have all been collected holds no keys and no alarm.
//
// # Methods
//
// MethodIssue (body IssueRequest, reply Issued), MethodConsume (body ConsumeRequest, reply
// Consumed), MethodGet (body GetRequest, reply Info). Domain outcomes are *actors.Error with
// the codes invalid_request, invalid_id, unknown_nonce, org_mismatch, nonce_used,
// nonce_expired and too_many_outstanding.
//
// # Outstanding nonces
//
// Config.MaxOutstanding (--oracle-max-outstanding) bounds the nonces of one organisation that
// are issued and unused, with no call beyond the issue's and the consume's own: each shard
// counts, per organisation, the nonces it holds, and admits an organisation up to
// PerShard(MaxOutstanding) = MaxOutstanding / Shards (at least 1). Over the cluster an
// organisation so holds at most max(MaxOutstanding, Shards). A shard at the bound answers
// too_many_outstanding and writes nothing; the HTTP issue then tries other shards (issueTries
// in all) before it answers 429. The price of no extra call is that the bound is per shard: an
// organisation whose nonces sit unevenly — a few shards full while others have room — can be
// refused somewhat before it holds MaxOutstanding in all (with 4 random tries, when most of
// its shards are full).
//
// A nonce counts from its issue until its first successful consume, or, unused, until the gc
// alarm deletes it at remove_at: an expired unused nonce keeps counting for the retention
// after its expiry, which errs toward counting. A repeated or refused consume changes nothing.
// Whether a nonce counts is stored with it (record.Counted): nonces issued with
// the bound at 0, or before counting existed (an upgrade), never count (for at most one TTL
// after the bound is set, an organisation may hold that many more).
//
// The count is exact in memory and only bounded from above in storage (outstanding.go), so
// that issues and consumes write nothing for it in the steady state; after a new activation
// (a leader change, a restart) a shard counts the nonces issued before from that bound, which
// errs toward counting until they are collected.
package oracle

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/ident"
)

// KindName is the actor kind's name.
const KindName = "nonce-oracle"

// Defaults of Config's zero fields.
const (
	DefaultTTL       = time.Hour
	DefaultRetention = 10 * time.Minute
)

// Config holds the kind's settings, the service's settings (see Settings). Zero fields take
// their defaults.
type Config struct {
	TTL time.Duration // --oracle-nonce-ttl: lifetime of a nonce (DefaultTTL when zero)
	// MaxOutstanding (--oracle-max-outstanding) bounds the unused nonces of one organisation
	// (see the package documentation, Outstanding nonces); 0: no bound, and new nonces are not
	// counted.
	MaxOutstanding int
	// Retention is how long a nonce is kept after expires_at (DefaultRetention when zero).
	// The contract requires at least one minute; shorter values are for tests.
	Retention time.Duration
}

func (c Config) withDefaults() Config {
	if c.TTL <= 0 {
		c.TTL = DefaultTTL
	}
	if c.Retention <= 0 {
		c.Retention = DefaultRetention
	}
	return c
}

// Methods of a shard actor.
const (
	MethodIssue   = "issue"
	MethodConsume = "consume"
	MethodGet     = "get"
)

// GCAlarm is the name of the alarm that deletes nonces past their remove_at.
const GCAlarm = "gc"

// gcBatch bounds the nonces one firing of the gc alarm deletes. A firing that leaves due
// nonces behind re-arms the alarm for now.
const gcBatch = 1000

// MaxRequestID is the longest request_id accepted, in bytes.
const MaxRequestID = 128

// Shards is the number of shard actors.
const Shards = 256

// DefaultMaxOutstanding is the default --oracle-max-outstanding. A client holds a nonce for
// one request, so 100000 unused nonces at once is about 28 issues per second never consumed
// for a whole TTL (1 h): far past any honest use, while one organisation's records stay near
// 50 MB (about 500 bytes each on each replica, for an hour and the retention).
const DefaultMaxOutstanding = 100000

// PerShard is how many unused nonces of one organisation each shard admits under the bound
// limit: limit / Shards, at least 1; 0 when limit is 0 (no bound).
func PerShard(limit int) int {
	if limit <= 0 {
		return 0
	}
	return max(limit/Shards, 1)
}

// Bounds of the Retry-After of too_many_outstanding, which is TTL/retryAfterFraction within
// them (see fullRetryAfter).
const (
	retryAfterFraction = 60
	minRetryAfter      = time.Second
	maxRetryAfter      = time.Minute
)

const (
	randomBytes = 32
	hexDigits   = "0123456789abcdef"
)

// nonceLen is the length of every issued nonce: shard, "_", random part.
var nonceLen = 3 + base64.RawURLEncoding.EncodedLen(randomBytes)

// encoding decodes the random part strictly: the unused bits of the last character must be
// zero, so each random value has exactly one spelling.
var encoding = base64.RawURLEncoding.Strict()

// IssueRequest is the body of MethodIssue.
type IssueRequest struct {
	OrgID string `json:"org_id"`
}

// Issued is the reply of MethodIssue.
type Issued struct {
	Nonce     string `json:"nonce"`
	OrgID     string `json:"org_id"`
	IssuedAt  int64  `json:"issued_at"`
	ExpiresAt int64  `json:"expires_at"`
}

// ConsumeRequest is the body of MethodConsume. RequestID is optional: a consume repeated
// with the same non-empty RequestID as the one that used the nonce is answered again.
type ConsumeRequest struct {
	Nonce     string `json:"nonce"`
	OrgID     string `json:"org_id"`
	RequestID string `json:"request_id,omitempty"`
}

// Consumed is the reply of MethodConsume.
type Consumed struct {
	Nonce  string `json:"nonce"`
	UsedAt int64  `json:"used_at"`
}

// GetRequest is the body of MethodGet.
type GetRequest struct {
	Nonce string `json:"nonce"`
}

// Info is the reply of MethodGet. UsedAt is nil (JSON null) while the nonce is unused.
type Info struct {
	Nonce     string `json:"nonce"`
	OrgID     string `json:"org_id"`
	IssuedAt  int64  `json:"issued_at"`
	ExpiresAt int64  `json:"expires_at"`
	UsedAt    *int64 `json:"used_at"`
}

// ValidateOrg checks an org_id: invalid_request when empty, invalid_id when it does not match
// ^[A-Za-z0-9_-]{1,64}$.
func ValidateOrg(org string) *actors.Error {
	if org == "" {
		return actors.Errorf("invalid_request", "missing required field %q", "org_id")
	}
	if !ident.Name(org) {
		return actors.Errorf("invalid_id", "org_id is not a valid identifier")
	}
	return nil
}

// ValidateRequestID checks a request_id: at most MaxRequestID bytes (invalid_request).
func ValidateRequestID(id string) *actors.Error {
	if len(id) > MaxRequestID {
		return actors.Errorf("invalid_request", "request_id is %d bytes; at most %d are allowed", len(id), MaxRequestID)
	}
	return nil
}

// RandomShard picks the shard of a new nonce uniformly at random.
func RandomShard() string { return shardID(mrand.IntN(Shards)) }

func shardID(i int) string { return string([]byte{hexDigits[i>>4], hexDigits[i&15]}) }

// ShardOf returns the shard that issued nonce, or false when nonce does not have the shape of
// an issued nonce (and so was never issued).
func ShardOf(nonce string) (string, bool) {
	if len(nonce) != nonceLen || nonce[2] != '_' || !validShard(nonce[:2]) {
		return "", false
	}
	if b, err := encoding.DecodeString(nonce[3:]); err != nil || len(b) != randomBytes {
		return "", false
	}
	return nonce[:2], true
}

func validShard(s string) bool {
	if len(s) != 2 {
		return false
	}
	for i := range 2 {
		if (s[i] < '0' || s[i] > '9') && (s[i] < 'a' || s[i] > 'f') {
			return false
		}
	}
	return true
}

// Kind returns the actor kind.
func Kind(cfg Config) actors.Kind {
	cfg = cfg.withDefaults()
	return actors.Kind{Name: KindName, New: func(string) actors.Handler {
		return &shard{cfg: cfg, perShard: PerShard(cfg.MaxOutstanding), gc: actors.GCAlarm{Name: GCAlarm}}
	}}
}

// shard is one shard's activation. It caches the due time of its gc alarm (actors.GCAlarm),
// which it reads from storage on first need and forgets whenever the alarm fires, and its
// organisations' counts (counts, outstanding.go), which it starts over whenever a message's
// writes are rolled back.
type shard struct {
	cfg Config
	// perShard is the organisation's bound on this shard (PerShard); 0: none, and new nonces
	// are not counted.
	perShard int
	gc       actors.GCAlarm
	counts   counts
}

// record is the value of an n/ key. UsedAt is 0 while the nonce is unused. Counted is the
// epoch that counted the nonce toward its organisation's bound (outstanding.go), 0 when none
// did: its first consume, which clears it, or its removal unused, uncounts it. (Its JSON name
// is short: it is written with every nonce.)
type record struct {
	OrgID     string `json:"org_id"`
	IssuedAt  int64  `json:"issued_at"`
	ExpiresAt int64  `json:"expires_at"`
	RemoveAt  int64  `json:"remove_at"`
	UsedAt    int64  `json:"used_at,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	Counted   int64  `json:"c,omitempty"`
}

var (
	prefixNonce = []byte("n/")
	removeIndex = actors.TimeIndex{Prefix: []byte("t/")}
	prefixOrg   = []byte("o/")
)

func nonceKey(nonce string) []byte { return append(append([]byte(nil), prefixNonce...), nonce...) }

// methods are the shard's messages.
var methods = actors.Dispatch[*shard]{Name: "nonce oracle", Methods: map[string]actors.Method[*shard]{
	MethodIssue:   actors.JSON((*shard).issue),
	MethodConsume: actors.JSON((*shard).consume),
	MethodGet: actors.JSON(func(s *shard, ctx *actors.Context, in GetRequest) ([]byte, error) {
		return s.get(ctx, in.Nonce)
	}),
}}

func (s *shard) Receive(ctx *actors.Context, req actors.Request) (reply []byte, err error) {
	done := false
	defer func() {
		var outcome *actors.Error
		// A panic, or an error other than a domain outcome, rolls the message back.
		s.settle(!done || err != nil && !errors.As(err, &outcome))
	}()
	reply, err = methods.Receive(s, ctx, req)
	done = true
	s.gc.Observe(err)
	return reply, err
}

// issue stores a fresh nonce for in.OrgID, counted when there is a bound: too_many_outstanding,
// writing nothing, when the organisation counts perShard unused nonces here already (admit).
//
// It does not look for an existing record of the new nonce: the 256 bits come from
// crypto/rand, which never returns an error (the program crashes instead), so two equal
// nonces are as likely as guessing a 256-bit key. The lookup would be a Pebble miss through
// every memtable and level on each issue — the largest single cost of the issue path.
func (s *shard) issue(ctx *actors.Context, in IssueRequest) ([]byte, error) {
	if err := ValidateOrg(in.OrgID); err != nil {
		return nil, err
	}
	if !validShard(ctx.ID()) {
		return nil, fmt.Errorf("nonce oracle: actor id %q is not a shard", ctx.ID())
	}
	now := ctx.Now().UnixMilli()
	rec := record{OrgID: in.OrgID, IssuedAt: now, ExpiresAt: now + s.cfg.TTL.Milliseconds()}
	rec.RemoveAt = rec.ExpiresAt + s.cfg.Retention.Milliseconds()
	if s.perShard > 0 {
		if err := s.admit(ctx, in.OrgID, rec.RemoveAt); err != nil {
			return nil, err
		}
		rec.Counted = s.counts.epoch
	}
	nonce := generate(ctx.ID())
	reply, err := json.Marshal(Issued{Nonce: nonce, OrgID: rec.OrgID, IssuedAt: rec.IssuedAt, ExpiresAt: rec.ExpiresAt})
	if err != nil {
		return nil, err
	}
	if err := s.put(ctx, nonce, rec); err != nil {
		return nil, err
	}
	removeIndex.Put(ctx, rec.RemoveAt, nonce, []byte{})
	if err := s.gc.Arm(ctx, rec.RemoveAt); err != nil {
		return nil, err
	}
	return reply, nil
}

// full is the outcome of an issue past the bound. Its RetryAfter is a pace, not a promise:
// room comes back when the organisation consumes a nonce, which only it knows of, or when the
// gc alarm removes one it left unused, at the earliest remove_at of its nonces here, which
// only a per-organisation index would tell (one more write per issue). So it is a fixed
// fraction of the TTL (TTL/retryAfterFraction, within [minRetryAfter, maxRetryAfter]: 1 min
// at the default 1 h), which a client that keeps retrying at that pace tries a bounded number
// of times per nonce lifetime.
func (s *shard) full(ctx *actors.Context, held int) error {
	e := actors.Errorf("too_many_outstanding",
		"the organisation counts %d unused nonces in shard %s, its share of --oracle-max-outstanding (%d): consume them, or wait until unused ones are removed",
		held, ctx.ID(), s.cfg.MaxOutstanding)
	e.RetryAfter = fullRetryAfter(s.cfg.TTL)
	return e
}

// fullRetryAfter is the Retry-After of too_many_outstanding for nonces living ttl.
func fullRetryAfter(ttl time.Duration) time.Duration {
	return min(max(ttl/retryAfterFraction, minRetryAfter), maxRetryAfter)
}

// generate returns a new nonce of shard id.
func generate(id string) string {
	var b [randomBytes]byte
	rand.Read(b[:])
	return id + "_" + encoding.EncodeToString(b[:])
}

// consume marks the nonce used by in.OrgID, uncounting it when it was counted. Outcomes, in
// order: unknown_nonce (never issued here, or past remove_at); org_mismatch; the same reply
// again when the nonce was used with the same non-empty request_id; nonce_used;
// nonce_expired. Only the first consume that succeeds writes.
func (s *shard) consume(ctx *actors.Context, in ConsumeRequest) ([]byte, error) {
	if err := ValidateOrg(in.OrgID); err != nil {
		return nil, err
	}
	if err := ValidateRequestID(in.RequestID); err != nil {
		return nil, err
	}
	now := ctx.Now().UnixMilli()
	rec, err := s.record(ctx, in.Nonce, now)
	if err != nil {
		return nil, err
	}
	if rec.OrgID != in.OrgID {
		return nil, actors.Errorf("org_mismatch", "the nonce was issued to another organisation")
	}
	if rec.UsedAt != 0 {
		if in.RequestID != "" && in.RequestID == rec.RequestID {
			return json.Marshal(Consumed{Nonce: in.Nonce, UsedAt: rec.UsedAt})
		}
		return nil, actors.Errorf("nonce_used", "nonce already used: the first consume consumed it at %d", rec.UsedAt)
	}
	if now >= rec.ExpiresAt {
		return nil, actors.Errorf("nonce_expired", "the nonce expired at %d", rec.ExpiresAt)
	}
	counted := rec.Counted // used, the nonce counts no more: the record need not say by whom
	rec.UsedAt, rec.RequestID, rec.Counted = now, in.RequestID, 0
	reply, err := json.Marshal(Consumed{Nonce: in.Nonce, UsedAt: now})
	if err != nil {
		return nil, err
	}
	if err := s.put(ctx, in.Nonce, rec); err != nil {
		return nil, err
	}
	if counted != 0 && s.perShard > 0 {
		if err := s.release(ctx, in.OrgID, counted); err != nil {
			return nil, err
		}
	}
	return reply, nil
}

// get answers the stored nonce (unknown_nonce when never issued here or past remove_at).
func (s *shard) get(ctx *actors.Context, nonce string) ([]byte, error) {
	rec, err := s.record(ctx, nonce, ctx.Now().UnixMilli())
	if err != nil {
		return nil, err
	}
	info := Info{Nonce: nonce, OrgID: rec.OrgID, IssuedAt: rec.IssuedAt, ExpiresAt: rec.ExpiresAt}
	if rec.UsedAt != 0 {
		info.UsedAt = &rec.UsedAt
	}
	return json.Marshal(info)
}

// record reads the nonce's record as of now: unknown_nonce when it is not a nonce of this
// shard, is not stored, or is past its remove_at (collected or not).
func (s *shard) record(ctx *actors.Context, nonce string, now int64) (record, error) {
	var rec record
	unknown := actors.Errorf("unknown_nonce", "no such nonce")
	if id, ok := ShardOf(nonce); !ok || id != ctx.ID() {
		return rec, unknown
	}
	v, found, err := ctx.Get(nonceKey(nonce))
	if err != nil {
		return rec, err
	}
	if !found {
		return rec, unknown
	}
	if err := json.Unmarshal(v, &rec); err != nil {
		return rec, fmt.Errorf("nonce oracle %s: record of %q: %w", ctx.ID(), nonce, err)
	}
	if now >= rec.RemoveAt {
		return rec, unknown
	}
	return rec, nil
}

// put writes the nonce's record.
func (s *shard) put(ctx *actors.Context, nonce string, rec record) error {
	v, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("nonce oracle %s: encode record of %q: %w", ctx.ID(), nonce, err)
	}
	ctx.Put(nonceKey(nonce), v)
	return nil
}

// Alarm runs the gc alarm (collect). A firing that fails is rolled back, with the counts it
// cached.
func (s *shard) Alarm(ctx *actors.Context, a actors.Alarm) (err error) {
	done := false
	defer func() { s.settle(!done || err != nil) }() // a panic, or an error: rolled back
	err = s.collect(ctx, a)
	done = true
	return err
}

// collect deletes up to gcBatch nonces past their remove_at, earliest first, uncounting those
// counted and never used, and re-arms for the next remove_at (for now when due nonces
// remain). With nothing left it lets the alarm go.
func (s *shard) collect(ctx *actors.Context, a actors.Alarm) error {
	if a.Name != GCAlarm {
		return nil // not ours: nothing to do, and returning nil drops it
	}
	// A failed firing is moved later by the runtime: until this one succeeds, the cached due
	// time is unknown.
	s.gc.Forget()
	now := ctx.Now().UnixMilli()
	kvs, err := ctx.List(actors.ListOptions{Prefix: removeIndex.Prefix, Limit: gcBatch + 1})
	if err != nil {
		return err
	}
	next, firstLeft := int64(0), int64(-1)
	touched := map[string]*count{} // organisations of the counted nonces removed
	for i, kv := range kvs {
		at, nonce, err := removeIndex.Parse(kv.Key)
		if err != nil {
			return fmt.Errorf("nonce oracle %s: %w", ctx.ID(), err)
		}
		if at > now {
			next, firstLeft = at, at
			break
		}
		if i == gcBatch {
			next, firstLeft = now, at
			break
		}
		if s.perShard > 0 {
			if err := s.removing(ctx, nonce, touched); err != nil {
				return err
			}
		}
		ctx.Delete(nonceKey(nonce))
		ctx.Delete(kv.Key)
	}
	if err := s.tidy(ctx, touched, firstLeft, now); err != nil {
		return err
	}
	if next == 0 {
		s.gc.Dropped() // returning nil without setting it again drops the alarm
		return nil
	}
	return s.gc.Set(ctx, next)
}
