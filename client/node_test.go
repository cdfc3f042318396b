package client_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/client"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/node/nodetest"
)

// startNode starts an in-process one-node server on loopback (real Raft and Pebble) with an
// admin token, and returns a client of it and its base URL.
func startNode(t *testing.T) (*client.Client, string) {
	t.Helper()
	n := nodetest.Start(t, func(cfg *config.Config) {
		cfg.NodeID = "client-test"
		cfg.AdminToken = "s3cret"
	})
	url := "http://" + n.HTTPAddr()
	c, err := client.New([]string{url}, client.WithAdminToken("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	return c, url
}

// wantCode fails unless err is an *APIError with status and code.
func wantCode(t *testing.T, err error, status int, code string) {
	t.Helper()
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != status || apiErr.Code != code {
		t.Fatalf("err %v, want %d %s", err, status, code)
	}
}

// TestAgainstNode drives every endpoint of the client against a real node: the contract's
// success paths and a representative error of each area.
func TestAgainstNode(t *testing.T) {
	c, url := startNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t.Run("ops", func(t *testing.T) {
		if err := c.Healthz(ctx); err != nil {
			t.Fatal(err)
		}
		if err := c.Readyz(ctx); err != nil {
			t.Fatal(err)
		}
		st, err := c.Cluster(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.NodeID != "client-test" || len(st.Partitions) != 4 || st.Partitions[0].Leader != "client-test" {
			t.Fatalf("cluster %+v", st)
		}
	})

	t.Run("devices", func(t *testing.T) {
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		req := client.RegisterDeviceRequest{DeviceID: "dev-1", Version: "1.0", Platform: "linux", BuildHash: "abc", PublicKey: pub}
		reg, err := c.RegisterDevice(ctx, "fleet", req)
		if err != nil || !reg.Created || reg.DeviceID != "dev-1" {
			t.Fatalf("register = %+v, %v", reg, err)
		}
		if reg, err = c.RegisterDevice(ctx, "fleet", req); err != nil || reg.Created {
			t.Fatalf("re-register = %+v, %v; want 200", reg, err)
		}
		ch, err := c.Challenge(ctx, "fleet", "dev-1")
		if err != nil || ch.Nonce == "" || ch.ExpiresAt == 0 {
			t.Fatalf("challenge = %+v, %v", ch, err)
		}
		d, err := c.GetDevice(ctx, "fleet", "dev-1")
		if err != nil || d.PendingChallenges != 1 || d.Platform != "linux" {
			t.Fatalf("device = %+v, %v", d, err)
		}
		v, err := c.Verify(ctx, "fleet", client.VerifyRequest{DeviceID: "dev-1", Nonce: ch.Nonce, Signature: client.SignNonce(priv, ch.Nonce)})
		if err != nil || !v.Verified || v.DeviceID != "dev-1" || v.VerifiedAt == 0 {
			t.Fatalf("verify = %+v, %v", v, err)
		}
		_, err = c.Verify(ctx, "fleet", client.VerifyRequest{DeviceID: "dev-1", Nonce: ch.Nonce, Signature: client.SignNonce(priv, ch.Nonce)})
		wantCode(t, err, http.StatusConflict, "nonce_used")
		ch, err = c.Challenge(ctx, "fleet", "dev-1")
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Verify(ctx, "fleet", client.VerifyRequest{DeviceID: "dev-1", Nonce: ch.Nonce, Signature: client.SignNonce(priv, "other")})
		wantCode(t, err, http.StatusUnauthorized, "invalid_signature")
		_, err = c.Challenge(ctx, "fleet", "nobody")
		wantCode(t, err, http.StatusNotFound, "unknown_device")
		if err := c.DeleteDevice(ctx, "fleet", "dev-1"); err != nil {
			t.Fatal(err)
		}
		_, err = c.GetDevice(ctx, "fleet", "dev-1")
		wantCode(t, err, http.StatusNotFound, "unknown_device")
		_, err = c.GetDevice(ctx, "fleet", "bad id!")
		wantCode(t, err, http.StatusBadRequest, "invalid_id")
	})

	t.Run("device key rotation", func(t *testing.T) {
		oldPub, oldKey, _ := ed25519.GenerateKey(rand.Reader)
		newPub, newKey, _ := ed25519.GenerateKey(rand.Reader)
		req := client.RegisterDeviceRequest{DeviceID: "dev-rot", Version: "1.0", Platform: "linux", BuildHash: "abc", PublicKey: oldPub}
		if _, err := c.RegisterDevice(ctx, "fleet", req); err != nil {
			t.Fatal(err)
		}
		// Another key without a proof and without the admin token is refused.
		req.PublicKey, req.Version = newPub, "1.1"
		_, err := c.RegisterDevice(ctx, "fleet", req)
		wantCode(t, err, http.StatusConflict, "device_exists")
		anon, err := client.New([]string{url})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := anon.RotateDeviceKey(ctx, "fleet", req); err == nil || !strings.Contains(err.Error(), "WithAdminToken") {
			t.Errorf("RotateDeviceKey without an admin token: %v", err)
		}
		wrong, err := client.New([]string{url}, client.WithAdminToken("not-the-token"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = wrong.RotateDeviceKey(ctx, "fleet", req)
		wantCode(t, err, http.StatusConflict, "device_exists")

		// The admin token replaces the proof; repeating the rotation is a re-registration.
		for range 2 {
			reg, err := c.RotateDeviceKey(ctx, "fleet", req)
			if err != nil || reg.Created || reg.DeviceID != "dev-rot" {
				t.Fatalf("rotate = %+v, %v; want 200", reg, err)
			}
		}
		d, err := c.GetDevice(ctx, "fleet", "dev-rot")
		if err != nil || d.Version != "1.1" {
			t.Fatalf("device after rotation = %+v, %v", d, err)
		}
		// The new key verifies, the old one no longer does.
		ch, err := c.Challenge(ctx, "fleet", "dev-rot")
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Verify(ctx, "fleet", client.VerifyRequest{DeviceID: "dev-rot", Nonce: ch.Nonce, Signature: client.SignNonce(oldKey, ch.Nonce)})
		wantCode(t, err, http.StatusUnauthorized, "invalid_signature")
		if ch, err = c.Challenge(ctx, "fleet", "dev-rot"); err != nil {
			t.Fatal(err)
		}
		if v, err := c.Verify(ctx, "fleet", client.VerifyRequest{DeviceID: "dev-rot", Nonce: ch.Nonce, Signature: client.SignNonce(newKey, ch.Nonce)}); err != nil || !v.Verified {
			t.Fatalf("verify with the new key = %+v, %v", v, err)
		}
	})

	t.Run("servers", func(t *testing.T) {
		hb, err := c.PutServer(ctx, "edge", "s-1", client.PutServerRequest{Address: "10.0.0.1:443", Region: "eu", Meta: json.RawMessage(`{"v":1}`)})
		if err != nil || !hb.Created || hb.ServerID != "s-1" {
			t.Fatalf("put = %+v, %v", hb, err)
		}
		if hb, err = c.PutServer(ctx, "edge", "s-1", client.PutServerRequest{Address: "10.0.0.1:443"}); err != nil || hb.Created {
			t.Fatalf("heartbeat = %+v, %v; want 200", hb, err)
		}
		list, err := c.ListServers(ctx, "edge")
		if err != nil || len(list) != 1 || list[0].ServerID != "s-1" || list[0].Address != "10.0.0.1:443" {
			t.Fatalf("list = %+v, %v", list, err)
		}
		if err := c.DeleteServer(ctx, "edge", "s-1"); err != nil {
			t.Fatal(err)
		}
		if list, err = c.ListServers(ctx, "edge"); err != nil || len(list) != 0 {
			t.Fatalf("list after delete = %+v, %v", list, err)
		}
		wantCode(t, c.DeleteServer(ctx, "edge", "s-1"), http.StatusNotFound, "unknown_server")
	})

	t.Run("nonces", func(t *testing.T) {
		n, err := c.IssueNonce(ctx, "acme")
		if err != nil || n.Nonce == "" || n.OrgID != "acme" || n.ExpiresAt <= n.IssuedAt || n.UsedAt != nil {
			t.Fatalf("issue = %+v, %v", n, err)
		}
		_, err = c.ConsumeNonce(ctx, n.Nonce, client.ConsumeRequest{OrgID: "other"})
		wantCode(t, err, http.StatusForbidden, "org_mismatch")
		used, err := c.ConsumeNonce(ctx, n.Nonce, client.ConsumeRequest{OrgID: "acme", RequestID: "req-1"})
		if err != nil || used.Nonce != n.Nonce || used.UsedAt == 0 {
			t.Fatalf("consume = %+v, %v", used, err)
		}
		// The same request id is answered 200 again (a retry after a lost answer); another is 409.
		again, err := c.ConsumeNonce(ctx, n.Nonce, client.ConsumeRequest{OrgID: "acme", RequestID: "req-1"})
		if err != nil || again.UsedAt != used.UsedAt {
			t.Fatalf("consume retry = %+v, %v; want the first answer", again, err)
		}
		_, err = c.ConsumeNonce(ctx, n.Nonce, client.ConsumeRequest{OrgID: "acme"})
		wantCode(t, err, http.StatusConflict, "nonce_used")
		got, err := c.GetNonce(ctx, n.Nonce)
		if err != nil || got.UsedAt == nil || *got.UsedAt != used.UsedAt {
			t.Fatalf("get = %+v, %v", got, err)
		}
		_, err = c.GetNonce(ctx, "never-issued")
		wantCode(t, err, http.StatusNotFound, "unknown_nonce")
	})

	t.Run("admin token", func(t *testing.T) {
		anon, err := client.New([]string{url})
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, anon.DeleteServer(ctx, "edge", "s-1"), http.StatusUnauthorized, "unauthorized")
	})
}
