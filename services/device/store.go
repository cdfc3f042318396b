package device

import (
	"crypto/ed25519"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/shardkeeper/shardkeeper/actors"
)

// The registry's storage: the records it keeps and their encodings, its keys and indexes
// (the layout in the package comment), and reading and writing them.

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
