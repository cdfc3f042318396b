package device

import (
	"crypto/ed25519"
	"encoding/base64"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/ident"
)

// The registry's messages as they cross the wire, and their validation: what the routes
// check at the edge and the kind checks again (a message may arrive forwarded, with no HTTP
// request at all).

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
