package device_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/node/apitest"
	"github.com/shardkeeper/shardkeeper/persistence"
	"github.com/shardkeeper/shardkeeper/services/device"
	"github.com/shardkeeper/shardkeeper/test/await"
)

// deviceKey is a device's Ed25519 key pair.
type deviceKey struct {
	pub  ed25519.PublicKey
	priv ed25519.PrivateKey
}

func newDeviceKey(t testing.TB) deviceKey {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return deviceKey{pub: pub, priv: priv}
}

// b64 is the public key in standard padded base64.
func (k deviceKey) b64() string { return base64.StdEncoding.EncodeToString(k.pub) }

// sign signs the UTF-8 bytes of nonce; standard padded base64.
func (k deviceKey) sign(nonce string) string {
	return base64.StdEncoding.EncodeToString(ed25519.Sign(k.priv, []byte(nonce)))
}

// deviceRegistration is a complete register body for id with key k.
func deviceRegistration(id string, k deviceKey) map[string]any {
	return map[string]any{"device_id": id, "version": "1.0", "platform": "android",
		"build_hash": "abc123", "public_key": k.b64()}
}

// deviceWithout returns a copy of m without field.
func deviceWithout(m map[string]any, field string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		if k != field {
			out[k] = v
		}
	}
	return out
}

// deviceWith returns a copy of m with field set to v.
func deviceWith(m map[string]any, field string, v any) map[string]any {
	out := deviceWithout(m, field)
	out[field] = v
	return out
}

// deviceStep is one request of a stateful table: rows run in order and later rows read what
// earlier rows' checks captured.
type deviceStep struct {
	name   string
	before func(t *testing.T) // an awaited condition (polled), when the row needs one
	method string
	path   string
	body   func() any // nil: no body
	header []string
	status int
	code   string // the error code expected, "" on success
	check  func(t *testing.T, r apitest.Response)
}

var deviceNonceShape = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

const deviceAdminToken = "s3cret"

// TestDeviceAPI walks every row and error code of the contract's device attestation registry
// on one node (nonce TTL 2s, 2 pending challenges per device, 3 devices per registry).
func TestDeviceAPI(t *testing.T) {
	const nonceTTL = 2 * time.Second
	n := apitest.Start(t, func(c *config.Config) {
		c.AdminToken = deviceAdminToken
		device.Settings.Update(c, func(o *device.Config) { o.NonceTTL, o.MaxPending, o.MaxDevices = nonceTTL, 2, 3 })
	})
	keyA, keyB := newDeviceKey(t), newDeviceKey(t)
	regA, regB := deviceRegistration("dev-a", keyA), deviceRegistration("dev_B", keyB)
	// keyB is sent in raw URL-safe base64: every base64 alphabet is accepted.
	regB["public_key"] = base64.RawURLEncoding.EncodeToString(keyB.pub)
	auth := []string{"Authorization", "Bearer " + deviceAdminToken}

	var (
		registeredA, verifiedA     int64
		nonceA1, nonceA2, nonceA3  string
		nonceA4, nonceB1, nonceDef string
	)
	fixed := func(v any) func() any { return func() any { return v } }
	verifyBody := func(id string, nonce *string, sign func(string) string) func() any {
		return func() any { return map[string]any{"device_id": id, "nonce": *nonce, "signature": sign(*nonce)} }
	}
	constSig := func(s string) func(string) string { return func(string) string { return s } }
	captureNonce := func(dst *string) func(t *testing.T, r apitest.Response) {
		return func(t *testing.T, r apitest.Response) {
			var c struct {
				Nonce     string `json:"nonce"`
				ExpiresAt int64  `json:"expires_at"`
			}
			r.JSON(t, &c)
			if !deviceNonceShape.MatchString(c.Nonce) {
				t.Fatalf("nonce %q is not 32 bytes of unpadded base64url", c.Nonce)
			}
			if raw, err := base64.RawURLEncoding.DecodeString(c.Nonce); err != nil || len(raw) != 32 {
				t.Fatalf("nonce %q decodes to %d bytes (%v), want 32", c.Nonce, len(raw), err)
			}
			now := time.Now().UnixMilli()
			if ttl := nonceTTL.Milliseconds(); c.ExpiresAt < now+ttl-5000 || c.ExpiresAt > now+ttl {
				t.Fatalf("expires_at %d is not about %d ms after now %d", c.ExpiresAt, ttl, now)
			}
			*dst = c.Nonce
		}
	}
	deviceIs := func(check func(t *testing.T, d device.Device)) func(t *testing.T, r apitest.Response) {
		return func(t *testing.T, r apitest.Response) {
			var d device.Device
			r.JSON(t, &d)
			check(t, d)
		}
	}
	pending := func(id string, want int) func(t *testing.T, r apitest.Response) {
		return deviceIs(func(t *testing.T, d device.Device) {
			if d.DeviceID != id || d.PendingChallenges != want {
				t.Fatalf("device %+v; want %s with %d pending challenges", d, id, want)
			}
		})
	}
	retryAfter := func(max int) func(t *testing.T, r apitest.Response) {
		return func(t *testing.T, r apitest.Response) {
			s, err := strconv.Atoi(r.Header.Get("Retry-After"))
			if err != nil || s < 1 || s > max {
				t.Fatalf("Retry-After %q; want whole seconds in 1..%d", r.Header.Get("Retry-After"), max)
			}
		}
	}
	// awaitNoPending polls GET until the device holds no unexpired challenge.
	awaitNoPending := func(id string) func(t *testing.T) {
		return func(t *testing.T) {
			await.True(t, 10*time.Second, id+" has no pending challenge", func() bool {
				var d device.Device
				r := n.Do(t, "GET", "/v1/attest/r1/devices/"+id, nil)
				r.JSON(t, &d)
				return r.Status == 200 && d.PendingChallenges == 0
			})
		}
	}
	big := `{"device_id":"dev-a","version":"` + strings.Repeat("x", 70<<10) + `"}`

	steps := []deviceStep{
		// register
		{name: "register new", method: "POST", path: "/v1/attest/r1/register", body: fixed(regA), status: 201,
			check: func(t *testing.T, r apitest.Response) {
				var g struct {
					DeviceID     string `json:"device_id"`
					RegisteredAt int64  `json:"registered_at"`
					LastSeen     int64  `json:"last_seen"`
				}
				r.JSON(t, &g)
				if g.DeviceID != "dev-a" || g.RegisteredAt <= 0 || g.LastSeen != g.RegisteredAt {
					t.Fatalf("registered %+v", g)
				}
				registeredA = g.RegisteredAt
			}},
		{name: "re-register keeps registered_at", method: "POST", path: "/v1/attest/r1/register",
			body: fixed(deviceWith(deviceWith(regA, "version", "2.0"), "platform", "ios")), status: 200,
			check: func(t *testing.T, r apitest.Response) {
				var g struct {
					RegisteredAt int64 `json:"registered_at"`
					LastSeen     int64 `json:"last_seen"`
				}
				r.JSON(t, &g)
				if g.RegisteredAt != registeredA || g.LastSeen < registeredA {
					t.Fatalf("re-registered %+v; want registered_at %d", g, registeredA)
				}
			}},
		{name: "get after re-register", method: "GET", path: "/v1/attest/r1/devices/dev-a", status: 200,
			check: deviceIs(func(t *testing.T, d device.Device) {
				if d.Version != "2.0" || d.Platform != "ios" || d.BuildHash != "abc123" ||
					d.RegisteredAt != registeredA || d.LastSeen < registeredA || d.PendingChallenges != 0 {
					t.Fatalf("device %+v", d)
				}
			})},
		{name: "register url-safe unpadded key", method: "POST", path: "/v1/attest/r1/register", body: fixed(regB), status: 201},
		{name: "register bad registry", method: "POST", path: "/v1/attest/bad.reg/register", body: fixed(regA), status: 400, code: "invalid_id"},
		{name: "register registry too long", method: "POST", path: "/v1/attest/" + strings.Repeat("r", 65) + "/register", body: fixed(regA), status: 400, code: "invalid_id"},
		{name: "register bad device_id", method: "POST", path: "/v1/attest/r1/register", body: fixed(deviceWith(regA, "device_id", "dev a")), status: 400, code: "invalid_id"},
		{name: "register device_id too long", method: "POST", path: "/v1/attest/r1/register", body: fixed(deviceWith(regA, "device_id", strings.Repeat("d", 129))), status: 400, code: "invalid_id"},
		{name: "register version too long", method: "POST", path: "/v1/attest/r1/register", body: fixed(deviceWith(regA, "version", strings.Repeat("v", 257))), status: 400, code: "invalid_request"},
		{name: "register build_hash too long", method: "POST", path: "/v1/attest/r1/register", body: fixed(deviceWith(regA, "build_hash", strings.Repeat("h", 257))), status: 400, code: "invalid_request"},
		{name: "register device_id of 128", method: "POST", path: "/v1/attest/r1/register", body: fixed(deviceWith(regA, "device_id", strings.Repeat("d", 128))), status: 201},
		{name: "register missing device_id", method: "POST", path: "/v1/attest/r1/register", body: fixed(deviceWithout(regA, "device_id")), status: 400, code: "invalid_request"},
		{name: "register missing version", method: "POST", path: "/v1/attest/r1/register", body: fixed(deviceWithout(regA, "version")), status: 400, code: "invalid_request"},
		{name: "register missing platform", method: "POST", path: "/v1/attest/r1/register", body: fixed(deviceWithout(regA, "platform")), status: 400, code: "invalid_request"},
		{name: "register missing build_hash", method: "POST", path: "/v1/attest/r1/register", body: fixed(deviceWithout(regA, "build_hash")), status: 400, code: "invalid_request"},
		{name: "register missing public_key", method: "POST", path: "/v1/attest/r1/register", body: fixed(deviceWithout(regA, "public_key")), status: 400, code: "invalid_request"},
		{name: "register null public_key", method: "POST", path: "/v1/attest/r1/register", body: fixed(deviceWith(regA, "public_key", nil)), status: 400, code: "invalid_request"},
		{name: "register public_key not base64", method: "POST", path: "/v1/attest/r1/register", body: fixed(deviceWith(regA, "public_key", "not base64!")), status: 400, code: "invalid_request"},
		{name: "register public_key 31 bytes", method: "POST", path: "/v1/attest/r1/register", body: fixed(deviceWith(regA, "public_key", base64.StdEncoding.EncodeToString(make([]byte, 31)))), status: 400, code: "invalid_request"},
		{name: "register public_key 33 bytes", method: "POST", path: "/v1/attest/r1/register", body: fixed(deviceWith(regA, "public_key", base64.StdEncoding.EncodeToString(make([]byte, 33)))), status: 400, code: "invalid_request"},
		{name: "register public_key wrong type", method: "POST", path: "/v1/attest/r1/register", body: fixed(deviceWith(regA, "public_key", 42)), status: 400, code: "invalid_request"},
		{name: "register unknown field", method: "POST", path: "/v1/attest/r1/register", body: fixed(deviceWith(regA, "extra", 1)), status: 400, code: "invalid_request"},
		{name: "register malformed JSON", method: "POST", path: "/v1/attest/r1/register", body: fixed(`{"device_id":`), status: 400, code: "invalid_request"},
		{name: "register trailing data", method: "POST", path: "/v1/attest/r1/register", body: fixed(`{"device_id":"x"} {}`), status: 400, code: "invalid_request"},
		{name: "register body too large", method: "POST", path: "/v1/attest/r1/register", body: fixed(big), status: 413, code: "body_too_large"},

		// challenge
		{name: "challenge", method: "POST", path: "/v1/attest/r1/challenge", body: fixed(map[string]any{"device_id": "dev-a"}), status: 200, check: captureNonce(&nonceA1)},
		{name: "get counts one pending", method: "GET", path: "/v1/attest/r1/devices/dev-a", status: 200, check: pending("dev-a", 1)},
		{name: "second challenge", method: "POST", path: "/v1/attest/r1/challenge", body: fixed(map[string]any{"device_id": "dev-a"}), status: 200, check: captureNonce(&nonceA2)},
		{name: "challenge past max pending", method: "POST", path: "/v1/attest/r1/challenge", body: fixed(map[string]any{"device_id": "dev-a"}), status: 429, code: "too_many_pending", check: retryAfter(2)},
		{name: "get counts two pending", method: "GET", path: "/v1/attest/r1/devices/dev-a", status: 200, check: pending("dev-a", 2)},
		{name: "challenge unknown device", method: "POST", path: "/v1/attest/r1/challenge", body: fixed(map[string]any{"device_id": "nobody"}), status: 404, code: "unknown_device"},
		{name: "challenge device of another registry", method: "POST", path: "/v1/attest/r2/challenge", body: fixed(map[string]any{"device_id": "dev-a"}), status: 404, code: "unknown_device"},
		{name: "challenge bad device_id", method: "POST", path: "/v1/attest/r1/challenge", body: fixed(map[string]any{"device_id": "dev/a"}), status: 400, code: "invalid_id"},
		{name: "challenge missing device_id", method: "POST", path: "/v1/attest/r1/challenge", body: fixed(map[string]any{}), status: 400, code: "invalid_request"},
		{name: "challenge unknown field", method: "POST", path: "/v1/attest/r1/challenge", body: fixed(map[string]any{"device_id": "dev-a", "x": 1}), status: 400, code: "invalid_request"},
		{name: "challenge bad registry", method: "POST", path: "/v1/attest/r%20x/challenge", body: fixed(map[string]any{"device_id": "dev-a"}), status: 400, code: "invalid_id"},
		{name: "challenge body too large", method: "POST", path: "/v1/attest/r1/challenge", body: fixed(big), status: 413, code: "body_too_large"},
		{name: "challenge other device", method: "POST", path: "/v1/attest/r1/challenge", body: fixed(map[string]any{"device_id": "dev_B"}), status: 200, check: captureNonce(&nonceB1)},

		// verify
		{name: "verify nonce of another device", method: "POST", path: "/v1/attest/r1/verify", body: verifyBody("dev_B", &nonceA1, keyB.sign), status: 404, code: "unknown_nonce"},
		{name: "verify nonce never issued", method: "POST", path: "/v1/attest/r1/verify",
			body: fixed(map[string]any{"device_id": "dev-a", "nonce": strings.Repeat("A", 43), "signature": keyA.sign(strings.Repeat("A", 43))}), status: 404, code: "unknown_nonce"},
		{name: "verify malformed nonce", method: "POST", path: "/v1/attest/r1/verify",
			body: fixed(map[string]any{"device_id": "dev-a", "nonce": "not a nonce!", "signature": keyA.sign("not a nonce!")}), status: 404, code: "unknown_nonce"},
		{name: "verify missing nonce", method: "POST", path: "/v1/attest/r1/verify", body: fixed(map[string]any{"device_id": "dev-a", "signature": "c2ln"}), status: 400, code: "invalid_request"},
		{name: "verify missing signature", method: "POST", path: "/v1/attest/r1/verify", body: func() any { return map[string]any{"device_id": "dev-a", "nonce": nonceA1} }, status: 400, code: "invalid_request"},
		{name: "verify missing device_id", method: "POST", path: "/v1/attest/r1/verify", body: func() any { return map[string]any{"nonce": nonceA1, "signature": keyA.sign(nonceA1)} }, status: 400, code: "invalid_request"},
		{name: "verify bad device_id", method: "POST", path: "/v1/attest/r1/verify", body: verifyBody("dev a", &nonceA1, keyA.sign), status: 400, code: "invalid_id"},
		{name: "verify unknown field", method: "POST", path: "/v1/attest/r1/verify", body: func() any {
			return map[string]any{"device_id": "dev-a", "nonce": nonceA1, "signature": keyA.sign(nonceA1), "x": true}
		}, status: 400, code: "invalid_request"},
		{name: "verify bad registry", method: "POST", path: "/v1/attest/r.1/verify", body: verifyBody("dev-a", &nonceA1, keyA.sign), status: 400, code: "invalid_id"},
		{name: "verify body too large", method: "POST", path: "/v1/attest/r1/verify", body: fixed(big), status: 413, code: "body_too_large"},
		{name: "verify", method: "POST", path: "/v1/attest/r1/verify", body: verifyBody("dev-a", &nonceA1, keyA.sign), status: 200,
			check: func(t *testing.T, r apitest.Response) {
				var v struct {
					Verified   bool   `json:"verified"`
					DeviceID   string `json:"device_id"`
					VerifiedAt int64  `json:"verified_at"`
				}
				r.JSON(t, &v)
				if !v.Verified || v.DeviceID != "dev-a" || v.VerifiedAt < registeredA {
					t.Fatalf("verified %+v", v)
				}
				verifiedA = v.VerifiedAt
			}},
		{name: "verify updates last_seen", method: "GET", path: "/v1/attest/r1/devices/dev-a", status: 200,
			check: deviceIs(func(t *testing.T, d device.Device) {
				if d.LastSeen != verifiedA || d.RegisteredAt != registeredA || d.PendingChallenges != 1 {
					t.Fatalf("device %+v; want last_seen %d and 1 pending", d, verifiedA)
				}
			})},
		{name: "verify replay", method: "POST", path: "/v1/attest/r1/verify", body: verifyBody("dev-a", &nonceA1, keyA.sign), status: 409, code: "nonce_used"},
		{name: "verify wrong key", method: "POST", path: "/v1/attest/r1/verify", body: verifyBody("dev-a", &nonceA2, keyB.sign), status: 401, code: "invalid_signature"},
		{name: "failed attempt consumed the nonce", method: "POST", path: "/v1/attest/r1/verify", body: verifyBody("dev-a", &nonceA2, keyA.sign), status: 409, code: "nonce_used"},
		{name: "consumed nonces are not pending", method: "GET", path: "/v1/attest/r1/devices/dev-a", status: 200, check: pending("dev-a", 0)},
		{name: "challenge again", method: "POST", path: "/v1/attest/r1/challenge", body: fixed(map[string]any{"device_id": "dev-a"}), status: 200, check: captureNonce(&nonceA3)},
		{name: "verify signature not base64", method: "POST", path: "/v1/attest/r1/verify", body: verifyBody("dev-a", &nonceA3, constSig("%%% not base64")), status: 401, code: "invalid_signature"},
		{name: "bad encoding consumed the nonce", method: "POST", path: "/v1/attest/r1/verify", body: verifyBody("dev-a", &nonceA3, keyA.sign), status: 409, code: "nonce_used"},
		{name: "verify signature of wrong length", method: "POST", path: "/v1/attest/r1/verify", body: verifyBody("dev_B", &nonceB1, constSig(base64.StdEncoding.EncodeToString(make([]byte, 63)))), status: 401, code: "invalid_signature"},
		{name: "challenge before delete", method: "POST", path: "/v1/attest/r1/challenge", body: fixed(map[string]any{"device_id": "dev-a"}), status: 200, check: captureNonce(&nonceA4)},

		// delete (admin)
		{name: "delete without token", method: "DELETE", path: "/v1/attest/r1/devices/dev-a", status: 401, code: "unauthorized"},
		{name: "delete wrong token", method: "DELETE", path: "/v1/attest/r1/devices/dev-a", header: []string{"Authorization", "Bearer wrong"}, status: 401, code: "unauthorized"},
		{name: "delete not bearer", method: "DELETE", path: "/v1/attest/r1/devices/dev-a", header: []string{"Authorization", deviceAdminToken}, status: 401, code: "unauthorized"},
		{name: "delete bad device_id", method: "DELETE", path: "/v1/attest/r1/devices/dev.a", header: auth, status: 400, code: "invalid_id"},
		{name: "delete bad registry", method: "DELETE", path: "/v1/attest/r.1/devices/dev-a", header: auth, status: 400, code: "invalid_id"},
		{name: "delete unknown device", method: "DELETE", path: "/v1/attest/r1/devices/nobody", header: auth, status: 404, code: "unknown_device"},
		{name: "delete", method: "DELETE", path: "/v1/attest/r1/devices/dev-a", header: auth, status: 204},
		{name: "get deleted", method: "GET", path: "/v1/attest/r1/devices/dev-a", status: 404, code: "unknown_device"},
		{name: "delete again", method: "DELETE", path: "/v1/attest/r1/devices/dev-a", header: auth, status: 404, code: "unknown_device"},
		{name: "challenge deleted", method: "POST", path: "/v1/attest/r1/challenge", body: fixed(map[string]any{"device_id": "dev-a"}), status: 404, code: "unknown_device"},
		{name: "verify nonce of deleted device", method: "POST", path: "/v1/attest/r1/verify", body: verifyBody("dev-a", &nonceA4, keyA.sign), status: 404, code: "unknown_nonce"},
		{name: "register after delete is new", method: "POST", path: "/v1/attest/r1/register", body: fixed(regA), status: 201},

		// get
		{name: "get unknown", method: "GET", path: "/v1/attest/r1/devices/nobody", status: 404, code: "unknown_device"},
		{name: "get bad device_id", method: "GET", path: "/v1/attest/r1/devices/dev.a", status: 400, code: "invalid_id"},
		{name: "get device_id too long", method: "GET", path: "/v1/attest/r1/devices/" + strings.Repeat("d", 129), status: 400, code: "invalid_id"},
		{name: "get bad registry", method: "GET", path: "/v1/attest/r.1/devices/dev-a", status: 400, code: "invalid_id"},

		// registry_full: max 3 devices per registry; the count frees on delete
		{name: "fill 1", method: "POST", path: "/v1/attest/full/register", body: fixed(deviceRegistration("f1", keyA)), status: 201},
		{name: "fill 2", method: "POST", path: "/v1/attest/full/register", body: fixed(deviceRegistration("f2", keyA)), status: 201},
		{name: "fill 3", method: "POST", path: "/v1/attest/full/register", body: fixed(deviceRegistration("f3", keyA)), status: 201},
		{name: "registry full", method: "POST", path: "/v1/attest/full/register", body: fixed(deviceRegistration("f4", keyA)), status: 503, code: "registry_full",
			check: retryAfter(int(device.Settings.Get(config.Default()).DeviceTTL.Seconds()))},
		{name: "re-register in full registry", method: "POST", path: "/v1/attest/full/register", body: fixed(deviceWith(deviceRegistration("f1", keyA), "version", "2.0")), status: 200},
		{name: "delete frees a slot", method: "DELETE", path: "/v1/attest/full/devices/f2", header: auth, status: 204},
		{name: "register into freed slot", method: "POST", path: "/v1/attest/full/register", body: fixed(deviceRegistration("f4", keyA)), status: 201},
		{name: "full again", method: "POST", path: "/v1/attest/full/register", body: fixed(deviceRegistration("f5", keyA)), status: 503, code: "registry_full"},

		// compatibility paths act on registry "default"
		{name: "compat register", method: "POST", path: "/attest/register", body: fixed(deviceRegistration("c1", keyA)), status: 201},
		{name: "compat re-register", method: "POST", path: "/attest/register", body: fixed(deviceRegistration("c1", keyA)), status: 200},
		{name: "compat device is in default", method: "GET", path: "/v1/attest/default/devices/c1", status: 200, check: pending("c1", 0)},
		{name: "compat register invalid", method: "POST", path: "/attest/register", body: fixed(deviceWithout(deviceRegistration("c1", keyA), "public_key")), status: 400, code: "invalid_request"},
		{name: "compat register unknown field", method: "POST", path: "/attest/register", body: fixed(deviceWith(deviceRegistration("c1", keyA), "x", 1)), status: 400, code: "invalid_request"},
		{name: "compat challenge", method: "POST", path: "/attest/challenge", body: fixed(map[string]any{"device_id": "c1"}), status: 200, check: captureNonce(&nonceDef)},
		{name: "compat challenge unknown", method: "POST", path: "/attest/challenge", body: fixed(map[string]any{"device_id": "dev-a"}), status: 404, code: "unknown_device"},
		{name: "compat verify", method: "POST", path: "/attest/verify", body: verifyBody("c1", &nonceDef, keyA.sign), status: 200},
		{name: "compat verify replay", method: "POST", path: "/attest/verify", body: verifyBody("c1", &nonceDef, keyA.sign), status: 409, code: "nonce_used"},
		{name: "compat body too large", method: "POST", path: "/attest/verify", body: fixed(big), status: 413, code: "body_too_large"},

		// expiry, checked on read
		{name: "challenge for expiry", method: "POST", path: "/v1/attest/r1/challenge", body: fixed(map[string]any{"device_id": "dev_B"}), status: 200, check: captureNonce(&nonceB1)},
		{name: "verify expired nonce", before: awaitNoPending("dev_B"), method: "POST", path: "/v1/attest/r1/verify", body: verifyBody("dev_B", &nonceB1, keyB.sign), status: 410, code: "nonce_expired"},
		{name: "used and expired is nonce_used", method: "POST", path: "/v1/attest/r1/verify", body: verifyBody("dev_B", &nonceB1, keyB.sign), status: 409, code: "nonce_used"},
	}
	runDeviceSteps(t, n, steps)
}

// runDeviceSteps runs the rows in order; a failed row stops the table, since later rows
// depend on it.
func runDeviceSteps(t *testing.T, n *apitest.Node, steps []deviceStep) {
	t.Helper()
	for _, s := range steps {
		ok := t.Run(s.name, func(t *testing.T) {
			if s.before != nil {
				s.before(t)
			}
			var body any
			if s.body != nil {
				body = s.body()
			}
			r := n.Do(t, s.method, s.path, body, s.header...)
			if r.Status != s.status || r.ErrorCode() != s.code {
				t.Fatalf("%s %s: %d %s; want %d %q", s.method, s.path, r.Status, r.Body, s.status, s.code)
			}
			if (r.Status == 429 || r.Status == 503) && r.Header.Get("Retry-After") == "" {
				t.Fatalf("%d without Retry-After", r.Status)
			}
			if want := deviceFields(s.method, s.path, r.Status); want != nil {
				var body map[string]json.RawMessage
				r.JSON(t, &body)
				got := slices.Sorted(maps.Keys(body))
				if slices.Sort(want); !slices.Equal(got, want) {
					t.Fatalf("body fields %v; the contract has %v", got, want)
				}
			}
			if s.check != nil {
				s.check(t, r)
			}
		})
		if !ok {
			t.FailNow()
		}
	}
}

// deviceFields are the fields of the contract's apitest.Response body to method path with status (nil
// when there is no body).
func deviceFields(method, path string, status int) []string {
	switch {
	case status == http.StatusNoContent:
		return nil
	case status >= 300:
		return []string{"error", "message"}
	case strings.HasSuffix(path, "/register"):
		return []string{"device_id", "registered_at", "last_seen"}
	case strings.HasSuffix(path, "/challenge"):
		return []string{"nonce", "expires_at"}
	case strings.HasSuffix(path, "/verify"):
		return []string{"verified", "device_id", "verified_at"}
	case method == "GET":
		return []string{"device_id", "version", "platform", "build_hash", "registered_at", "last_seen", "pending_challenges"}
	}
	return nil
}

// TestDeviceAdminDisabled: with no admin token configured, DELETE is 403 admin_disabled
// whatever the Authorization header says.
func TestDeviceAdminDisabled(t *testing.T) {
	n := apitest.Start(t, nil)
	k := newDeviceKey(t)
	runDeviceSteps(t, n, []deviceStep{
		{name: "register", method: "POST", path: "/v1/attest/r1/register", body: func() any { return deviceRegistration("d1", k) }, status: 201},
		{name: "delete without token", method: "DELETE", path: "/v1/attest/r1/devices/d1", status: 403, code: "admin_disabled"},
		{name: "delete with a token", method: "DELETE", path: "/v1/attest/r1/devices/d1", header: []string{"Authorization", "Bearer " + deviceAdminToken}, status: 403, code: "admin_disabled"},
		{name: "still there", method: "GET", path: "/v1/attest/r1/devices/d1", status: 200},
	})
}

// deviceKeyCount counts the state keys of registry's partition on n.
func deviceKeyCount(t testing.TB, n *apitest.Node, registry string) int {
	t.Helper()
	p := actors.PartitionOf(device.KindName, registry, n.Config.Partitions)
	c, err := n.Node.Store().KeyCount(p, []byte{})
	if err != nil {
		t.Fatal(err)
	}
	// The registry names (package names) are kept for good; they may share the partition.
	names := persistence.AppendComponent(persistence.AppendComponent([]byte{'a'}, []byte(device.NamesKindName)), []byte("all"))
	kept, err := n.Node.Store().KeyCount(p, names)
	if err != nil {
		t.Fatal(err)
	}
	return c - kept
}

// TestDeviceExpiry: a device not seen for the device TTL is removed by the gc alarm together
// with its unexpired challenges, with no request arriving meanwhile; afterwards it is unknown,
// its nonce is unknown, and registering it again creates it anew.
func TestDeviceExpiry(t *testing.T) {
	const deviceTTL = 500 * time.Millisecond
	n := apitest.Start(t, func(c *config.Config) {
		// The device, not the nonce, is what expires.
		device.Settings.Update(c, func(o *device.Config) { o.DeviceTTL, o.NonceTTL = deviceTTL, time.Hour })
	})
	baseline := deviceKeyCount(t, n, "exp")
	k := newDeviceKey(t)
	var registeredAt int64
	var nonce string
	runDeviceSteps(t, n, []deviceStep{
		{name: "register", method: "POST", path: "/v1/attest/exp/register", body: func() any { return deviceRegistration("d1", k) }, status: 201,
			check: func(t *testing.T, r apitest.Response) {
				var g struct {
					RegisteredAt int64 `json:"registered_at"`
				}
				r.JSON(t, &g)
				registeredAt = g.RegisteredAt
			}},
		{name: "challenge", method: "POST", path: "/v1/attest/exp/challenge", body: func() any { return map[string]any{"device_id": "d1"} }, status: 200,
			check: func(t *testing.T, r apitest.Response) {
				var c struct {
					Nonce string `json:"nonce"`
				}
				r.JSON(t, &c)
				nonce = c.Nonce
			}},
	})
	if got := deviceKeyCount(t, n, "exp"); got <= baseline {
		t.Fatalf("partition holds %d keys after register and challenge; baseline %d", got, baseline)
	}
	start := time.Now()
	await.True(t, 10*time.Second, "the registry's partition is back to its baseline", func() bool {
		return deviceKeyCount(t, n, "exp") == baseline
	})
	t.Logf("collected %v after the last request (device TTL %v)", time.Since(start), deviceTTL)
	runDeviceSteps(t, n, []deviceStep{
		{name: "get expired", method: "GET", path: "/v1/attest/exp/devices/d1", status: 404, code: "unknown_device"},
		{name: "challenge expired", method: "POST", path: "/v1/attest/exp/challenge", body: func() any { return map[string]any{"device_id": "d1"} }, status: 404, code: "unknown_device"},
		{name: "nonce went with the device", method: "POST", path: "/v1/attest/exp/verify",
			body: func() any { return map[string]any{"device_id": "d1", "nonce": nonce, "signature": k.sign(nonce)} }, status: 404, code: "unknown_nonce"},
		{name: "register again is new", method: "POST", path: "/v1/attest/exp/register", body: func() any { return deviceRegistration("d1", k) }, status: 201,
			check: func(t *testing.T, r apitest.Response) {
				var g struct {
					RegisteredAt int64 `json:"registered_at"`
				}
				r.JSON(t, &g)
				if g.RegisteredAt <= registeredAt {
					t.Fatalf("registered_at %d; want a new time after %d", g.RegisteredAt, registeredAt)
				}
			}},
	})
}

// TestDeviceStorageBounded is the acceptance test of bounded storage: 100,000 challenges, never
// verified, spread over 1,000 devices of one registry. Unused nonces are collected by the
// expiry index (one nonce TTL after they expire) while their devices are still live, then the
// devices expire. With no request arriving, the gc alarm must return the registry's partition
// to the key count it had before the registry existed: an empty registry holds no keys.
//
// Under the race detector (several times slower) it issues a tenth of the challenges, over a
// tenth of the devices, so that it stays within the suite's time; the acceptance scale is the
// ordinary run.
func TestDeviceStorageBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 challenges")
	}
	devices := 1000
	if raceEnabled() {
		devices = 100
	}
	const (
		perDevice = 100
		workers   = 10 // devices challenged at once, each with perDevice concurrent requests
		nonceTTL  = time.Second
		// Past the nonces' retention (expiry + nonce TTL), and long enough that a device's
		// last challenge finds it live on a machine slowed by the race detector and the
		// packages tested beside it (at 3 s, one did not).
		deviceTTL = 6 * time.Second
		registry  = "bounded"
	)
	challenges := devices * perDevice
	n := apitest.Start(t, func(c *config.Config) {
		device.Settings.Update(c, func(o *device.Config) {
			o.NonceTTL, o.DeviceTTL, o.MaxPending, o.MaxDevices = nonceTTL, deviceTTL, perDevice, devices
		})
		c.RequestTimeout = 30 * time.Second
	})
	baseline := deviceKeyCount(t, n, registry)
	// Bounded connections, reused: thousands of simultaneous connects overflow the accept
	// queue and get reset by the kernel, which is not what this test is about.
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 64, MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	post := func(path string, body any) (int, []byte, error) {
		b, _ := json.Marshal(body)
		resp, err := client.Post(n.URL+path, "application/json", bytes.NewReader(b))
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(resp.Body)
		return resp.StatusCode, out, err
	}

	// Each worker takes the next device, registers it and sends its perDevice challenges at
	// once, so that the device is still live when its last challenge arrives.
	start := time.Now()
	var next, issued atomic.Int64
	var failed atomic.Bool
	var firstErr error
	var errOnce sync.Once
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err })
		failed.Store(true)
	}
	k := newDeviceKey(t)
	// The most keys the partition held while challenges were issued, sampled.
	var most atomic.Int64
	sampled := make(chan struct{})
	stop := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			c, err := n.Node.Store().KeyCount(actors.PartitionOf(device.KindName, registry, n.Config.Partitions), []byte{})
			if err == nil && int64(c) > most.Load() {
				most.Store(int64(c))
			}
			select {
			case <-stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(devices) && !failed.Load(); i = next.Add(1) - 1 {
				id := fmt.Sprintf("dev-%04d", i)
				if st, b, err := post("/v1/attest/"+registry+"/register", deviceRegistration(id, k)); err != nil || st != 201 {
					fail(fmt.Errorf("register %s: %d %s %v", id, st, b, err))
					return
				}
				var burst sync.WaitGroup
				for range perDevice {
					burst.Go(func() {
						if st, b, err := post("/v1/attest/"+registry+"/challenge", map[string]any{"device_id": id}); err != nil || st != 200 {
							fail(fmt.Errorf("challenge %s: %d %s %v", id, st, b, err))
							return
						}
						issued.Add(1)
					})
				}
				burst.Wait()
			}
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	if got := issued.Load(); got != int64(challenges) {
		t.Fatalf("issued %d challenges, want %d", got, challenges)
	}
	issuedIn := time.Since(start)
	t.Logf("issued %d challenges to %d devices in %v (%.0f/s); partition keys: at most %d sampled, %d now, baseline %d",
		challenges, devices, issuedIn, float64(challenges)/issuedIn.Seconds(), most.Load(), deviceKeyCount(t, n, registry), baseline)

	// No request from here on: only the gc alarm can bring the count down.
	waitStart := time.Now()
	await.True(t, 60*time.Second, "the registry's partition is back to its baseline key count", func() bool {
		return deviceKeyCount(t, n, registry) == baseline
	})
	t.Logf("back to baseline %d keys %v after the last challenge (nonce TTL %v, device TTL %v)",
		baseline, time.Since(waitStart), nonceTTL, deviceTTL)

	for _, id := range []string{"dev-0000", fmt.Sprintf("dev-%04d", devices-1)} {
		if r := n.Do(t, "GET", "/v1/attest/"+registry+"/devices/"+id, nil); r.Status != 404 || r.ErrorCode() != "unknown_device" {
			t.Fatalf("GET %s after expiry: %d %s", id, r.Status, r.Body)
		}
	}
}
