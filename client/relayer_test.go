package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/api"
	"go.yaml.in/yaml/v3"
)

// fakeRelayer answers the relayer endpoints as the contract says, from memory: the bearer
// token, 201 then 200 for an identical repeat, 409 for the same key with another body,
// 404 unknown_relayer / unknown_intent, and 429 queue_full for the first queueFull submits.
type fakeRelayer struct {
	token     string // "" answers 403 relayer_disabled
	accounts  map[string]bool
	queueFull int32  // submits answered 429 before any is accepted
	retryAt   string // Retry-After of the 429s
	pollDelay time.Duration

	mu       sync.Mutex
	intents  map[string]stored // by account_id + "\x00" + idempotency_key
	requests []fakeRequest
	submits  atomic.Int32
}

type stored struct {
	body   []byte // canonical JSON of the first submit
	intent Intent
}

// fakeRequest is a request as the fake saw it.
type fakeRequest struct {
	method, escapedPath, rawQuery, auth string
	account, idem                       string // the path values, unescaped by the mux
	body                                []byte
}

func newFakeRelayer(token string, accounts ...string) *fakeRelayer {
	f := &fakeRelayer{token: token, accounts: map[string]bool{}, intents: map[string]stored{}}
	for _, a := range accounts {
		f.accounts[a] = true
	}
	return f
}

func (f *fakeRelayer) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/relayers/{account_id}/intents", f.guard(f.submit))
	mux.HandleFunc("GET /v1/relayers/{account_id}/intents/{idempotency_key}", f.guard(f.get))
	mux.HandleFunc("GET /v1/relayers/{account_id}", f.guard(f.status))
	return mux
}

func (f *fakeRelayer) log() []fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeRequest(nil), f.requests...)
}

// guard records the request and checks the token and the account.
func (f *fakeRelayer) guard(h func(http.ResponseWriter, *http.Request, []byte)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.requests = append(f.requests, fakeRequest{method: r.Method, escapedPath: r.URL.EscapedPath(),
			rawQuery: r.URL.RawQuery, auth: r.Header.Get("Authorization"),
			account: r.PathValue("account_id"), idem: r.PathValue("idempotency_key"), body: body})
		f.mu.Unlock()
		switch {
		case f.token == "":
			writeError(w, http.StatusForbidden, "relayer_disabled", "no relayer token is configured", "")
		case r.Header.Get("Authorization") != "Bearer "+f.token:
			writeError(w, http.StatusUnauthorized, "unauthorized", "relayer token missing or wrong", "")
		case !f.accounts[r.PathValue("account_id")]:
			writeError(w, http.StatusNotFound, "unknown_relayer", "no such relayer account", "")
		default:
			h(w, r, body)
		}
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// canonical re-encodes JSON with sorted keys and no spacing.
func canonical(b []byte) ([]byte, error) {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

func (f *fakeRelayer) submit(w http.ResponseWriter, r *http.Request, body []byte) {
	if f.submits.Add(1) <= f.queueFull {
		writeError(w, http.StatusTooManyRequests, "queue_full", "the key's queue is full", f.retryAt)
		return
	}
	var req SubmitIntent
	canon, err := canonical(body)
	if err != nil || json.Unmarshal(body, &req) != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "malformed body", "")
		return
	}
	if req.IdempotencyKey == "" && req.SignedDelegate != "" {
		req.IdempotencyKey = "delegate:" + req.SignedDelegate
	}
	if req.IdempotencyKey == "" {
		writeError(w, http.StatusBadRequest, "invalid_request", "idempotency_key missing", "")
		return
	}
	account := r.PathValue("account_id")
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.intents[account+"\x00"+req.IdempotencyKey]; ok {
		if !bytes.Equal(s.body, canon) {
			writeError(w, http.StatusConflict, "idempotency_conflict", "same key, different body", "")
			return
		}
		writeJSON(w, http.StatusOK, s.intent)
		return
	}
	in := Intent{IdempotencyKey: req.IdempotencyKey, AccountID: account, PublicKey: "ed25519:K1",
		Status: IntentQueued, CreatedAt: 1000, UpdatedAt: 1000}
	f.intents[account+"\x00"+req.IdempotencyKey] = stored{body: canon, intent: in}
	writeJSON(w, http.StatusCreated, in)
}

func (f *fakeRelayer) get(w http.ResponseWriter, r *http.Request, _ []byte) {
	if r.URL.Query().Get("wait") != "" && f.pollDelay > 0 {
		time.Sleep(f.pollDelay)
	}
	f.mu.Lock()
	s, ok := f.intents[r.PathValue("account_id")+"\x00"+r.PathValue("idempotency_key")]
	f.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, "unknown_intent", "no such intent", "")
		return
	}
	writeJSON(w, http.StatusOK, s.intent)
}

func (f *fakeRelayer) status(w http.ResponseWriter, r *http.Request, _ []byte) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"account_id":"`+r.PathValue("account_id")+`","keys":[`+
		`{"public_key":"ed25519:K1","next_nonce":null,"queued":3,"in_flight":0,"last_error":null},`+
		`{"public_key":"ed25519:K2","next_nonce":42,"queued":0,"in_flight":2,`+
		`"last_error":{"code":"rpc_error","message":"timeout","at":1700}}]}`)
}

// startRelayer serves f and returns a client of it with relayer token token (none when "").
func startRelayer(t *testing.T, f *fakeRelayer, p RetryPolicy, token string, opts ...Option) *Client {
	t.Helper()
	srv := httptest.NewServer(f.handler())
	t.Cleanup(srv.Close)
	if token != "" {
		opts = append(opts, WithRelayerToken(token))
	}
	c, _ := newTestClient(t, []string{srv.URL}, p, 0.5, opts...)
	return c
}

var transfer = SubmitIntent{IdempotencyKey: "pay-1", ReceiverID: "bob.near",
	Actions: json.RawMessage(`[{"Transfer": {"deposit": "1000"}}]`)}

func TestSubmitIntentCreatedThenRepeatThenConflict(t *testing.T) {
	f := newFakeRelayer("tok", "relayer.near")
	c := startRelayer(t, f, DefaultRetryPolicy, "tok")
	ctx := context.Background()

	in, created, err := c.SubmitIntent(ctx, "relayer.near", transfer)
	if err != nil || !created {
		t.Fatalf("first submit = %+v, created %v, %v; want created", in, created, err)
	}
	want := &Intent{IdempotencyKey: "pay-1", AccountID: "relayer.near", PublicKey: "ed25519:K1",
		Status: IntentQueued, Outcome: json.RawMessage("null"), CreatedAt: 1000, UpdatedAt: 1000}
	if !reflect.DeepEqual(in, want) {
		t.Fatalf("intent %+v, want %+v", in, want)
	}
	reqs := f.log()
	if got, wantBody := string(reqs[0].body), `{"idempotency_key":"pay-1","receiver_id":"bob.near","actions":[{"Transfer":{"deposit":"1000"}}]}`; got != wantBody {
		t.Fatalf("body %s, want %s", got, wantBody)
	}
	if reqs[0].method != "POST" || reqs[0].escapedPath != "/v1/relayers/relayer.near/intents" || reqs[0].auth != "Bearer tok" {
		t.Fatalf("sent %s %s with %q", reqs[0].method, reqs[0].escapedPath, reqs[0].auth)
	}

	// The same key and body: the same record, 200.
	again, created, err := c.SubmitIntent(ctx, "relayer.near", transfer)
	if err != nil || created || !reflect.DeepEqual(again, want) {
		t.Fatalf("repeat = %+v, created %v, %v; want the same record, not created", again, created, err)
	}

	// The same key with another body: 409, not retried.
	other := transfer
	other.Actions = json.RawMessage(`[{"Transfer":{"deposit":"2000"}}]`)
	_, _, err = c.SubmitIntent(ctx, "relayer.near", other)
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict || apiErr.Code != "idempotency_conflict" {
		t.Fatalf("conflicting submit: %v, want 409 idempotency_conflict", err)
	}
	if n := len(f.log()); n != 3 {
		t.Fatalf("%d requests, want 3 (the conflict is not retried)", n)
	}

	// An account in no keys file.
	_, _, err = c.SubmitIntent(ctx, "stranger.near", transfer)
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound || apiErr.Code != "unknown_relayer" {
		t.Fatalf("unknown account: %v, want 404 unknown_relayer", err)
	}
}

func TestSubmitSignedDelegateOmitsEmptyFields(t *testing.T) {
	f := newFakeRelayer("tok", "relayer.near")
	c := startRelayer(t, f, NoRetry, "tok")
	in, created, err := c.SubmitIntent(context.Background(), "relayer.near", SubmitIntent{SignedDelegate: "AAEC"})
	if err != nil || !created || in.IdempotencyKey != "delegate:AAEC" {
		t.Fatalf("submit = %+v, created %v, %v", in, created, err)
	}
	if got := string(f.log()[0].body); got != `{"signed_delegate":"AAEC"}` {
		t.Fatalf("body %s, want only signed_delegate", got)
	}
}

func TestRelayerToken(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, server, client string
		status               int
		code                 string
	}{
		{"no token", "tok", "", http.StatusUnauthorized, "unauthorized"},
		{"wrong token", "tok", "nope", http.StatusUnauthorized, "unauthorized"},
		{"disabled", "", "tok", http.StatusForbidden, "relayer_disabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeRelayer(tc.server, "relayer.near")
			c := startRelayer(t, f, DefaultRetryPolicy, tc.client)
			for _, call := range []func() error{
				func() error { _, _, err := c.SubmitIntent(ctx, "relayer.near", transfer); return err },
				func() error { _, err := c.GetIntent(ctx, "relayer.near", "pay-1", 0); return err },
				func() error { _, err := c.Relayer(ctx, "relayer.near"); return err },
			} {
				var apiErr *APIError
				if err := call(); !errors.As(err, &apiErr) || apiErr.Status != tc.status || apiErr.Code != tc.code {
					t.Fatalf("err %v, want %d %s", err, tc.status, tc.code)
				}
			}
			if n := len(f.log()); n != 3 {
				t.Fatalf("%d requests, want 3 (not retried)", n)
			}
		})
	}
}

// Each token goes to its own endpoints only.
func TestRelayerTokenOnlyOnRelayerPaths(t *testing.T) {
	var mu sync.Mutex
	auth := map[string]string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth[r.Method+" "+r.URL.Path] = r.Header.Get("Authorization")
		mu.Unlock()
		if r.Method == http.MethodDelete {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{}`)
	}))
	defer srv.Close()
	c, _ := newTestClient(t, []string{srv.URL}, NoRetry, 0.5, WithAdminToken("adm"), WithRelayerToken("rel"))
	ctx := context.Background()
	if _, _, err := c.SubmitIntent(ctx, "r.near", transfer); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetIntent(ctx, "r.near", "k", time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Relayer(ctx, "r.near"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteDevice(ctx, "fleet", "d"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetNonce(ctx, "n"); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"POST /v1/relayers/r.near/intents":  "Bearer rel",
		"GET /v1/relayers/r.near/intents/k": "Bearer rel",
		"GET /v1/relayers/r.near":           "Bearer rel",
		"DELETE /v1/attest/fleet/devices/d": "Bearer adm",
		"GET /v1/nonces/n":                  "",
	}
	if !reflect.DeepEqual(auth, want) {
		t.Fatalf("Authorization by request %v, want %v", auth, want)
	}
}

func TestSubmitIntentQueueFullHonoursRetryAfter(t *testing.T) {
	f := newFakeRelayer("tok", "relayer.near")
	f.queueFull, f.retryAt = 2, "3"
	srv := httptest.NewServer(f.handler())
	defer srv.Close()
	p := RetryPolicy{MaxAttempts: 5, BaseDelay: 50 * time.Millisecond, MaxDelay: time.Second}
	c, clk := newTestClient(t, []string{srv.URL}, p, 0.5, WithRelayerToken("tok"))
	in, created, err := c.SubmitIntent(context.Background(), "relayer.near", transfer)
	if err != nil || !created || in.IdempotencyKey != "pay-1" {
		t.Fatalf("submit = %+v, created %v, %v; want created after the 429s", in, created, err)
	}
	if n := len(f.log()); n != 3 {
		t.Fatalf("%d requests, want 3", n)
	}
	waits := clk.Waits()
	if len(waits) != 2 {
		t.Fatalf("waits %v, want 2", waits)
	}
	for _, w := range waits {
		// Retry-After 3 s, plus a jitter of u·BaseDelay = 25 ms.
		if w != 3*time.Second+25*time.Millisecond {
			t.Errorf("wait %v, want Retry-After 3s + 25ms jitter", w)
		}
	}
	// Every attempt sent the same body.
	reqs := f.log()
	for _, r := range reqs[1:] {
		if !bytes.Equal(r.body, reqs[0].body) {
			t.Fatalf("retry body %s differs from %s", r.body, reqs[0].body)
		}
	}
}

func TestSubmitIntentQueueFullStopsAtContextDeadline(t *testing.T) {
	f := newFakeRelayer("tok", "relayer.near")
	f.queueFull, f.retryAt = 100, "3"
	srv := httptest.NewServer(f.handler())
	defer srv.Close()
	c, clk := newTestClient(t, []string{srv.URL}, DefaultRetryPolicy, 0.5, WithRelayerToken("tok"))
	clk.Set(time.Now())
	ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(2*time.Second))
	defer cancel()
	_, _, err := c.SubmitIntent(ctx, "relayer.near", transfer)
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusTooManyRequests || apiErr.Code != "queue_full" || apiErr.RetryAfter != 3*time.Second {
		t.Fatalf("err %v, want 429 queue_full with Retry-After 3s", err)
	}
	if n := len(f.log()); n != 1 || len(clk.Waits()) != 0 {
		t.Fatalf("%d requests, waits %v; want 1 request and no wait past the deadline", n, clk.Waits())
	}
}

// A submit is idempotent: a connection dropped before the answer is retried.
func TestSubmitIntentRetriedAfterTransportError(t *testing.T) {
	fl := &flaky{failures: 1, hijackFail: true, ok: `{"idempotency_key":"pay-1","status":"queued"}`}
	srv := httptest.NewServer(fl)
	defer srv.Close()
	c, _ := newTestClient(t, []string{srv.URL}, DefaultRetryPolicy, 0.5)
	in, _, err := c.SubmitIntent(context.Background(), "relayer.near", transfer)
	if err != nil || in.Status != IntentQueued {
		t.Fatalf("submit = %+v, %v", in, err)
	}
	if n := fl.requests.Load(); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
}

func TestGetIntentWaitParameter(t *testing.T) {
	f := newFakeRelayer("tok", "relayer.near")
	c := startRelayer(t, f, NoRetry, "tok")
	ctx := context.Background()
	if _, _, err := c.SubmitIntent(ctx, "relayer.near", transfer); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		wait  time.Duration
		query string
	}{
		{0, ""},
		{-time.Second, ""},
		{5 * time.Second, "wait=5s"},
		{1500 * time.Millisecond, "wait=1.5s"},
		{90 * time.Second, "wait=1m30s"},
	} {
		in, err := c.GetIntent(ctx, "relayer.near", "pay-1", tc.wait)
		if err != nil || in.IdempotencyKey != "pay-1" {
			t.Fatalf("get (wait %v) = %+v, %v", tc.wait, in, err)
		}
		reqs := f.log()
		last := reqs[len(reqs)-1]
		if last.method != "GET" || last.escapedPath != "/v1/relayers/relayer.near/intents/pay-1" || last.rawQuery != tc.query {
			t.Fatalf("wait %v sent %s %s?%s, want query %q", tc.wait, last.method, last.escapedPath, last.rawQuery, tc.query)
		}
	}
	_, err := c.GetIntent(ctx, "relayer.near", "nope", time.Second)
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound || apiErr.Code != "unknown_intent" {
		t.Fatalf("err %v, want 404 unknown_intent", err)
	}
}

func TestIdempotencyKeyPathEscaping(t *testing.T) {
	f := newFakeRelayer("tok", "relayer.near")
	c := startRelayer(t, f, NoRetry, "tok")
	ctx := context.Background()
	for _, key := range []string{"a:b@c+d=e", "user@example.com:order=17+x", "v1.2_x-y", "+=", "delegate:3xQ9Zz"} {
		req := transfer
		req.IdempotencyKey = key
		if _, _, err := c.SubmitIntent(ctx, "relayer.near", req); err != nil {
			t.Fatalf("submit %q: %v", key, err)
		}
		in, err := c.GetIntent(ctx, "relayer.near", key, 0)
		if err != nil || in.IdempotencyKey != key {
			t.Fatalf("get %q = %+v, %v", key, in, err)
		}
		reqs := f.log()
		last := reqs[len(reqs)-1]
		if last.idem != key || last.account != "relayer.near" {
			t.Fatalf("key %q reached the server as %q (path %s)", key, last.idem, last.escapedPath)
		}
		// '+' must not become a space and no character may leave its segment.
		if strings.Count(last.escapedPath, "/") != 5 {
			t.Fatalf("path %s has the wrong segments", last.escapedPath)
		}
	}
	// A key out of the contract's syntax (the server answers 400 invalid_id) still stays in
	// its segment: nothing in it is taken for a separator, query or fragment.
	odd := "a/b?c#d e%"
	if _, err := c.GetIntent(ctx, "relayer.near", odd, 0); ErrorCode(err) != "unknown_intent" {
		t.Fatalf("get %q: %v, want the fake's 404 unknown_intent", odd, err)
	}
	reqs := f.log()
	if last := reqs[len(reqs)-1]; last.idem != odd || last.rawQuery != "" {
		t.Fatalf("key %q reached the server as %q, query %q", odd, last.idem, last.rawQuery)
	}
	// Segments the router would clean away are refused before any request.
	n := len(f.log())
	for _, key := range []string{"", ".", ".."} {
		if _, err := c.GetIntent(ctx, "relayer.near", key, 0); err == nil {
			t.Errorf("GetIntent accepted key %q", key)
		}
	}
	for _, account := range []string{"", ".", ".."} {
		if _, err := c.Relayer(ctx, account); err == nil {
			t.Errorf("Relayer accepted account %q", account)
		}
		if _, _, err := c.SubmitIntent(ctx, account, transfer); err == nil {
			t.Errorf("SubmitIntent accepted account %q", account)
		}
	}
	if len(f.log()) != n {
		t.Fatalf("refused segments were sent")
	}
}

// A long poll is bounded by the context, not by the HTTP client's Timeout; other calls keep
// that Timeout.
func TestLongPollOutlivesHTTPClientTimeout(t *testing.T) {
	f := newFakeRelayer("tok", "relayer.near")
	f.pollDelay = 600 * time.Millisecond
	c := startRelayer(t, f, NoRetry, "tok", WithHTTPClient(&http.Client{Timeout: 150 * time.Millisecond}))
	ctx := context.Background()
	if _, _, err := c.SubmitIntent(ctx, "relayer.near", transfer); err != nil {
		t.Fatal(err)
	}
	if in, err := c.GetIntent(ctx, "relayer.near", "pay-1", 2*time.Second); err != nil || in.IdempotencyKey != "pay-1" {
		t.Fatalf("long poll = %+v, %v; want the record after the server's hold", in, err)
	}
	// The context still governs it.
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := c.GetIntent(short, "relayer.near", "pay-1", 2*time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the context's deadline", err)
	}
	// The slow fake holds only waits; a plain read with a slow server still hits the Timeout.
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(600 * time.Millisecond)
		_, _ = io.WriteString(w, `{}`)
	}))
	defer slow.Close()
	c2, _ := newTestClient(t, []string{slow.URL}, NoRetry, 0.5, WithHTTPClient(&http.Client{Timeout: 150 * time.Millisecond}))
	if _, err := c2.GetIntent(ctx, "relayer.near", "pay-1", 0); err == nil {
		t.Fatal("a read without wait outlived the HTTP client's Timeout")
	}
}

func TestIntentRecordDecoding(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/relayers/r.near/intents/ok":
			_, _ = io.WriteString(w, `{"idempotency_key":"ok","account_id":"r.near","public_key":"ed25519:K1",`+
				`"status":"succeeded","nonce":18,"tx_hash":"9hZ2","attempts":2,"outcome":{"SuccessValue":""},`+
				`"error":null,"created_at":1,"updated_at":2}`)
		case "/v1/relayers/r.near/intents/bad":
			_, _ = io.WriteString(w, `{"idempotency_key":"bad","account_id":"r.near","public_key":"ed25519:K1",`+
				`"status":"rejected","nonce":19,"tx_hash":"7xY","attempts":1,"outcome":null,`+
				`"error":{"code":"NotEnoughBalance","message":"insufficient"},"created_at":3,"updated_at":4}`)
		}
	}))
	defer srv.Close()
	c, _ := newTestClient(t, []string{srv.URL}, NoRetry, 0.5)
	ctx := context.Background()
	ok, err := c.GetIntent(ctx, "r.near", "ok", 0)
	if err != nil {
		t.Fatal(err)
	}
	wantOK := &Intent{IdempotencyKey: "ok", AccountID: "r.near", PublicKey: "ed25519:K1", Status: IntentSucceeded,
		Nonce: ptr(uint64(18)), TxHash: ptr("9hZ2"), Attempts: 2, Outcome: json.RawMessage(`{"SuccessValue":""}`),
		CreatedAt: 1, UpdatedAt: 2}
	if !reflect.DeepEqual(ok, wantOK) || !ok.Terminal() {
		t.Fatalf("intent %+v, want %+v (terminal)", ok, wantOK)
	}
	bad, err := c.GetIntent(ctx, "r.near", "bad", 0)
	if err != nil {
		t.Fatal(err)
	}
	wantBad := &Intent{IdempotencyKey: "bad", AccountID: "r.near", PublicKey: "ed25519:K1", Status: IntentRejected,
		Nonce: ptr(uint64(19)), TxHash: ptr("7xY"), Attempts: 1, Outcome: json.RawMessage(`null`),
		Error: &IntentError{Code: "NotEnoughBalance", Message: "insufficient"}, CreatedAt: 3, UpdatedAt: 4}
	if !reflect.DeepEqual(bad, wantBad) || !bad.Terminal() {
		t.Fatalf("intent %+v, want %+v (terminal)", bad, wantBad)
	}
	for _, s := range []string{IntentQueued, IntentSubmitted} {
		if (&Intent{Status: s}).Terminal() {
			t.Errorf("%s is terminal", s)
		}
	}
}

func TestRelayerStatus(t *testing.T) {
	f := newFakeRelayer("tok", "relayer.near")
	c := startRelayer(t, f, NoRetry, "tok")
	ctx := context.Background()
	got, err := c.Relayer(ctx, "relayer.near")
	if err != nil {
		t.Fatal(err)
	}
	want := &Relayer{AccountID: "relayer.near", Keys: []RelayerKey{
		{PublicKey: "ed25519:K1", Queued: 3},
		{PublicKey: "ed25519:K2", NextNonce: ptr(uint64(42)), InFlight: 2,
			LastError: &KeyError{Code: "rpc_error", Message: "timeout", At: 1700}},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("relayer %+v, want %+v", got, want)
	}
	if r := f.log()[0]; r.method != "GET" || r.escapedPath != "/v1/relayers/relayer.near" || len(r.body) != 0 {
		t.Fatalf("sent %s %s %q", r.method, r.escapedPath, r.body)
	}
	_, err = c.Relayer(ctx, "stranger.near")
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound || apiErr.Code != "unknown_relayer" {
		t.Fatalf("err %v, want 404 unknown_relayer", err)
	}
}

// The relayer types have exactly the fields of their schemas in the OpenAPI document.
func TestRelayerTypesMatchOpenAPI(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `yaml:"properties"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(api.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	for name, typ := range map[string]reflect.Type{
		"SubmitIntent": reflect.TypeFor[SubmitIntent](),
		"Intent":       reflect.TypeFor[Intent](),
		"IntentError":  reflect.TypeFor[IntentError](),
		"Relayer":      reflect.TypeFor[Relayer](),
		"RelayerKey":   reflect.TypeFor[RelayerKey](),
		"KeyError":     reflect.TypeFor[KeyError](),
	} {
		var fields, props []string
		for i := range typ.NumField() {
			if n, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ","); n != "" && n != "-" {
				fields = append(fields, n)
			}
		}
		for p := range doc.Components.Schemas[name].Properties {
			props = append(props, p)
		}
		slices.Sort(fields)
		slices.Sort(props)
		if !slices.Equal(fields, props) {
			t.Errorf("%s: the Go type has %v, openapi.yaml %v", name, fields, props)
		}
	}
}
