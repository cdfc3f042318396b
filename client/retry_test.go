package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/actors/actortest"
)

// newTestClient is a client of urls with a fake clock, jitter fixed at u and policy p.
func newTestClient(t *testing.T, urls []string, p RetryPolicy, u float64, opts ...Option) (*Client, *actortest.Clock) {
	t.Helper()
	c, err := New(urls, append([]Option{WithRetryPolicy(p)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	// Sleeping advances the fake clock at once and records the wait, so waits are measured
	// exactly, never with the wall clock.
	clk := actortest.NewClock(time.Unix(1_700_000_000, 0))
	c.now, c.sleep = clk.Now, clk.Sleep
	c.uniform = func() float64 { return u }
	return c, clk
}

// writeError answers with the contract's error body.
func writeError(w http.ResponseWriter, status int, code, msg string, retryAfter string) {
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "message": msg})
}

// flaky answers the first `failures` requests with status/code (Retry-After ra when not
// empty), then with 200 and ok. It counts requests.
type flaky struct {
	failures   int32
	status     int
	code, ra   string
	ok         string
	requests   atomic.Int32
	onRequest  func(r *http.Request, body []byte)
	hijackFail bool // fail by closing the connection instead of answering
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := f.requests.Add(1)
	body, _ := io.ReadAll(r.Body)
	if f.onRequest != nil {
		f.onRequest(r, body)
	}
	if n <= f.failures {
		if f.hijackFail {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		writeError(w, f.status, f.code, "try later", f.ra)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, f.ok)
}

const nonceOK = `{"nonce":"n1","org_id":"acme","issued_at":1,"expires_at":2}`

func TestRetryAfterIsHonoured(t *testing.T) {
	for _, tc := range []struct {
		status int
		code   string
	}{{http.StatusServiceUnavailable, "unavailable"}, {http.StatusTooManyRequests, "too_many_pending"}} {
		t.Run(tc.code, func(t *testing.T) {
			f := &flaky{failures: 2, status: tc.status, code: tc.code, ra: "2", ok: nonceOK}
			srv := httptest.NewServer(f)
			defer srv.Close()
			p := RetryPolicy{MaxAttempts: 5, BaseDelay: 50 * time.Millisecond, MaxDelay: time.Second}
			c, clk := newTestClient(t, []string{srv.URL}, p, 0.5)
			n, err := c.IssueNonce(context.Background(), "acme")
			if err != nil {
				t.Fatal(err)
			}
			if n.Nonce != "n1" || f.requests.Load() != 3 {
				t.Fatalf("nonce %+v after %d requests, want n1 after 3", n, f.requests.Load())
			}
			waits := clk.Waits()
			if len(waits) != 2 {
				t.Fatalf("waits %v, want 2", waits)
			}
			for _, w := range waits {
				// Retry-After 2 s, plus a jitter of u·BaseDelay = 25 ms.
				if w != 2*time.Second+25*time.Millisecond {
					t.Errorf("wait %v, want Retry-After 2s + 25ms jitter", w)
				}
			}
		})
	}
}

func TestBackoffWithoutRetryAfterIsExponentialAndCapped(t *testing.T) {
	f := &flaky{failures: 100, status: http.StatusServiceUnavailable, code: "unavailable", ok: nonceOK}
	srv := httptest.NewServer(f)
	defer srv.Close()
	p := RetryPolicy{MaxAttempts: 6, BaseDelay: 50 * time.Millisecond, MaxDelay: 300 * time.Millisecond}
	c, clk := newTestClient(t, []string{srv.URL}, p, 0.5)
	_, err := c.GetNonce(context.Background(), "n1")
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusServiceUnavailable || apiErr.Code != "unavailable" {
		t.Fatalf("err %v, want the last 503 unavailable", err)
	}
	if got := f.requests.Load(); got != 6 {
		t.Fatalf("%d requests, want MaxAttempts 6", got)
	}
	// Half of the ceiling 50, 100, 200, 300 (capped), 300 ms.
	want := []time.Duration{25, 50, 100, 150, 150}
	waits := clk.Waits()
	if len(waits) != len(want) {
		t.Fatalf("waits %v, want %d", waits, len(want))
	}
	for i := range want {
		if waits[i] != want[i]*time.Millisecond {
			t.Errorf("wait %d = %v, want %v", i, waits[i], want[i]*time.Millisecond)
		}
	}
}

func TestNoRetryOnOtherStatuses(t *testing.T) {
	for _, tc := range []struct {
		status int
		code   string
	}{
		{400, "invalid_request"}, {400, "invalid_id"}, {401, "unauthorized"}, {401, "invalid_signature"},
		{403, "org_mismatch"}, {404, "unknown_nonce"}, {409, "nonce_used"}, {410, "nonce_expired"},
		{413, "body_too_large"}, {500, "internal"}, {502, "bad_gateway"},
	} {
		t.Run(tc.code, func(t *testing.T) {
			f := &flaky{failures: 100, status: tc.status, code: tc.code, ra: "1", ok: nonceOK}
			srv := httptest.NewServer(f)
			defer srv.Close()
			c, clk := newTestClient(t, []string{srv.URL}, DefaultRetryPolicy, 0.5)
			_, err := c.ConsumeNonce(context.Background(), "n1", ConsumeRequest{OrgID: "acme"})
			var apiErr *APIError
			if !errors.As(err, &apiErr) || apiErr.Status != tc.status || apiErr.Code != tc.code {
				t.Fatalf("err %v, want %d %s", err, tc.status, tc.code)
			}
			if got := f.requests.Load(); got != 1 {
				t.Errorf("%d requests, want 1", got)
			}
			if w := clk.Waits(); len(w) != 0 {
				t.Errorf("waited %v", w)
			}
		})
	}
}

func TestConsumeReusesRequestIDAcrossRetries(t *testing.T) {
	var mu sync.Mutex
	var ids []string
	f := &flaky{failures: 2, status: http.StatusServiceUnavailable, code: "unavailable", ra: "1",
		ok: `{"nonce":"n1","used_at":5}`,
		onRequest: func(r *http.Request, body []byte) {
			var req struct {
				OrgID     string `json:"org_id"`
				RequestID string `json:"request_id"`
			}
			if err := json.Unmarshal(body, &req); err != nil {
				t.Errorf("body %s: %v", body, err)
			}
			mu.Lock()
			ids = append(ids, req.RequestID)
			mu.Unlock()
		}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c, _ := newTestClient(t, []string{srv.URL}, DefaultRetryPolicy, 0.5)
	got, err := c.ConsumeNonce(context.Background(), "n1", ConsumeRequest{OrgID: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if got.UsedAt != 5 {
		t.Fatalf("consumed %+v", got)
	}
	if len(ids) != 3 || ids[0] == "" || ids[1] != ids[0] || ids[2] != ids[0] {
		t.Fatalf("request ids %q, want 3 equal non-empty ids", ids)
	}
	// The next logical call has a fresh id.
	f.failures = 0
	if _, err := c.ConsumeNonce(context.Background(), "n1", ConsumeRequest{OrgID: "acme"}); err != nil {
		t.Fatal(err)
	}
	if ids[3] == ids[0] {
		t.Fatalf("second call reused request id %q", ids[3])
	}
	// A caller's own id is sent as is.
	if _, err := c.ConsumeNonce(context.Background(), "n1", ConsumeRequest{OrgID: "acme", RequestID: "mine"}); err != nil {
		t.Fatal(err)
	}
	if ids[4] != "mine" {
		t.Fatalf("request id %q, want mine", ids[4])
	}
}

func TestErrorDecoding(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    APIError
	}{
		{"contract body", func(w http.ResponseWriter, _ *http.Request) {
			writeError(w, 409, "nonce_used", "nonce already used", "")
		}, APIError{Status: 409, Code: "nonce_used", Message: "nonce already used"}},
		{"retry after", func(w http.ResponseWriter, _ *http.Request) {
			writeError(w, 503, "registry_full", "full", "7")
		}, APIError{Status: 503, Code: "registry_full", Message: "full", RetryAfter: 7 * time.Second}},
		{"http date retry after", func(w http.ResponseWriter, _ *http.Request) {
			writeError(w, 429, "too_many_pending", "slow down", time.Unix(1_700_000_003, 0).UTC().Format(http.TimeFormat))
		}, APIError{Status: 429, Code: "too_many_pending", Message: "slow down", RetryAfter: 3 * time.Second}},
		{"not json", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(502)
			_, _ = io.WriteString(w, "<html>bad gateway</html>\n")
		}, APIError{Status: 502, Message: "<html>bad gateway</html>"}},
		{"empty", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(500)
		}, APIError{Status: 500, Message: "Internal Server Error"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			c, _ := newTestClient(t, []string{srv.URL}, NoRetry, 0.5)
			_, err := c.GetNonce(context.Background(), "n1")
			var got *APIError
			if !errors.As(err, &got) {
				t.Fatalf("err %T %v, want *APIError", err, err)
			}
			if *got != tc.want {
				t.Fatalf("got %+v, want %+v", *got, tc.want)
			}
			if ErrorCode(err) != tc.want.Code {
				t.Fatalf("ErrorCode %q, want %q", ErrorCode(err), tc.want.Code)
			}
		})
	}
}

func TestRetryStopsAtContextDeadline(t *testing.T) {
	f := &flaky{failures: 100, status: http.StatusServiceUnavailable, code: "unavailable", ra: "5", ok: nonceOK}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c, clk := newTestClient(t, []string{srv.URL}, DefaultRetryPolicy, 0.5)
	// The deadline is 2 s after now: a 5 s Retry-After cannot fit.
	clk.Set(time.Now())
	ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(2*time.Second))
	defer cancel()
	_, err := c.GetNonce(ctx, "n1")
	if ErrorCode(err) != "unavailable" {
		t.Fatalf("err %v, want the 503", err)
	}
	if f.requests.Load() != 1 || len(clk.Waits()) != 0 {
		t.Fatalf("%d requests, waits %v; want 1 request and no wait", f.requests.Load(), clk.Waits())
	}
}

func TestTransportErrorsRetriedOnlyWhenIdempotent(t *testing.T) {
	for _, tc := range []struct {
		name     string
		call     func(*Client) error
		requests int32
		ok       bool
	}{
		{"issue nonce", func(c *Client) error { _, err := c.IssueNonce(context.Background(), "acme"); return err }, 1, false},
		{"challenge", func(c *Client) error { _, err := c.Challenge(context.Background(), "r", "d"); return err }, 1, false},
		{"verify", func(c *Client) error {
			_, err := c.Verify(context.Background(), "r", VerifyRequest{DeviceID: "d", Nonce: "n", Signature: []byte{1}})
			return err
		}, 2, true}, // made idempotent by its generated request_id
		{"consume", func(c *Client) error {
			_, err := c.ConsumeNonce(context.Background(), "n1", ConsumeRequest{OrgID: "acme"})
			return err
		}, 2, true},
		{"get nonce", func(c *Client) error { _, err := c.GetNonce(context.Background(), "n1"); return err }, 2, true},
		{"heartbeat", func(c *Client) error {
			_, err := c.PutServer(context.Background(), "r", "s", PutServerRequest{Address: "a"})
			return err
		}, 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &flaky{failures: 1, hijackFail: true, ok: `{}`}
			srv := httptest.NewServer(f)
			defer srv.Close()
			c, _ := newTestClient(t, []string{srv.URL}, DefaultRetryPolicy, 0.5)
			err := tc.call(c)
			if (err == nil) != tc.ok {
				t.Fatalf("err %v, want success %v", err, tc.ok)
			}
			if err != nil {
				var apiErr *APIError
				if errors.As(err, &apiErr) {
					t.Fatalf("err %v is an answer, want the transport error", err)
				}
			}
			if got := f.requests.Load(); got != tc.requests {
				t.Fatalf("%d requests, want %d", got, tc.requests)
			}
		})
	}
}

func TestDialErrorMovesToNextNodeEvenWhenNotIdempotent(t *testing.T) {
	// A loopback port with nothing listening: its dial is refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	_ = ln.Close()
	f := &flaky{ok: nonceOK}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c, clk := newTestClient(t, []string{dead, srv.URL}, DefaultRetryPolicy, 0.5)
	n, err := c.IssueNonce(context.Background(), "acme")
	if err != nil || n.Nonce != "n1" {
		t.Fatalf("issue = %+v, %v; want n1 from the live node", n, err)
	}
	if f.requests.Load() != 1 || len(clk.Waits()) != 1 {
		t.Fatalf("%d requests, waits %v; want 1 request after 1 backoff", f.requests.Load(), clk.Waits())
	}
	// With retries disabled the dial error is returned.
	c, _ = newTestClient(t, []string{dead}, NoRetry, 0.5)
	var opErr *net.OpError
	if _, err := c.IssueNonce(context.Background(), "acme"); !errors.As(err, &opErr) || opErr.Op != "dial" {
		t.Fatalf("err %v, want the dial error", err)
	}
}

func TestRoundRobinOverBaseURLs(t *testing.T) {
	a, b := &flaky{ok: `{}`}, &flaky{ok: `{}`}
	sa, sb := httptest.NewServer(a), httptest.NewServer(b)
	defer sa.Close()
	defer sb.Close()
	c, _ := newTestClient(t, []string{sa.URL, sb.URL + "/"}, NoRetry, 0.5)
	for range 6 {
		if err := c.Healthz(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if a.requests.Load() != 3 || b.requests.Load() != 3 {
		t.Fatalf("requests %d and %d, want 3 and 3", a.requests.Load(), b.requests.Load())
	}
}

func TestNewRejectsBadBaseURLs(t *testing.T) {
	for _, urls := range [][]string{nil, {""}, {"127.0.0.1:8080"}, {"ftp://x"}, {"http://"}} {
		if _, err := New(urls); err == nil {
			t.Errorf("New(%q) accepted", urls)
		}
	}
}
