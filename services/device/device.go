// Package device is the device attestation registry kind (seed: Cloudflare
// AttestationRegistryDO): one actor per registry name holds devices, each with an Ed25519
// public key, and the challenge nonces issued to them. A device proves it holds its key by
// signing a challenge nonce; the first verify attempt consumes the nonce whatever its outcome.
//
// Expiry is decided when reading, with the partition clock (ctx.Now): a nonce is expired once
// now >= expires_at; a device is live while now < last_seen + DeviceTTL. Deleting what expired
// is only garbage collection — by the single "gc" alarm and, inline, by any message that meets
// an expired device — so an expired device behaves exactly as if it had been collected.
//
// A nonce's record is kept for one more NonceTTL after it expires (its retention), used or
// not, so that a late or replayed verify is answered nonce_expired or nonce_used rather than
// unknown_nonce; then the gc alarm removes it. Once removed, a verify of it is unknown_nonce:
// still refused, since it no longer has a record to match.
//
// # Storage layout
//
// User keys of one registry actor (<u64> is big-endian, so byte order is time order; device
// ids match ^[A-Za-z0-9_-]{1,128}$ and never contain '/'):
//
//	meta/count                      u64: how many dev/ records are stored (absent when 0)
//	dev/<device_id>                 device record (JSON): key, version, platform, build hash,
//	                                times, and its count of pend/ entries
//	seen/<u64 last_seen><device_id> empty; device expiry index, oldest last_seen first
//	nonce/<nonce>                   nonce record: u64 expires_at, used flag byte, (when used:
//	                                u64 used_at, outcome, request_id), device id; the outcome
//	                                byte is 0 verified, 1 expired, 2 bad signature, 3 signature
//	                                not base64
//	exp/<u64 expires_at><nonce>     a copy of the nonce record; the nonce expiry index,
//	                                earliest first (collected at expires_at + NonceTTL)
//	pend/<device_id>/<u64 expires_at><nonce>
//	                                empty; the device's unused nonces, earliest first
//
// Invariants, after every committed message:
//   - every dev/ record has exactly one seen/ entry, carrying its last_seen, and vice versa;
//   - meta/count equals the number of dev/ records, so counting is O(1);
//   - every nonce/ record has exactly one exp/ entry, holding the same value; it has a pend/
//     entry exactly when it is unused, and then its device has a dev/ record (removing a
//     device removes its unused nonces; a used nonce stays, as a replay marker, until its
//     retention ends);
//   - a device record's pending count equals the number of its pend/ entries, expired or not,
//     so a device below MaxPending is known to be so in O(1);
//   - while any seen/ or exp/ entry exists the "gc" alarm is pending, due no later than the
//     earliest collection time among them (expires_at + NonceTTL, last_seen + DeviceTTL), or
//     already due (a firing that leaves due entries behind re-arms for its own time);
//   - a registry whose entries have all expired and been collected holds no keys at all.
//
// Every message touches O(1) keys plus the entries it returns or removes: the pending count of
// a device is a range of its pend/ index (read only when its stored count reaches MaxPending,
// or for GET), never a scan of all nonces. The indexes are actors.TimeIndex values, meta/count a
// actors.Counter, the gc alarm a actors.GCAlarm.
//
// # Methods
//
// MethodRegister (body RegisterRequest, reply Registered), MethodChallenge (ChallengeRequest,
// Challenge), MethodVerify (Verification, Verified), MethodGet (DeviceRef, Device),
// MethodDelete (DeviceRef, empty reply). Domain outcomes are *actors.Error with the codes
// invalid_request, invalid_id, registry_full, device_exists, unknown_device, too_many_pending,
// unknown_nonce, nonce_used, nonce_expired and invalid_signature (see the API contract).
//
// # Key rotation
//
// Re-registering a live device with its public key is open. With another key it needs a
// proof of the current key — a nonce issued to the device, signed with that key — or the
// admin token (RegisterRequest.Admin, set by the HTTP edge); with neither it is
// device_exists. The proof is checked as a verify is, and like a verify it consumes the nonce
// whatever its outcome: a refused rotation commits the consumption with its outcome.
package device

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/ident"
)

// KindName is the actor kind's name.
const KindName = "device-registry"

// Config holds the kind's limits, the service's settings (see Settings). All must be positive
// (the settings' checks ensure it).
type Config struct {
	NonceTTL   time.Duration // --attest-nonce-ttl: lifetime of a challenge nonce
	MaxPending int           // --max-pending-per-device: unexpired unused nonces per device
	MaxDevices int           // --max-devices: devices per registry
	DeviceTTL  time.Duration // --device-ttl: devices not seen for this long are removed
}

// Methods of a registry actor.
const (
	MethodRegister  = "register"
	MethodChallenge = "challenge"
	MethodVerify    = "verify"
	MethodGet       = "get"
	MethodDelete    = "delete"
)

// GCAlarm is the name of the one alarm that deletes expired nonces and devices.
const GCAlarm = "gc"

// gcBatch bounds the nonces and devices one firing of the gc alarm, or one registration into
// a full registry, deletes. A firing that leaves due entries behind re-arms the alarm for now.
const gcBatch = 1000

// nonceBytes is the entropy of a challenge nonce; it is sent base64url without padding.
const nonceBytes = 32

// Registration is the body of the register endpoints. PublicKey is a base64 Ed25519 public
// key (standard or URL alphabet, padded or not) of 32 bytes. Nonce and Signature, given
// together or not at all, prove the current key of a live device whose key this registration
// changes: a nonce issued to the device and the current key's signature over it, as in
// Verification. They are checked only when the key changes without the admin token.
type Registration struct {
	DeviceID  string `json:"device_id"`
	Version   string `json:"version"`
	Platform  string `json:"platform"`
	BuildHash string `json:"build_hash"`
	PublicKey string `json:"public_key"`
	Nonce     string `json:"nonce,omitempty"`
	Signature string `json:"signature,omitempty"`
}

// RegisterRequest is the body of MethodRegister: a registration, and whether the request
// carried the admin token, which replaces the proof of the current key. Only the HTTP edge
// sets Admin; a client's body cannot (it is a Registration).
type RegisterRequest struct {
	Registration
	Admin bool `json:"admin,omitempty"`
}

// Registered is the reply of MethodRegister. Created is true for a new device (including one
// registering again after it expired or was deleted), false for a re-registration.
type Registered struct {
	DeviceID     string `json:"device_id"`
	RegisteredAt int64  `json:"registered_at"`
	LastSeen     int64  `json:"last_seen"`
	Created      bool   `json:"created"`
}

// ChallengeRequest is the body of MethodChallenge and of the challenge endpoints.
type ChallengeRequest struct {
	DeviceID string `json:"device_id"`
}

// Challenge is the reply of MethodChallenge: a fresh nonce and when it expires (Unix ms).
type Challenge struct {
	Nonce     string `json:"nonce"`
	ExpiresAt int64  `json:"expires_at"`
}

// Verification is the body of MethodVerify and of the verify endpoints. Signature is a base64
// Ed25519 signature over the UTF-8 bytes of Nonce; a bad encoding is a failed verify attempt.
type Verification struct {
	DeviceID  string `json:"device_id"`
	Nonce     string `json:"nonce"`
	Signature string `json:"signature"`
	// RequestID (optional, an extension of the contract) makes a verify safe to retry after
	// an unknown outcome: a verify of a nonce that this same request_id consumed is answered
	// with that first attempt's outcome again, not nonce_used.
	RequestID string `json:"request_id,omitempty"`
}

// Verified is the reply of a successful MethodVerify.
type Verified struct {
	Verified   bool   `json:"verified"`
	DeviceID   string `json:"device_id"`
	VerifiedAt int64  `json:"verified_at"`
}

// DeviceRef is the body of MethodGet and MethodDelete.
type DeviceRef struct {
	DeviceID string `json:"device_id"`
}

// Device is the reply of MethodGet. PendingChallenges counts the device's unexpired, unused
// nonces.
type Device struct {
	DeviceID          string `json:"device_id"`
	Version           string `json:"version"`
	Platform          string `json:"platform"`
	BuildHash         string `json:"build_hash"`
	RegisteredAt      int64  `json:"registered_at"`
	LastSeen          int64  `json:"last_seen"`
	PendingChallenges int    `json:"pending_challenges"`
}

// MaxFieldBytes bounds each of a registration's version, platform and build_hash.
const MaxFieldBytes = 256

// Validate checks r. Errors: invalid_request (a field missing or empty, or over
// MaxFieldBytes; public_key not base64 of exactly 32 bytes; nonce without signature or
// signature without nonce), invalid_id (device_id malformed). A nonce that cannot be one is
// refused (unknown_nonce) only when the proof is checked.
func (r Registration) Validate() *actors.Error {
	if err := checkDeviceID(r.DeviceID); err != nil {
		return err
	}
	for _, f := range []struct{ name, v string }{{"version", r.Version}, {"platform", r.Platform},
		{"build_hash", r.BuildHash}, {"public_key", r.PublicKey}} {
		if f.v == "" {
			return missing(f.name)
		}
		if len(f.v) > MaxFieldBytes {
			return actors.Errorf("invalid_request", "%s is longer than %d bytes", f.name, MaxFieldBytes)
		}
	}
	if k := decodeBase64(r.PublicKey); len(k) != ed25519.PublicKeySize {
		return actors.Errorf("invalid_request", "public_key must be the base64 encoding of a %d-byte Ed25519 key", ed25519.PublicKeySize)
	}
	switch {
	case r.Nonce != "" && r.Signature == "":
		return actors.Errorf("invalid_request", "nonce without signature: a proof of the current key needs both")
	case r.Signature != "" && r.Nonce == "":
		return actors.Errorf("invalid_request", "signature without nonce: a proof of the current key needs both")
	}
	return nil
}

// Validate checks c: device_id present (invalid_request) and well formed (invalid_id).
func (c ChallengeRequest) Validate() *actors.Error { return checkDeviceID(c.DeviceID) }

// Validate checks d: device_id present (invalid_request) and well formed (invalid_id).
func (d DeviceRef) Validate() *actors.Error { return checkDeviceID(d.DeviceID) }

// Validate checks v: every field present (invalid_request), device_id well formed
// (invalid_id), and nonce well formed — a nonce that does not parse was never issued, so it is
// unknown_nonce. The signature's encoding is checked by the verify attempt itself.
func (v Verification) Validate() *actors.Error {
	if err := checkDeviceID(v.DeviceID); err != nil {
		return err
	}
	if v.Nonce == "" {
		return missing("nonce")
	}
	if v.Signature == "" {
		return missing("signature")
	}
	if !ident.Long(v.Nonce) {
		return actors.Errorf("unknown_nonce", "nonce was not issued by this registry")
	}
	if v.RequestID != "" && !ident.Long(v.RequestID) {
		return actors.Errorf("invalid_request", "request_id must match %s", ident.LongPattern)
	}
	return nil
}

func checkDeviceID(id string) *actors.Error {
	if id == "" {
		return missing("device_id")
	}
	if !ident.Long(id) {
		return actors.Errorf("invalid_id", "device_id is not a valid identifier")
	}
	return nil
}

func missing(field string) *actors.Error {
	return actors.Errorf("invalid_request", "missing required field %q", field)
}

// decodeBase64 decodes s in any of the standard and URL-safe alphabets, padded or not; nil
// when it is none of them.
func decodeBase64(s string) []byte {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding,
		base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b
		}
	}
	return nil
}

// Kind returns the actor kind.
func Kind(cfg Config) actors.Kind {
	return actors.Kind{Name: KindName, New: func(string) actors.Handler {
		return &registry{cfg: cfg, gc: actors.GCAlarm{Name: GCAlarm}}
	}}
}

// registry is one registry's activation. It caches one thing, derivable from storage: when
// the gc alarm is due (actors.GCAlarm).
type registry struct {
	cfg Config
	gc  actors.GCAlarm
}

// record is the value of a dev/ key.
type record struct {
	PublicKey    []byte `json:"public_key"`
	Version      string `json:"version"`
	Platform     string `json:"platform"`
	BuildHash    string `json:"build_hash"`
	RegisteredAt int64  `json:"registered_at"`
	LastSeen     int64  `json:"last_seen"`
	Pending      int    `json:"pending"` // pend/ entries of the device, expired or not
}

// nonceRecord is the value of a nonce/ key: u64 expires_at, a used byte, then — when used —
// u64 used_at, the outcome byte and the consuming request_id (u8 length, bytes), then the
// device id.
type nonceRecord struct {
	ExpiresAt int64
	Used      bool
	DeviceID  string
	// Set when used: when, with which outcome, by which request_id ("" if none was given).
	UsedAt    int64
	Outcome   outcome
	RequestID string
}

// outcome is what the consuming attempt answered: a verify, or the proof of a key rotation.
type outcome byte

const (
	outcomeVerified outcome = iota
	outcomeExpired
	outcomeBadSignature
	outcomeBadEncoding // the signature was not base64
)

func (n nonceRecord) encode() []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(n.ExpiresAt))
	if !n.Used {
		return append(append(b, 0), n.DeviceID...)
	}
	b = binary.BigEndian.AppendUint64(append(b, 1), uint64(n.UsedAt))
	b = append(b, byte(n.Outcome), byte(len(n.RequestID)))
	b = append(b, n.RequestID...)
	return append(b, n.DeviceID...)
}

func decodeNonceRecord(b []byte) (nonceRecord, error) {
	bad := fmt.Errorf("malformed nonce record %x", b)
	if len(b) < 9 || b[8] > 1 {
		return nonceRecord{}, bad
	}
	n := nonceRecord{ExpiresAt: int64(binary.BigEndian.Uint64(b)), Used: b[8] == 1}
	rest := b[9:]
	if n.Used {
		if len(rest) < 10 || len(rest) < 10+int(rest[9]) || rest[8] > byte(outcomeBadEncoding) {
			return nonceRecord{}, bad
		}
		n.UsedAt, n.Outcome = int64(binary.BigEndian.Uint64(rest)), outcome(rest[8])
		n.RequestID = string(rest[10 : 10+int(rest[9])])
		rest = rest[10+int(rest[9]):]
	}
	n.DeviceID = string(rest)
	return n, nil
}

// replay answers a verify repeated by the request that consumed the nonce, as it was first
// answered.
func (n nonceRecord) replay() ([]byte, error) {
	switch n.Outcome {
	case outcomeExpired:
		return nil, actors.Errorf("nonce_expired", "nonce expired at %d", n.ExpiresAt)
	case outcomeBadSignature:
		return nil, actors.Errorf("invalid_signature", "signature does not verify with the device's key")
	case outcomeBadEncoding:
		return nil, actors.Errorf("invalid_signature", "signature is not base64: it must be the base64 encoding of a %d-byte Ed25519 signature", ed25519.SignatureSize)
	}
	return json.Marshal(Verified{Verified: true, DeviceID: n.DeviceID, VerifiedAt: n.UsedAt})
}

var (
	count       = actors.Counter{Key: []byte("meta/count")}
	prefixDev   = []byte("dev/")
	seenIndex   = actors.TimeIndex{Prefix: []byte("seen/")}
	prefixNonce = []byte("nonce/")
	expIndex    = actors.TimeIndex{Prefix: []byte("exp/")}
	prefixPend  = []byte("pend/")
)

func devKey(id string) []byte  { return append(append([]byte(nil), prefixDev...), id...) }
func nonceKey(n string) []byte { return append(append([]byte(nil), prefixNonce...), n...) }

// pendIndex is the index of a device's unused nonces: pend/<device_id>/<u64 expires_at><nonce>.
func pendIndex(id string) actors.TimeIndex {
	return actors.TimeIndex{Prefix: append(append(append([]byte(nil), prefixPend...), id...), '/')}
}

// methods are the registry's messages.
var methods = actors.Dispatch[*registry]{Name: "device registry", Methods: map[string]actors.Method[*registry]{
	MethodRegister:  actors.JSON((*registry).register),
	MethodChallenge: actors.JSON((*registry).challenge),
	MethodVerify:    actors.JSON((*registry).verify),
	MethodGet:       actors.JSON((*registry).get),
	MethodDelete: actors.JSON(func(r *registry, ctx *actors.Context, d DeviceRef) ([]byte, error) {
		return nil, r.delete(ctx, d)
	}),
}}

func (r *registry) Receive(ctx *actors.Context, req actors.Request) ([]byte, error) {
	reply, err := methods.Receive(r, ctx, req)
	r.gc.Observe(err)
	return reply, err
}

// nonceTTL and deviceTTL are the TTLs in milliseconds (at least 1).
func (r *registry) nonceTTL() int64  { return max(r.cfg.NonceTTL.Milliseconds(), 1) }
func (r *registry) deviceTTL() int64 { return max(r.cfg.DeviceTTL.Milliseconds(), 1) }

// live reports whether a device seen at lastSeen is live at now.
func (r *registry) live(lastSeen, now int64) bool { return now < lastSeen+r.deviceTTL() }

// register creates a device (Created), re-registers a live one (keeping registered_at,
// replacing everything else), or refuses a new one with registry_full when MaxDevices devices
// are stored. An expired device not yet collected counts as absent: it is collected and the
// device registers anew; when the registry is full, expired devices are collected first.
// A re-registration that changes the key needs the admin token or a proof of the current key
// (see prove).
func (r *registry) register(ctx *actors.Context, req RegisterRequest) ([]byte, error) {
	reg := req.Registration
	if err := reg.Validate(); err != nil {
		return nil, err
	}
	now := ctx.Now().UnixMilli()
	id := reg.DeviceID
	old, found, err := r.device(ctx, id)
	if err != nil {
		return nil, err
	}
	rec := record{PublicKey: decodeBase64(reg.PublicKey), Version: reg.Version, Platform: reg.Platform,
		BuildHash: reg.BuildHash, RegisteredAt: now, LastSeen: now}
	if found && r.live(old.LastSeen, now) {
		if !bytes.Equal(rec.PublicKey, old.PublicKey) && !req.Admin {
			if err := r.prove(ctx, id, &old, reg.Nonce, reg.Signature, now); err != nil {
				return nil, err
			}
		}
		rec.RegisteredAt, rec.Pending = old.RegisteredAt, old.Pending
		if err := r.touch(ctx, id, rec, old.LastSeen); err != nil {
			return nil, err
		}
		return json.Marshal(Registered{DeviceID: id, RegisteredAt: rec.RegisteredAt, LastSeen: now})
	}

	stored, err := count.Get(ctx)
	if err != nil {
		return nil, err
	}
	n := stored
	if found {
		if err := r.remove(ctx, id, old.LastSeen); err != nil {
			return nil, err
		}
		n--
	}
	if n >= r.cfg.MaxDevices {
		// Expired devices still stored must not count: collect the oldest, in expiry order,
		// until a slot frees or the oldest left is live.
		deleted, err := r.collectDevices(ctx, now, min(n-r.cfg.MaxDevices+1, gcBatch))
		if err != nil {
			return nil, err
		}
		n -= deleted
	}
	if n >= r.cfg.MaxDevices {
		if n != stored {
			count.Set(ctx, n)
		}
		return nil, r.full(ctx, now)
	}
	if err := r.put(ctx, id, rec); err != nil {
		return nil, err
	}
	seenIndex.Put(ctx, now, id, []byte{})
	count.Set(ctx, n+1)
	if err := r.gc.Arm(ctx, now+r.deviceTTL()); err != nil {
		return nil, err
	}
	return json.Marshal(Registered{DeviceID: id, RegisteredAt: now, LastSeen: now, Created: true})
}

// prove checks the proof of the current key of the live device id (stored as dev) that a
// key rotation gives: nonce, issued to the device, and sig, the current key's signature over
// it. Without a proof the outcome is device_exists. Otherwise it is an attempt as a verify's:
// unknown_nonce, nonce_used, or else the nonce is consumed (dev.Pending counts it) and the
// outcome is nonce_expired, invalid_signature or nil. A failed attempt writes dev here, since
// the refusal commits the consumption; on success the caller writes the device.
func (r *registry) prove(ctx *actors.Context, id string, dev *record, nonce, sig string, now int64) error {
	if nonce == "" {
		return actors.Errorf("device_exists", "device %q is registered with another public_key: "+
			"prove the current key with a nonce and its signature, or have an admin delete the device", id)
	}
	nr, err := r.issuedNonce(ctx, id, nonce)
	if err != nil {
		return err
	}
	if nr.Used {
		return actors.Errorf("nonce_used", "nonce already used: its first attempt consumed it, whatever its outcome")
	}
	if nr = r.consume(ctx, id, dev, nonce, nr, sig, "", now); nr.Outcome == outcomeVerified {
		return nil
	}
	if err := r.put(ctx, id, *dev); err != nil {
		return err
	}
	_, err = nr.replay()
	return err
}

// full is the registry_full outcome; RetryAfter is when the oldest device expires.
func (r *registry) full(ctx *actors.Context, now int64) error {
	e := actors.Errorf("registry_full", "the registry holds %d devices", r.cfg.MaxDevices)
	seen, _, ok, err := seenIndex.First(ctx, nil)
	if err != nil {
		return err
	}
	e.RetryAfter = time.Second
	if ok {
		e.RetryAfter = time.Duration(max(seen+r.deviceTTL()-now, 1)) * time.Millisecond
	}
	return e
}

// liveDevice reads a live device. An expired one is collected (the caller's writes commit
// with the outcome) and reported absent, exactly as if the gc alarm had already run.
func (r *registry) liveDevice(ctx *actors.Context, id string, now int64) (record, bool, error) {
	rec, found, err := r.device(ctx, id)
	if err != nil || !found {
		return rec, false, err
	}
	if r.live(rec.LastSeen, now) {
		return rec, true, nil
	}
	if err := r.removeCounted(ctx, id, rec.LastSeen); err != nil {
		return rec, false, err
	}
	return rec, false, nil
}

func unknownDevice(id string) *actors.Error {
	return actors.Errorf("unknown_device", "device %q is not registered", id)
}

// challenge issues a nonce to a live device, unless it already holds MaxPending unexpired
// unused nonces (too_many_pending, RetryAfter = until the oldest of them expires).
func (r *registry) challenge(ctx *actors.Context, c ChallengeRequest) ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	now := ctx.Now().UnixMilli()
	id := c.DeviceID
	dev, ok, err := r.liveDevice(ctx, id, now)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, unknownDevice(id)
	}
	if dev.Pending >= r.cfg.MaxPending { // some may have expired: count the unexpired ones
		pending, err := r.pending(ctx, id, now, r.cfg.MaxPending)
		if err != nil {
			return nil, err
		}
		if len(pending) >= r.cfg.MaxPending {
			exp, _, err := pendIndex(id).Parse(pending[0].Key)
			if err != nil {
				return nil, err
			}
			e := actors.Errorf("too_many_pending", "device %q already holds %d unexpired challenges", id, len(pending))
			e.RetryAfter = time.Duration(exp-now) * time.Millisecond
			return nil, e
		}
	}

	raw := make([]byte, nonceBytes)
	if _, err := rand.Read(raw); err != nil {
		return nil, fmt.Errorf("generate nonce: %w", err)
	}
	nonce := base64.RawURLEncoding.EncodeToString(raw)
	// 256 random bits: a collision with a stored nonce is as likely as guessing one.
	exp := now + r.nonceTTL()
	nr := nonceRecord{ExpiresAt: exp, DeviceID: id}.encode()
	ctx.Put(nonceKey(nonce), nr)
	expIndex.Put(ctx, exp, nonce, nr)
	pendIndex(id).Put(ctx, exp, nonce, []byte{})
	dev.Pending++
	if err := r.put(ctx, id, dev); err != nil {
		return nil, err
	}
	if err := r.gc.Arm(ctx, exp+r.nonceTTL()); err != nil {
		return nil, err
	}
	return json.Marshal(Challenge{Nonce: nonce, ExpiresAt: exp})
}

// pending lists up to limit (≤ 0: all) of the device's unexpired unused nonces, earliest
// expiry first: the part of its pend/ index expiring after now.
func (r *registry) pending(ctx *actors.Context, id string, now int64, limit int) ([]actors.KV, error) {
	return pendIndex(id).From(ctx, now+1, limit)
}

// verify checks a signed nonce. Outcomes, in order: a nonce never issued to this device is
// unknown_nonce (whoever it was issued to); a used one is nonce_used (also when expired); one
// whose device expired is unknown_nonce (collection would have removed it). Otherwise the
// attempt consumes the nonce — it stays as a used marker until its retention ends — and is
// nonce_expired, invalid_signature, or verified, which updates the device's last_seen.
func (r *registry) verify(ctx *actors.Context, v Verification) ([]byte, error) {
	if err := v.Validate(); err != nil {
		return nil, err
	}
	now := ctx.Now().UnixMilli()
	nr, err := r.issuedNonce(ctx, v.DeviceID, v.Nonce)
	if err != nil {
		return nil, err
	}
	if nr.Used {
		if v.RequestID != "" && v.RequestID == nr.RequestID {
			return nr.replay()
		}
		return nil, actors.Errorf("nonce_used", "nonce already used: the first verify attempt consumed it, whatever its outcome")
	}
	dev, ok, err := r.liveDevice(ctx, v.DeviceID, now)
	if err != nil {
		return nil, err
	}
	if !ok { // the nonce went with its expired device
		return nil, unknownNonce(v.DeviceID)
	}

	nr = r.consume(ctx, v.DeviceID, &dev, v.Nonce, nr, v.Signature, v.RequestID, now)
	if nr.Outcome != outcomeVerified {
		if err := r.put(ctx, v.DeviceID, dev); err != nil {
			return nil, err
		}
		return nr.replay()
	}
	seen := dev.LastSeen
	dev.LastSeen = now
	if err := r.touch(ctx, v.DeviceID, dev, seen); err != nil {
		return nil, err
	}
	return json.Marshal(Verified{Verified: true, DeviceID: v.DeviceID, VerifiedAt: now})
}

func unknownNonce(id string) *actors.Error {
	return actors.Errorf("unknown_nonce", "nonce was not issued to device %q", id)
}

// issuedNonce reads the record of a nonce issued to device id, used or not: unknown_nonce
// when there is none (never issued, issued to another device, removed, or not a nonce at all).
func (r *registry) issuedNonce(ctx *actors.Context, id, nonce string) (nonceRecord, error) {
	if !ident.Long(nonce) {
		return nonceRecord{}, unknownNonce(id)
	}
	nr, found, err := r.nonce(ctx, nonce)
	if err != nil {
		return nr, err
	}
	if !found || nr.DeviceID != id {
		return nr, unknownNonce(id)
	}
	return nr, nil
}

// consume is the first attempt at the unused nonce nr of the live device id (stored as dev),
// signed with sig, by requestID ("" for none): it marks the nonce used with the attempt's
// outcome — expired, signature not base64, bad signature, or verified — and removes it from
// the device's pending nonces, decrementing dev.Pending, which the caller writes.
func (r *registry) consume(ctx *actors.Context, id string, dev *record, nonce string, nr nonceRecord, sig, requestID string, now int64) nonceRecord {
	nr.Used, nr.UsedAt, nr.RequestID, nr.Outcome = true, now, requestID, outcomeVerified
	raw := decodeBase64(sig)
	switch {
	case now >= nr.ExpiresAt:
		nr.Outcome = outcomeExpired
	case raw == nil:
		nr.Outcome = outcomeBadEncoding
	case len(raw) != ed25519.SignatureSize || !ed25519.Verify(dev.PublicKey, []byte(nonce), raw):
		nr.Outcome = outcomeBadSignature
	}
	ctx.Put(nonceKey(nonce), nr.encode())
	expIndex.Put(ctx, nr.ExpiresAt, nonce, nr.encode())
	pendIndex(id).Delete(ctx, nr.ExpiresAt, nonce)
	dev.Pending--
	return nr
}

// get answers a live device with its count of unexpired unused nonces.
func (r *registry) get(ctx *actors.Context, d DeviceRef) ([]byte, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	now := ctx.Now().UnixMilli()
	rec, ok, err := r.liveDevice(ctx, d.DeviceID, now)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, unknownDevice(d.DeviceID)
	}
	var pending []actors.KV
	if rec.Pending > 0 {
		if pending, err = r.pending(ctx, d.DeviceID, now, 0); err != nil {
			return nil, err
		}
	}
	return json.Marshal(Device{DeviceID: d.DeviceID, Version: rec.Version, Platform: rec.Platform,
		BuildHash: rec.BuildHash, RegisteredAt: rec.RegisteredAt, LastSeen: rec.LastSeen,
		PendingChallenges: len(pending)})
}

// delete removes a live device with its unused nonces; an absent or expired one is
// unknown_device (an expired one is collected all the same).
func (r *registry) delete(ctx *actors.Context, d DeviceRef) error {
	if err := d.Validate(); err != nil {
		return err
	}
	rec, ok, err := r.liveDevice(ctx, d.DeviceID, ctx.Now().UnixMilli())
	if err != nil {
		return err
	}
	if !ok {
		return unknownDevice(d.DeviceID)
	}
	return r.removeCounted(ctx, d.DeviceID, rec.LastSeen)
}

// Alarm runs the gc alarm: it deletes up to gcBatch due entries — nonces past their
// retention first, then devices not seen for DeviceTTL — and re-arms for the next collection
// time (for now when due entries remain). With nothing left it lets the alarm go.
func (r *registry) Alarm(ctx *actors.Context, a actors.Alarm) error {
	if a.Name != GCAlarm {
		return nil // not ours: nothing to do, and returning nil drops it
	}
	// Until this firing succeeds, the runtime decides what becomes of the alarm.
	r.gc.Forget()
	now := ctx.Now().UnixMilli()
	nonces, err := r.collectNonces(ctx, now, gcBatch)
	if err != nil {
		return err
	}
	devices := 0
	if nonces < gcBatch {
		if devices, err = r.collectDevices(ctx, now, gcBatch-nonces); err != nil {
			return err
		}
		if devices > 0 {
			n, err := count.Get(ctx)
			if err != nil {
				return err
			}
			count.Set(ctx, n-devices)
		}
	}
	next, ok := now, true // maybe more due: continue at once
	if nonces+devices < gcBatch {
		if next, ok, err = r.nextExpiry(ctx); err != nil {
			return err
		}
	}
	if !ok {
		r.gc.Dropped() // returning nil without setting it again drops the alarm
		return nil
	}
	return r.gc.Set(ctx, next)
}

// nextExpiry is the earliest collection time of any stored nonce or device.
func (r *registry) nextExpiry(ctx *actors.Context) (int64, bool, error) {
	next, ok := int64(0), false
	for _, p := range []struct {
		index actors.TimeIndex
		ttl   int64
	}{{expIndex, r.nonceTTL()}, {seenIndex, r.deviceTTL()}} {
		t, _, found, err := p.index.First(ctx, nil)
		if err != nil {
			return 0, false, err
		}
		if !found {
			continue
		}
		if t += p.ttl; !ok || t < next {
			next, ok = t, true
		}
	}
	return next, ok, nil
}

// collectNonces deletes up to limit nonces past their retention, earliest first, with their
// index entries, and returns how many it deleted.
func (r *registry) collectNonces(ctx *actors.Context, now int64, limit int) (int, error) {
	// Past retention means expires_at + ttl <= now, i.e. expires_at < now - ttl + 1.
	kvs, err := expIndex.Before(ctx, now-r.nonceTTL()+1, nil, limit)
	if err != nil {
		return 0, err
	}
	unused := map[string]int{} // device → its unused nonces deleted here
	for _, kv := range kvs {
		exp, nonce, err := expIndex.Parse(kv.Key)
		if err != nil {
			return 0, err
		}
		nr, err := decodeNonceRecord(kv.Value)
		if err != nil {
			return 0, fmt.Errorf("device registry %s: index entry of nonce %q: %w", ctx.ID(), nonce, err)
		}
		ctx.Delete(kv.Key)
		ctx.Delete(nonceKey(nonce))
		if !nr.Used {
			pendIndex(nr.DeviceID).Delete(ctx, exp, nonce)
			unused[nr.DeviceID]++
		}
	}
	for id, k := range unused {
		dev, found, err := r.device(ctx, id)
		if err != nil {
			return 0, err
		}
		if !found {
			return 0, fmt.Errorf("device registry %s: unused nonces of device %q, which has no record", ctx.ID(), id)
		}
		dev.Pending -= k
		if err := r.put(ctx, id, dev); err != nil {
			return 0, err
		}
	}
	return len(kvs), nil
}

// collectDevices deletes up to limit expired devices, oldest first, and returns how many it
// deleted. The caller owns meta/count.
func (r *registry) collectDevices(ctx *actors.Context, now int64, limit int) (int, error) {
	// Expired means last_seen + ttl <= now, i.e. last_seen < now - ttl + 1.
	kvs, err := seenIndex.Before(ctx, now-r.deviceTTL()+1, nil, limit)
	if err != nil {
		return 0, err
	}
	for _, kv := range kvs {
		seen, id, err := seenIndex.Parse(kv.Key)
		if err != nil {
			return 0, err
		}
		if err := r.remove(ctx, id, seen); err != nil {
			return 0, err
		}
	}
	return len(kvs), nil
}

// removeCounted removes a device and decrements meta/count.
func (r *registry) removeCounted(ctx *actors.Context, id string, lastSeen int64) error {
	n, err := count.Get(ctx)
	if err != nil {
		return err
	}
	if n < 1 {
		return fmt.Errorf("device registry %s: meta/count is %d with device %q stored", ctx.ID(), n, id)
	}
	if err := r.remove(ctx, id, lastSeen); err != nil {
		return err
	}
	count.Set(ctx, n-1)
	return nil
}

// remove deletes a device's record, its seen/ entry and its unused nonces (record, exp/ and
// pend/ entries); used nonces stay as replay markers until they expire. The caller owns
// meta/count.
func (r *registry) remove(ctx *actors.Context, id string, lastSeen int64) error {
	ctx.Delete(devKey(id))
	seenIndex.Delete(ctx, lastSeen, id)
	pend := pendIndex(id)
	kvs, err := ctx.List(actors.ListOptions{Prefix: pend.Prefix})
	if err != nil {
		return err
	}
	for _, kv := range kvs {
		exp, nonce, err := pend.Parse(kv.Key)
		if err != nil {
			return err
		}
		ctx.Delete(kv.Key)
		ctx.Delete(nonceKey(nonce))
		expIndex.Delete(ctx, exp, nonce)
	}
	return nil
}

// device reads the record of id.
func (r *registry) device(ctx *actors.Context, id string) (record, bool, error) {
	var rec record
	v, found, err := ctx.Get(devKey(id))
	if err != nil || !found {
		return rec, false, err
	}
	if err := json.Unmarshal(v, &rec); err != nil {
		return rec, false, fmt.Errorf("device registry %s: record %q: %w", ctx.ID(), id, err)
	}
	return rec, true, nil
}

// nonce reads the record of a nonce.
func (r *registry) nonce(ctx *actors.Context, n string) (nonceRecord, bool, error) {
	v, found, err := ctx.Get(nonceKey(n))
	if err != nil || !found {
		return nonceRecord{}, false, err
	}
	nr, err := decodeNonceRecord(v)
	if err != nil {
		return nr, false, fmt.Errorf("device registry %s: nonce %q: %w", ctx.ID(), n, err)
	}
	return nr, true, nil
}

// put writes the record of id; the caller keeps its seen/ entry in step.
func (r *registry) put(ctx *actors.Context, id string, rec record) error {
	v, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode device %q: %w", id, err)
	}
	ctx.Put(devKey(id), v)
	return nil
}

// touch writes the record of a stored device whose last_seen moved from seen to
// rec.LastSeen, moving its seen/ entry.
func (r *registry) touch(ctx *actors.Context, id string, rec record, seen int64) error {
	seenIndex.Delete(ctx, seen, id)
	seenIndex.Put(ctx, rec.LastSeen, id, []byte{})
	return r.put(ctx, id, rec)
}
