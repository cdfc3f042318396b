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
