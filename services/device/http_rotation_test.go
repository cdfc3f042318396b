package device_test

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/node/apitest"
	"github.com/shardkeeper/shardkeeper/services/device"
	"github.com/shardkeeper/shardkeeper/test/await"
)

// rotation holds the requests of the key rotation tests against one node and registry.
type rotation struct {
	n        *apitest.Node
	registry string
}

func (rt rotation) path(op string) string { return "/v1/attest/" + rt.registry + "/" + op }

// challenge issues a challenge to id and returns its nonce.
func (rt rotation) challenge(t *testing.T, id string) string {
	t.Helper()
	r := rt.n.Do(t, "POST", rt.path("challenge"), map[string]any{"device_id": id})
	var c device.Challenge
	if r.JSON(t, &c); r.Status != 200 || c.Nonce == "" {
		t.Fatalf("challenge %s: %d %s", id, r.Status, r.Body)
	}
	return c.Nonce
}

// verifies tells whether k's signature over a fresh challenge of id verifies (200) or is
// refused as invalid_signature (401); any other answer fails the test.
func (rt rotation) verifies(t *testing.T, id string, k deviceKey) bool {
	t.Helper()
	nonce := rt.challenge(t, id)
	r := rt.n.Do(t, "POST", rt.path("verify"), map[string]any{"device_id": id, "nonce": nonce, "signature": k.sign(nonce)})
	switch {
	case r.Status == 200:
		return true
	case r.Status == 401 && r.ErrorCode() == "invalid_signature":
		return false
	}
	t.Fatalf("verify %s: %d %s", id, r.Status, r.Body)
	return false
}

// keyIs checks that id's key is now want: its signature verifies, and none of the others' do.
func (rt rotation) keyIs(id string, want deviceKey, others ...deviceKey) func(t *testing.T, r apitest.Response) {
	return func(t *testing.T, r apitest.Response) {
		t.Helper()
		if !rt.verifies(t, id, want) {
			t.Fatalf("%s: the signature of the key it should hold does not verify", id)
		}
		for i, k := range others {
			if rt.verifies(t, id, k) {
				t.Fatalf("%s: the signature of another key (#%d) verifies", id, i)
			}
		}
	}
}

// TestDeviceKeyRotation walks the contract's device key rotation: a re-registration with the
// same key is open; with another key it needs a proof of the current key (a challenge nonce
// signed with it, consumed whatever the outcome) or the admin token; a device that lost its
// key is deleted by an admin and registers anew.
func TestDeviceKeyRotation(t *testing.T) {
	n := apitest.Start(t, func(c *config.Config) { c.AdminToken = deviceAdminToken })
	rt := rotation{n: n, registry: "rot"}
	keyA, keyB, keyC, keyD := newDeviceKey(t), newDeviceKey(t), newDeviceKey(t), newDeviceKey(t)
	auth := []string{"Authorization", "Bearer " + deviceAdminToken}
	reg := func(k deviceKey) map[string]any { return deviceRegistration("d1", k) }
	// proof is a registration of d1 with key k, proven by nonce and sig.
	proof := func(k deviceKey, nonce *string, sig func(string) string) func() any {
		return func() any {
			b := reg(k)
			b["nonce"], b["signature"] = *nonce, sig(*nonce)
			return b
		}
	}
	fixed := func(v any) func() any { return func() any { return v } }
	var registeredAt int64
	var wrong, good, other, unused string
	nonceOf := func(id string, dst *string) func(t *testing.T) {
		return func(t *testing.T) { *dst = rt.challenge(t, id) }
	}
	never, malformed := strings.Repeat("A", 43), "not a nonce!"
	notBase64 := func(string) string { return "%%% not base64" }
	pendingIs := func(want int) func(t *testing.T, r apitest.Response) {
		return func(t *testing.T, r apitest.Response) {
			t.Helper()
			var d device.Device
			r.JSON(t, &d)
			if d.PendingChallenges != want || d.RegisteredAt != registeredAt {
				t.Fatalf("device %+v; want %d pending challenges, registered_at %d", d, want, registeredAt)
			}
		}
	}

	runDeviceSteps(t, n, []deviceStep{
		{name: "register", method: "POST", path: rt.path("register"), body: fixed(reg(keyA)), status: 201,
			check: func(t *testing.T, r apitest.Response) {
				var g device.Registered
				r.JSON(t, &g)
				registeredAt = g.RegisteredAt
			}},
		{name: "another device", method: "POST", path: rt.path("register"), body: fixed(deviceRegistration("d2", keyC)), status: 201},
		{name: "same key stays open", method: "POST", path: rt.path("register"), body: fixed(deviceWith(reg(keyA), "version", "2.0")), status: 200,
			check: rt.keyIs("d1", keyA)},
		{name: "another key without proof", method: "POST", path: rt.path("register"), body: fixed(reg(keyB)), status: 409, code: "device_exists",
			check: rt.keyIs("d1", keyA, keyB)},
		{name: "another key with a wrong admin token", method: "POST", path: rt.path("register"), body: fixed(reg(keyB)),
			header: []string{"Authorization", "Bearer wrong"}, status: 409, code: "device_exists", check: rt.keyIs("d1", keyA, keyB)},
		{name: "the compatibility path too", method: "POST", path: "/attest/register", body: fixed(reg(keyA)), status: 201},
		{name: "compat another key without proof", method: "POST", path: "/attest/register", body: fixed(reg(keyB)), status: 409, code: "device_exists"},

		// A failed proof consumes its nonce.
		{name: "proof signed by the new key", before: nonceOf("d1", &wrong), method: "POST", path: rt.path("register"),
			body: proof(keyB, &wrong, keyB.sign), status: 401, code: "invalid_signature", check: rt.keyIs("d1", keyA, keyB)},
		{name: "failed proof consumed its nonce", method: "POST", path: rt.path("register"), body: proof(keyB, &wrong, keyA.sign), status: 409, code: "nonce_used",
			check: rt.keyIs("d1", keyA, keyB)},
		{name: "verify of the consumed nonce", method: "POST", path: rt.path("verify"),
			body: func() any { return map[string]any{"device_id": "d1", "nonce": wrong, "signature": keyA.sign(wrong)} }, status: 409, code: "nonce_used"},
		{name: "proof with a signature not base64", before: nonceOf("d1", &wrong), method: "POST", path: rt.path("register"),
			body: proof(keyB, &wrong, notBase64), status: 401, code: "invalid_signature"},
		{name: "its nonce is consumed too", method: "POST", path: rt.path("register"), body: proof(keyB, &wrong, keyA.sign), status: 409, code: "nonce_used"},
		{name: "no challenge left pending", method: "GET", path: rt.path("devices/d1"), status: 200, check: pendingIs(0)},
		{name: "proof by a nonce never issued", method: "POST", path: rt.path("register"), body: proof(keyB, &never, keyA.sign), status: 404, code: "unknown_nonce"},
		{name: "proof by a malformed nonce", method: "POST", path: rt.path("register"), body: proof(keyB, &malformed, keyA.sign), status: 404, code: "unknown_nonce"},
		{name: "proof by another device's nonce", before: nonceOf("d2", &other), method: "POST", path: rt.path("register"),
			body: proof(keyB, &other, keyA.sign), status: 404, code: "unknown_nonce"},
		{name: "the other device's nonce is unused", method: "POST", path: rt.path("verify"),
			body: func() any { return map[string]any{"device_id": "d2", "nonce": other, "signature": keyC.sign(other)} }, status: 200},
		{name: "nonce without signature", before: nonceOf("d1", &good), method: "POST", path: rt.path("register"),
			body: func() any { b := reg(keyB); b["nonce"] = good; return b }, status: 400, code: "invalid_request"},
		{name: "signature without nonce", method: "POST", path: rt.path("register"),
			body: func() any { b := reg(keyB); b["signature"] = keyA.sign(good); return b }, status: 400, code: "invalid_request"},
		{name: "refusals left the key and the device", method: "GET", path: rt.path("devices/d1"), status: 200, check: pendingIs(1)},

		// A proof by the current key rotates it; the device keeps its other challenges.
		{name: "a challenge that stays pending", before: nonceOf("d1", &unused), method: "GET", path: rt.path("devices/d1"), status: 200, check: pendingIs(2)},
		{name: "proof by the current key", method: "POST", path: rt.path("register"), body: proof(keyB, &good, keyA.sign), status: 200,
			check: func(t *testing.T, r apitest.Response) {
				var g device.Registered
				if r.JSON(t, &g); g.DeviceID != "d1" || g.RegisteredAt != registeredAt || g.LastSeen < registeredAt {
					t.Fatalf("rotated %s; want d1 registered at %d", r.Body, registeredAt)
				}
			}},
		{name: "the proof consumed its nonce, not the other", method: "GET", path: rt.path("devices/d1"), status: 200, check: pendingIs(1)},
		{name: "the new key verifies, the old no longer", method: "POST", path: rt.path("verify"),
			body: func() any { return map[string]any{"device_id": "d1", "nonce": unused, "signature": keyB.sign(unused)} }, status: 200,
			check: rt.keyIs("d1", keyB, keyA)},
		{name: "the proof's nonce is used", method: "POST", path: rt.path("verify"),
			body: func() any { return map[string]any{"device_id": "d1", "nonce": good, "signature": keyA.sign(good)} }, status: 409, code: "nonce_used"},
		{name: "the rotation repeated is a re-registration with the same key", method: "POST", path: rt.path("register"),
			body: proof(keyB, &good, keyA.sign), status: 200, check: rt.keyIs("d1", keyB, keyA)},
		{name: "the old key cannot rotate back", before: nonceOf("d1", &wrong), method: "POST", path: rt.path("register"),
			body: proof(keyA, &wrong, keyA.sign), status: 401, code: "invalid_signature", check: rt.keyIs("d1", keyB, keyA)},

		// The admin token replaces the proof.
		{name: "admin token", method: "POST", path: rt.path("register"), body: fixed(reg(keyC)), header: auth, status: 200,
			check: rt.keyIs("d1", keyC, keyA, keyB)},
		{name: "admin token on the compatibility path", method: "POST", path: "/attest/register", body: fixed(reg(keyB)), header: auth, status: 200},

		// A device that lost its key: an admin deletes it, and it registers anew.
		{name: "delete", method: "DELETE", path: rt.path("devices/d1"), header: auth, status: 204},
		{name: "register again", method: "POST", path: rt.path("register"), body: fixed(reg(keyD)), status: 201,
			check: rt.keyIs("d1", keyD, keyC)},
	})
}

// An expired nonce proves nothing, and is consumed like a verify's.
func TestDeviceKeyRotationExpiredNonce(t *testing.T) {
	const nonceTTL = 2 * time.Second // also how long the expired nonce is kept to answer 410
	n := apitest.Start(t, func(c *config.Config) {
		device.Settings.Update(c, func(o *device.Config) { o.NonceTTL = nonceTTL })
	})
	rt := rotation{n: n, registry: "rot-exp"}
	keyA, keyB := newDeviceKey(t), newDeviceKey(t)
	if r := n.Do(t, "POST", rt.path("register"), deviceRegistration("d1", keyA)); r.Status != 201 {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	nonce := rt.challenge(t, "d1")
	await.True(t, 10*time.Second, "the challenge to expire", func() bool {
		var d device.Device
		r := n.Do(t, "GET", rt.path("devices/d1"), nil)
		r.JSON(t, &d)
		return r.Status == 200 && d.PendingChallenges == 0
	})
	body := deviceRegistration("d1", keyB)
	body["nonce"], body["signature"] = nonce, keyA.sign(nonce)
	if r := n.Do(t, "POST", rt.path("register"), body); r.Status != 410 || r.ErrorCode() != "nonce_expired" {
		t.Fatalf("rotation proven by an expired nonce: %d %s; want 410 nonce_expired", r.Status, r.Body)
	}
	if r := n.Do(t, "POST", rt.path("register"), body); r.Status != 409 || r.ErrorCode() != "nonce_used" {
		t.Fatalf("the same proof again: %d %s; want 409 nonce_used", r.Status, r.Body)
	}
	rt.keyIs("d1", keyA, keyB)(t, apitest.Response{})
}

// Without an admin token configured, no Authorization header replaces the proof — an empty
// bearer token included.
func TestDeviceKeyRotationAdminDisabled(t *testing.T) {
	n := apitest.Start(t, nil)
	rt := rotation{n: n, registry: "rot-noadmin"}
	keyA, keyB := newDeviceKey(t), newDeviceKey(t)
	if r := n.Do(t, "POST", rt.path("register"), deviceRegistration("d1", keyA)); r.Status != 201 {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	for _, header := range [][]string{{"Authorization", "Bearer "}, {"Authorization", "Bearer " + deviceAdminToken}, {"Authorization", ""}} {
		if r := n.Do(t, "POST", rt.path("register"), deviceRegistration("d1", keyB), header...); r.Status != 409 || r.ErrorCode() != "device_exists" {
			t.Fatalf("another key with header %q: %d %s; want 409 device_exists", header, r.Status, r.Body)
		}
	}
	rt.keyIs("d1", keyA, keyB)(t, apitest.Response{})
	// The registration's public_key may be written in any base64 alphabet: the same key is
	// the same key.
	same := deviceRegistration("d1", keyA)
	same["public_key"] = base64.RawURLEncoding.EncodeToString(keyA.pub)
	if r := n.Do(t, "POST", rt.path("register"), same); r.Status != 200 {
		t.Fatalf("the same key in another alphabet: %d %s; want 200", r.Status, r.Body)
	}
}
