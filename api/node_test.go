package api_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/shardkeeper/shardkeeper/api"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/node/apitest"
)

// A node answers unknown paths and methods in the JSON error format, serves its OpenAPI
// document, and counts its requests by route pattern.
func TestNodeHTTP(t *testing.T) {
	n := apitest.Start(t, nil)
	r := n.Do(t, "GET", "/v2/nothing", nil)
	if r.Status != http.StatusNotFound || r.ErrorCode() != "not_found" || r.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v2/nothing: %d %q %s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	r = n.Do(t, "DELETE", "/v1/nonces", nil)
	if r.Status != http.StatusMethodNotAllowed || r.ErrorCode() != "method_not_allowed" ||
		r.Header.Get("Content-Type") != "application/json" || !strings.Contains(r.Header.Get("Allow"), "POST") {
		t.Fatalf("DELETE /v1/nonces: %d %q Allow %q %s", r.Status, r.Header.Get("Content-Type"), r.Header.Get("Allow"), r.Body)
	}
	r = n.Do(t, "GET", "/openapi.yaml", nil)
	if r.Status != http.StatusOK || string(r.Body) != string(api.OpenAPI()) {
		t.Fatalf("GET /openapi.yaml: %d, %d bytes", r.Status, len(r.Body))
	}
	if r := n.Do(t, "GET", "/v1/nonces/x", nil); r.Status != http.StatusNotFound || r.ErrorCode() != "unknown_nonce" {
		t.Fatalf("GET /v1/nonces/x: %d %s", r.Status, r.Body)
	}
	metrics := string(n.Do(t, "GET", "/metrics", nil).Body)
	for _, want := range []string{
		`shardkeeper_http_requests_total{code="404",method="GET",route="unmatched"} 1`,
		`shardkeeper_http_requests_total{code="405",method="DELETE",route="unmatched"} 1`,
		`shardkeeper_http_requests_total{code="200",method="GET",route="/openapi.yaml"} 1`,
		`shardkeeper_http_requests_total{code="404",method="GET",route="/v1/nonces/{nonce}"} 1`,
		`shardkeeper_http_request_duration_seconds_count{method="GET",route="/v1/nonces/{nonce}"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// No error answer repeats what the client sent: invalid identifiers in paths and bodies, of
// every service, are named by their field only.
func TestErrorsDoNotEchoInput(t *testing.T) {
	n := apitest.Start(t, nil)
	const mark = "evil<script>"
	esc := "evil%3Cscript%3E"
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"POST", "/v1/attest/" + esc + "/register", `{}`},
		{"POST", "/v1/attest/r1/register", map[string]any{"device_id": mark, "version": "1", "platform": "p", "build_hash": "h", "public_key": "AAAA"}},
		{"POST", "/v1/attest/r1/challenge", map[string]any{"device_id": mark}},
		{"PUT", "/v1/servers/r1/" + esc, map[string]any{"address": "a"}},
		{"GET", "/v1/servers/" + esc, nil},
		{"POST", "/servers", map[string]any{"serverId": mark, "address": "a"}},
		{"POST", "/v1/nonces", map[string]any{"org_id": mark}},
	} {
		r := n.Do(t, c.method, c.path, c.body)
		if r.Status != http.StatusBadRequest || strings.Contains(string(r.Body), "evil") {
			t.Errorf("%s %s: %d %s", c.method, c.path, r.Status, r.Body)
		}
	}
}

// With --admin-addr, the operator's routes — metrics, the cluster view, admin endpoints,
// profiles — are served on that listener only; the public one answers them 404 as unknown.
// Health checks answer on both. The profile of the command line is served on neither.
func TestAdminListener(t *testing.T) {
	const token = "admin-token-for-the-admin-listener-test"
	n := apitest.Start(t, func(c *config.Config) { c.AdminAddr, c.AdminToken = "127.0.0.1:0", token })
	admin := "http://" + n.AdminAddr()
	do := func(method, url string) int {
		req, _ := http.NewRequest(method, url, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		method, path         string
		public, adminListens int
	}{
		{"GET", "/metrics", 404, 200},
		{"GET", "/v1/cluster", 404, 200},
		{"GET", "/v1/cluster/hashes", 404, 200},
		{"DELETE", "/v1/attest/r1/devices/d1", 404, 404}, // public: no such route; admin: unknown device
		{"DELETE", "/v1/servers/r1/s1", 404, 404},
		{"GET", "/debug/pprof/", 404, 200},
		{"GET", "/debug/pprof/cmdline", 404, 404}, // it may show a token given as a flag
		{"GET", "/healthz", 200, 200},
		{"GET", "/readyz", 200, 200},
		{"POST", "/v1/nonces", 400, 404},
	} {
		if got := do(c.method, n.URL+c.path); got != c.public {
			t.Errorf("public %s %s: %d, want %d", c.method, c.path, got, c.public)
		}
		if got := do(c.method, admin+c.path); got != c.adminListens {
			t.Errorf("admin %s %s: %d, want %d", c.method, c.path, got, c.adminListens)
		}
	}
	r := n.Do(t, "DELETE", "/v1/attest/r1/devices/d1", nil, "Authorization", "Bearer "+token)
	if r.ErrorCode() != "not_found" {
		t.Errorf("public admin route: %d %s, want not_found", r.Status, r.Body)
	}
}
