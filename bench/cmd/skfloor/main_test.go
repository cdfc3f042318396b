package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// TestFloorOracle checks that the calibration server answers the oracle's requests as the
// contract does, so that the load generator measures the same exchanges on it.
func TestFloorOracle(t *testing.T) {
	db, err := pebble.Open(t.TempDir(), &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	srv := httptest.NewServer(newFloor(db, time.Hour).handler())
	defer srv.Close()
	short := httptest.NewServer(newFloor(db, time.Millisecond).handler())
	defer short.Close()

	post := func(base, path, body string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		return resp.StatusCode, out
	}
	issue := func(base string) string {
		t.Helper()
		code, out := post(base, "/v1/nonces", `{"org_id":"acme"}`)
		if code != http.StatusCreated || out["nonce"] == "" {
			t.Fatalf("issue: %d %v", code, out)
		}
		return out["nonce"].(string)
	}
	n := issue(srv.URL)
	expired := issue(short.URL)
	time.Sleep(5 * time.Millisecond) // past the 1 ms lifetime
	for _, tc := range []struct {
		path, body string
		code       int
		errCode    string
	}{
		{"/v1/nonces", `{"org_id":"acme","x":1}`, 400, "invalid_request"},
		{"/v1/nonces/nope/consume", `{"org_id":"acme"}`, 404, "unknown_nonce"},
		{"/v1/nonces/" + n + "/consume", `{"org_id":"other"}`, 403, "org_mismatch"},
		{"/v1/nonces/" + n + "/consume", `{"org_id":"acme","request_id":"r1"}`, 200, ""},
		{"/v1/nonces/" + n + "/consume", `{"org_id":"acme","request_id":"r1"}`, 200, ""},
		{"/v1/nonces/" + n + "/consume", `{"org_id":"acme","request_id":"r2"}`, 409, "nonce_used"},
		{"/v1/nonces/" + expired + "/consume", `{"org_id":"acme"}`, 410, "nonce_expired"},
	} {
		code, out := post(srv.URL, tc.path, tc.body)
		if code != tc.code || (tc.errCode != "" && out["error"] != tc.errCode) {
			t.Errorf("POST %s %s: %d %v, want %d %s", tc.path, tc.body, code, out, tc.code, tc.errCode)
		}
	}
}
