// Package client is a typed Go client of shardkeeper's HTTP API (api/openapi.yaml): device
// attestation registries, server registries, the nonce oracle, the relayer transaction manager
// and the operational endpoints.
//
// The calls of every domain live in this one package, a file per domain (devices.go,
// servers.go, nonces.go, relayer.go), because a Go client is one type with methods and its
// users import one package; a new domain adds its file here.
//
// A Client is safe for concurrent use. Calls take a context; its deadline bounds the whole
// call, retries included. With several base URLs (the nodes of a cluster) attempts go round
// robin over them, so a retry usually reaches another node. Error answers are returned as
// *APIError; see RetryPolicy for what is retried.
package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// maxResponse bounds the body read from one answer (a server list of 1000 entries with 4 KiB
// of meta each is about 4 MiB).
const maxResponse = 16 << 20

// Client calls one shardkeeper cluster.
type Client struct {
	bases        []string // base URLs without a trailing slash
	next         atomic.Uint64
	hc           *http.Client
	adminToken   string
	relayerToken string
	chainToken   string
	serversToken string
	retry        RetryPolicy
	issuers      issuers
	routes       *routes // the routing table (WithRouting), nil without

	// Seams for tests; production values are set by New.
	sleep     func(context.Context, time.Duration) error
	now       func() time.Time
	uniform   func() float64 // uniform in [0, 1)
	requestID func() string
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client (transport, TLS, timeouts). The default has no timeout
// of its own (use the context) and keeps up to 256 idle connections per host.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithAdminToken sets the bearer token sent on admin endpoints: the deletes, and a device key
// rotation without a proof (RotateDeviceKey).
func WithAdminToken(token string) Option { return func(c *Client) { c.adminToken = token } }

// WithServersToken sets the bearer token sent on server registrations and heartbeats (the
// server's --servers-token-file).
func WithServersToken(token string) Option { return func(c *Client) { c.serversToken = token } }

// WithRelayerToken sets the bearer token sent on the relayer endpoints (/v1/relayers/...),
// the server's --relayer-token. It is sent there only, and the admin token never is.
func WithRelayerToken(token string) Option { return func(c *Client) { c.relayerToken = token } }

// WithRetryPolicy sets the retry policy (default DefaultRetryPolicy; NoRetry disables retries).
func WithRetryPolicy(p RetryPolicy) Option { return func(c *Client) { c.retry = p.normalized() } }

// New returns a client of the nodes at baseURLs ("http://127.0.0.1:8080", ...). At least one
// is needed; each must be an absolute http or https URL.
func New(baseURLs []string, opts ...Option) (*Client, error) {
	if len(baseURLs) == 0 {
		return nil, errors.New("client: no base URL")
	}
	c := &Client{
		retry:     DefaultRetryPolicy,
		sleep:     sleepContext,
		now:       time.Now,
		uniform:   mrand.Float64,
		requestID: newRequestID,
	}
	for _, b := range baseURLs {
		u, err := url.Parse(b)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("client: base URL %q is not an absolute http(s) URL", b)
		}
		c.bases = append(c.bases, strings.TrimRight(b, "/"))
	}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConns = 1024
		t.MaxIdleConnsPerHost = 256
		// Below the server's --shutdown-drain (2s): a connection idle that long is dropped
		// here before a draining server could close it under a request being written.
		t.IdleConnTimeout = time.Second
		c.hc = &http.Client{Transport: t}
	}
	return c, nil
}

// newRequestID is 128 random bits in the identifier alphabet [A-Za-z0-9_-].
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it panics on broken systems)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// call describes one logical API call.
type call struct {
	method     string
	path       string // escaped path, starting with "/"
	body       any    // marshalled as JSON when non-nil
	admin      bool   // send the admin token
	relayer    bool   // send the relayer token
	chain      bool   // send the chain token
	servers    bool   // send the servers token
	poll       bool   // a long poll: the HTTP client's own Timeout does not apply, ctx governs
	idempotent bool   // may be resent after a transport error (see RetryPolicy)
	single     bool   // one attempt whatever the policy
	// prefer is the base URL the first attempt goes to ("" or unknown: the next in turn);
	// answered, when set, learns the base URL that answered.
	prefer   string
	answered *string
	// actor is the actor the call runs on, or anyLeader set when it may run on any actor of
	// its kind: with WithRouting, the first attempt goes to the node that leads it.
	actor     *actor
	anyLeader bool
}

// do runs c's call with retries and decodes a 2xx body into out (when out is non-nil and the
// body is not empty). It returns the final HTTP status.
func (c *Client) do(ctx context.Context, cl call, out any) (int, error) {
	var body []byte
	if cl.body != nil {
		var err error
		if body, err = json.Marshal(cl.body); err != nil {
			return 0, fmt.Errorf("client: encode %s %s: %w", cl.method, cl.path, err)
		}
	}
	attempts := c.retry.MaxAttempts
	if cl.single {
		attempts = 1
	}
	for n := 1; ; n++ {
		base, routed := cl.prefer, false
		if n == 1 {
			if b := c.routed(cl); b != "" {
				base, routed = b, true
			}
		}
		if n > 1 || base == "" {
			base = c.bases[(c.next.Add(1)-1)%uint64(len(c.bases))]
		}
		status, fwd, err := c.once(ctx, base, cl, body, out)
		switch {
		case fwd.addr != "" && cl.actor != nil && c.routes != nil:
			// Forwarded: the answer names the leader. Take it, and refresh the rest.
			c.routes.learn(*cl.actor, fwd, c.scheme())
			c.refreshSoon()
		case routed && isTransport(err):
			c.routes.forget(base)
			c.refreshSoon()
		}
		if err == nil {
			if cl.answered != nil {
				*cl.answered = base
			}
			return status, nil
		}
		if n >= attempts || ctx.Err() != nil || !retryable(err, cl.idempotent) {
			return status, unwrapTransport(err)
		}
		wait := c.retry.wait(n, err, c.uniform(), c.uniform())
		if deadline, ok := ctx.Deadline(); ok && c.now().Add(wait).After(deadline) {
			return status, unwrapTransport(err)
		}
		if serr := c.sleep(ctx, wait); serr != nil {
			return status, unwrapTransport(err)
		}
	}
}

// unwrapTransport removes the internal transportError marker.
func unwrapTransport(err error) error {
	var t *transportError
	if errors.As(err, &t) {
		return t.err
	}
	return err
}

// routed is the base URL the routing table sends cl to first, "" for none (no table, or the
// call names no actor the table knows a leader of).
func (c *Client) routed(cl call) string {
	if c.routes == nil || (cl.actor == nil && !cl.anyLeader) {
		return ""
	}
	var base string
	if cl.actor != nil {
		base = c.routes.base(*cl.actor)
	} else {
		base = c.routes.anyLeader()
	}
	if base == "" || c.routes.old(c.now()) {
		c.refreshSoon()
	}
	return base
}

// isTransport reports whether err is a transport error (the node was not reached, or its
// answer was lost).
func isTransport(err error) bool {
	var t *transportError
	return errors.As(err, &t)
}

// once sends one attempt of cl to base. fwd is what the answer says of a forward: the node
// that ran the request when base forwarded it there.
func (c *Client) once(ctx context.Context, base string, cl call, body []byte, out any) (int, forwarded, error) {
	var fwd forwarded
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, cl.method, base+cl.path, rd)
	if err != nil {
		return 0, fwd, fmt.Errorf("client: build %s %s: %w", cl.method, cl.path, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token := c.bearer(cl); token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	hc := c.hc
	if cl.poll && hc.Timeout > 0 {
		// The server holds a long poll's answer up to its wait; a Timeout set for ordinary
		// calls would cut it. Only the context bounds it.
		nc := *hc
		nc.Timeout = 0
		hc = &nc
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fwd, &transportError{err}
	}
	defer resp.Body.Close()
	fwd = forwardedOf(resp.Header)
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return resp.StatusCode, fwd, &transportError{fmt.Errorf("client: read %s %s answer: %w", cl.method, cl.path, err)}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fwd, c.decodeError(resp, data)
	}
	if raw, ok := out.(*[]byte); ok { // a text answer (a checkpoint)
		*raw = data
	} else if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fwd, fmt.Errorf("client: decode %s %s answer (HTTP %d): %w", cl.method, cl.path, resp.StatusCode, err)
		}
	}
	return resp.StatusCode, fwd, nil
}

// bearer is the token cl sends as Authorization: Bearer, "" for none.
func (c *Client) bearer(cl call) string {
	switch {
	case cl.admin:
		return c.adminToken
	case cl.relayer:
		return c.relayerToken
	case cl.chain:
		return c.chainToken
	case cl.servers:
		return c.serversToken
	}
	return ""
}

// decodeError builds the *APIError of a non-2xx answer.
func (c *Client) decodeError(resp *http.Response, data []byte) *APIError {
	e := &APIError{Status: resp.StatusCode, RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), c.now())}
	var body struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if json.Unmarshal(data, &body) == nil && body.Error != "" {
		e.Code, e.Message = body.Error, body.Message
		return e
	}
	msg := strings.TrimSpace(string(data))
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	e.Message = msg
	return e
}

// seg escapes one path segment.
func seg(s string) string { return url.PathEscape(s) }
