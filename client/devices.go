package client

import (
	"context"
	"crypto/ed25519"
	"errors"
	"net/http"
)

// RegisterDeviceRequest is the body of POST /v1/attest/{registry}/register.
type RegisterDeviceRequest struct {
	DeviceID  string `json:"device_id"`
	Version   string `json:"version"`
	Platform  string `json:"platform"`
	BuildHash string `json:"build_hash"`
	// PublicKey is the device's 32-byte Ed25519 public key (base64 in JSON).
	PublicKey []byte `json:"public_key"`
	// Nonce and Signature prove the current key when a live device registers another one: a
	// challenge issued to the device, and the current key's Ed25519 signature over the
	// nonce's UTF-8 bytes (base64 in JSON), as in verify.
	Nonce     string `json:"nonce,omitempty"`
	Signature []byte `json:"signature,omitempty"`
}

// Registration is the answer of a device registration.
type Registration struct {
	DeviceID     string `json:"device_id"`
	RegisteredAt int64  `json:"registered_at"` // Unix ms
	LastSeen     int64  `json:"last_seen"`     // Unix ms
	// Created is true for a new device (201), false for a re-registration (200).
	Created bool `json:"-"`
}

// Challenge is the answer of POST /v1/attest/{registry}/challenge.
type Challenge struct {
	Nonce     string `json:"nonce"`
	ExpiresAt int64  `json:"expires_at"` // Unix ms
}

// VerifyRequest is the body of POST /v1/attest/{registry}/verify.
type VerifyRequest struct {
	DeviceID string `json:"device_id"`
	Nonce    string `json:"nonce"`
	// Signature is the Ed25519 signature of the nonce's UTF-8 bytes (base64 in JSON); see
	// SignNonce.
	Signature []byte `json:"signature"`
	// RequestID makes the verify safe to retry: the server answers a verify of a nonce that
	// this request_id consumed with the first attempt's outcome again. Empty: Verify
	// generates one, the same on every attempt of the call.
	RequestID string `json:"request_id,omitempty"`
}

// Verification is the answer of a successful verify.
type Verification struct {
	Verified   bool   `json:"verified"`
	DeviceID   string `json:"device_id"`
	VerifiedAt int64  `json:"verified_at"` // Unix ms
}

// Device is the answer of GET /v1/attest/{registry}/devices/{device_id}.
type Device struct {
	DeviceID          string `json:"device_id"`
	Version           string `json:"version"`
	Platform          string `json:"platform"`
	BuildHash         string `json:"build_hash"`
	RegisteredAt      int64  `json:"registered_at"` // Unix ms
	LastSeen          int64  `json:"last_seen"`     // Unix ms
	PendingChallenges int    `json:"pending_challenges"`
}

// SignNonce signs a challenge nonce as verify expects: Ed25519 over its UTF-8 bytes.
func SignNonce(key ed25519.PrivateKey, nonce string) []byte {
	return ed25519.Sign(key, []byte(nonce))
}

func attestPath(registry, rest string) string { return "/v1/attest/" + seg(registry) + rest }

// RegisterDevice registers a device, or re-registers it (Created false). Idempotent. A live
// device takes another key only with a proof of its current one (req.Nonce and
// req.Signature), or through RotateDeviceKey.
func (c *Client) RegisterDevice(ctx context.Context, registry string, req RegisterDeviceRequest) (*Registration, error) {
	return c.register(ctx, registry, req, false)
}

// RotateDeviceKey re-registers a device with the admin token (WithAdminToken), which stands
// in for the proof of the current key: a live device takes req.PublicKey whatever key it
// had, and req.Nonce and req.Signature are not needed (the server ignores them, leaving the
// nonce unused). A device that is not registered is registered (Created true). Idempotent: a
// rotation repeated after a lost answer is a re-registration with the same key.
func (c *Client) RotateDeviceKey(ctx context.Context, registry string, req RegisterDeviceRequest) (*Registration, error) {
	if c.adminToken == "" {
		return nil, errors.New("client: RotateDeviceKey sends the admin token, and none is set (WithAdminToken)")
	}
	return c.register(ctx, registry, req, true)
}

// register sends a registration, with the admin token when admin is set.
func (c *Client) register(ctx context.Context, registry string, req RegisterDeviceRequest, admin bool) (*Registration, error) {
	var out Registration
	status, err := c.do(ctx, call{actor: &actor{kindDevices, registry}, method: http.MethodPost, path: attestPath(registry, "/register"), body: req, admin: admin, idempotent: true}, &out)
	if err != nil {
		return nil, err
	}
	out.Created = status == http.StatusCreated
	return &out, nil
}

// Challenge issues a challenge nonce for a registered device. Not idempotent: a transport
// error other than a failed dial is returned, not retried (a lost answer may have left a
// pending challenge, which counts toward max_pending_per_device until it expires).
func (c *Client) Challenge(ctx context.Context, registry, deviceID string) (*Challenge, error) {
	var out Challenge
	body := struct {
		DeviceID string `json:"device_id"`
	}{deviceID}
	if _, err := c.do(ctx, call{actor: &actor{kindDevices, registry}, method: http.MethodPost, path: attestPath(registry, "/challenge"), body: body}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Verify checks a signed challenge. The first attempt that reaches the server consumes the
// nonce whatever its outcome; the request_id (generated when req.RequestID is empty) makes
// retries after a lost answer return that first outcome, so transport errors are retried
// like those of any idempotent call.
func (c *Client) Verify(ctx context.Context, registry string, req VerifyRequest) (*Verification, error) {
	var out Verification
	if req.RequestID == "" {
		req.RequestID = newRequestID()
	}
	if _, err := c.do(ctx, call{actor: &actor{kindDevices, registry}, method: http.MethodPost, path: attestPath(registry, "/verify"), body: req, idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetDevice reads a device.
func (c *Client) GetDevice(ctx context.Context, registry, deviceID string) (*Device, error) {
	var out Device
	if _, err := c.do(ctx, call{actor: &actor{kindDevices, registry}, method: http.MethodGet, path: attestPath(registry, "/devices/"+seg(deviceID)), idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteDevice removes a device (admin). A call retried after a lost answer may end in
// 404 unknown_device because its first attempt deleted the device.
func (c *Client) DeleteDevice(ctx context.Context, registry, deviceID string) error {
	_, err := c.do(ctx, call{actor: &actor{kindDevices, registry}, method: http.MethodDelete, path: attestPath(registry, "/devices/"+seg(deviceID)), admin: true, idempotent: true}, nil)
	return err
}
