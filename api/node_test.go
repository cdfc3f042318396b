package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/shardkeeper/shardkeeper/api"
	"github.com/shardkeeper/shardkeeper/api/apitest"
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
// every domain, are named by their field only.
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
