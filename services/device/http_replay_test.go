package device_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"testing"

	"github.com/shardkeeper/shardkeeper/node/apitest"
)

// A verify repeated with the request_id that consumed the nonce gets the first answer again
// (so a client may retry a verify whose outcome it did not learn); any other repeat is 409.
func TestDeviceVerifyRequestIDReplay(t *testing.T) {
	n := apitest.Start(t, nil)
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	b64 := base64.StdEncoding.EncodeToString
	if r := n.Do(t, "POST", "/v1/attest/rr/register", map[string]string{"device_id": "d1", "version": "1",
		"platform": "p", "build_hash": "h", "public_key": b64(pub)}); r.Status != http.StatusCreated {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	challenge := func() string {
		var c struct {
			Nonce string `json:"nonce"`
		}
		r := n.Do(t, "POST", "/v1/attest/rr/challenge", map[string]string{"device_id": "d1"})
		r.JSON(t, &c)
		return c.Nonce
	}
	verify := func(nonce, sig, reqID string) apitest.Response {
		body := map[string]string{"device_id": "d1", "nonce": nonce, "signature": sig}
		if reqID != "" {
			body["request_id"] = reqID
		}
		return n.Do(t, "POST", "/v1/attest/rr/verify", body)
	}
	type verified struct {
		Verified   bool  `json:"verified"`
		VerifiedAt int64 `json:"verified_at"`
	}

	good := challenge()
	sig := b64(ed25519.Sign(priv, []byte(good)))
	first := verify(good, sig, "req-1")
	var v1, v2 verified
	first.JSON(t, &v1)
	if first.Status != 200 || !v1.Verified {
		t.Fatalf("first verify: %d %s", first.Status, first.Body)
	}
	again := verify(good, sig, "req-1")
	again.JSON(t, &v2)
	if again.Status != 200 || v2 != v1 {
		t.Fatalf("same request_id: %d %s, want 200 with %+v", again.Status, again.Body, v1)
	}
	for _, id := range []string{"req-2", ""} {
		if r := verify(good, sig, id); r.Status != 409 || r.ErrorCode() != "nonce_used" {
			t.Fatalf("request_id %q: %d %s, want 409 nonce_used", id, r.Status, r.Body)
		}
	}

	bad := challenge()
	wrong := b64(ed25519.Sign(priv, []byte("something else")))
	for range 2 {
		if r := verify(bad, wrong, "req-3"); r.Status != 401 || r.ErrorCode() != "invalid_signature" {
			t.Fatalf("bad signature with req-3: %d %s, want 401 both times", r.Status, r.Body)
		}
	}
	if r := verify(bad, sig, "req-4"); r.Status != 409 {
		t.Fatalf("other request after a failed attempt: %d %s, want 409", r.Status, r.Body)
	}
	if r := verify(challenge(), sig, "bad id!"); r.Status != 400 || r.ErrorCode() != "invalid_request" {
		t.Fatalf("malformed request_id: %d %s, want 400 invalid_request", r.Status, r.Body)
	}
}
