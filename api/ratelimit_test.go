package api

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// A client gets its burst, then one request per 1/rate; another client has a budget of its
// own; Retry-After says when the next token is back; exempt requests always pass; idle
// clients are forgotten.
func TestRateLimit(t *testing.T) {
	now := time.Unix(1000, 0)
	lim := newLimiter(0.5, 2, func() time.Time { return now })
	h := lim.handler(isHealthCheck, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	send := func(remote, token, path string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", path, nil)
		r.RemoteAddr = remote
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	for i := range 2 {
		if w := send("10.0.0.1:5000", "", "/v1/nonces"); w.Code != 200 {
			t.Fatalf("request %d of the burst: %d", i, w.Code)
		}
	}
	w := send("10.0.0.1:5001", "", "/v1/nonces") // another port, the same client
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "2" {
		t.Fatalf("past the burst: %d Retry-After %q, want 429 after 2 s", w.Code, w.Header().Get("Retry-After"))
	}
	if w := send("10.0.0.2:5000", "", "/v1/nonces"); w.Code != 200 {
		t.Fatalf("another address: %d", w.Code)
	}
	if w := send("10.0.0.1:5000", "made-up-token", "/v1/nonces"); w.Code != http.StatusTooManyRequests {
		t.Fatalf("a token does not buy a budget of its own: %d", w.Code)
	}
	if w := send("[2001:db8::1]:5000", "", "/v1/nonces"); w.Code != 200 {
		t.Fatal(w.Code)
	}
	send("[2001:db8::2]:5000", "", "/v1/nonces")
	if w := send("[2001:db8::3]:5000", "", "/v1/nonces"); w.Code != http.StatusTooManyRequests {
		t.Fatalf("a third address of one IPv6 /64 past the burst: %d", w.Code)
	}
	now = now.Add(2 * time.Second)
	if w := send("10.0.0.1:5000", "", "/v1/nonces"); w.Code != 200 {
		t.Fatalf("after 2 s: %d", w.Code)
	}
	now = now.Add(2 * forgetAfter)
	lim.take("x")
	if n := len(lim.clients); n != 1 {
		t.Fatalf("%d clients kept after they were idle, want the one just seen", n)
	}

	if w := send("10.0.0.9:5000", "", "/v1/nonces"); w.Code != 200 {
		t.Fatal(w.Code)
	}
	for range 3 {
		send("10.0.0.9:5000", "", "/v1/nonces")
	}
	if w := send("10.0.0.9:5000", "", "/readyz"); w.Code != 200 {
		t.Fatalf("a health check from a limited client: %d", w.Code)
	}
}

// isHealthCheck exempts the health checks, as a node does (ops.IsHealthCheck).
func isHealthCheck(r *http.Request) bool { return r.URL.Path == "/healthz" || r.URL.Path == "/readyz" }
