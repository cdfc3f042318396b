package near

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Client calls NEAR JSON-RPC endpoints with failover. Every call tries the endpoints in their
// configured order, skipping those that failed recently (they are tried last, so a call never
// fails for want of trying every endpoint). The first JSON-RPC answer ends the call, be it a
// result or an error: a node's error is an answer about the request, and asking another node
// would not make it less true. Only failures to get an answer — no connection, a dropped one,
// a timeout, HTTP 408/429/5xx, an unreadable body — move on to the next endpoint and mark the
// one that failed down for the cool-down.
//
// Sending the same signed transaction to several endpoints is safe: NEAR applies a
// transaction at most once, whatever the number of copies. Any outcome-unknown failure before
// the final answer stays attached to the returned error, so IsRefused cannot be fooled by a
// refusal that a lost earlier copy might contradict.
//
// A Client is safe for concurrent use.
type Client struct {
	endpoints []*endpoint
	http      *http.Client
	cooldown  time.Duration
	now       func() time.Time
	observe   func(Observation)
	nextID    atomic.Uint64
}

// Observation is one JSON-RPC request to one endpoint, as WithObserver reports it.
type Observation struct {
	Method   string
	Endpoint string        // without credentials or query
	Took     time.Duration // from the start of the request to its answer or failure
	// Outcome is "ok" (a result), "error" (the node answered an error about the request) or
	// "unknown" (no answer, or one that leaves the outcome unknown: IsOutcomeUnknown).
	Outcome string
}

// WithObserver has f called after every request to an endpoint (each endpoint tried, and
// each send of an OrderedSender), for metrics. f must not block.
func WithObserver(f func(Observation)) Option { return func(c *Client) { c.observe = f } }

// observed reports a request of method to ep that started at start and ended with err.
func (c *Client) observed(method string, ep *endpoint, start time.Time, err error) {
	if c.observe == nil {
		return
	}
	o := Observation{Method: method, Endpoint: ep.name, Took: time.Since(start), Outcome: "ok"}
	switch {
	case IsOutcomeUnknown(err):
		o.Outcome = "unknown"
	case err != nil:
		o.Outcome = "error"
	}
	c.observe(o)
}

// Defaults of a Client.
const (
	// DefaultTimeout bounds one HTTP request; nearcore answers a send_tx that waits within
	// its 10 s polling timeout, so this leaves it room.
	DefaultTimeout = 20 * time.Second
	// DefaultCooldown is how long an endpoint that failed is tried after the others.
	DefaultCooldown = 30 * time.Second
	// maxResponse bounds the body read from an endpoint.
	maxResponse = 16 << 20
)

type endpoint struct {
	url  string // as configured, used for requests
	name string // without credentials or query, used in errors

	mu        sync.Mutex
	downUntil time.Time
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client (its Timeout bounds each request). The default keeps
// up to 256 idle connections per endpoint.
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithCooldown sets how long an endpoint that failed is tried after the others.
func WithCooldown(d time.Duration) Option { return func(c *Client) { c.cooldown = d } }

// withClock replaces the clock, for tests of the cool-down.
func withClock(now func() time.Time) Option { return func(c *Client) { c.now = now } }

// NewClient returns a client of the endpoints urls (http or https), tried in this order.
func NewClient(urls []string, opts ...Option) (*Client, error) {
	if len(urls) == 0 {
		return nil, errors.New("near rpc: no endpoint URL")
	}
	// No redirects: an endpoint checked to be https must not hand the relayer on to plain
	// http, and a JSON-RPC node has no reason to redirect a POST.
	noRedirects := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c := &Client{http: &http.Client{Timeout: DefaultTimeout, Transport: newTransport(), CheckRedirect: noRedirects}, cooldown: DefaultCooldown, now: time.Now}
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("near rpc: endpoint %s is not an http(s) URL", redact(raw))
		}
		c.endpoints = append(c.endpoints, &endpoint{url: raw, name: redact(raw)})
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// newTransport is the default transport of a Client: net/http's, keeping enough idle
// connections per endpoint for the many calls a relayer keeps going at once (net/http keeps
// 2, and closes and dials again every connection beyond them).
func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 256
	t.MaxIdleConns = 1024
	return t
}

// redact keeps scheme, host and path of a URL: endpoint URLs often carry an API key in their
// query or user info, which must not reach logs through error messages.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "<invalid URL>"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

// TransportError is a failure to get a JSON-RPC answer from one endpoint. Unless the HTTP
// status was another 4xx (the endpoint refused the request itself), it wraps
// ErrOutcomeUnknown: the request may have been processed.
type TransportError struct {
	Endpoint   string // the endpoint, without credentials or query
	StatusCode int    // the HTTP status, 0 when no response arrived
	Err        error

	unknown bool
}

func (e *TransportError) Error() string {
	if e.StatusCode != 0 {
		return fmt.Sprintf("%s: HTTP %d: %v", e.Endpoint, e.StatusCode, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Endpoint, e.Err)
}

// Unwrap returns the cause, and ErrOutcomeUnknown when the outcome is unknown.
func (e *TransportError) Unwrap() []error {
	if e.unknown {
		return []error{ErrOutcomeUnknown, e.Err}
	}
	return []error{e.Err}
}

// Each returns one Client per endpoint, in the configured order, each asking that endpoint
// only (sharing c's connections, observer and settings): for a question whose answer must
// come from more than one node, such as whether a transaction is dead. A Client of one
// endpoint returns itself.
func (c *Client) Each() []*Client {
	if len(c.endpoints) == 1 {
		return []*Client{c}
	}
	out := make([]*Client, len(c.endpoints))
	for i, ep := range c.endpoints {
		out[i] = &Client{endpoints: []*endpoint{ep}, http: c.http, cooldown: c.cooldown, now: c.now, observe: c.observe}
	}
	return out
}

// order returns the endpoints to try: those not in cool-down first, each group in the
// configured order.
func (c *Client) order() []*endpoint {
	now := c.now()
	up := make([]*endpoint, 0, len(c.endpoints))
	var down []*endpoint
	for _, ep := range c.endpoints {
		ep.mu.Lock()
		cooling := now.Before(ep.downUntil)
		ep.mu.Unlock()
		if cooling {
			down = append(down, ep)
		} else {
			up = append(up, ep)
		}
	}
	return append(up, down...)
}

func (ep *endpoint) setDownUntil(t time.Time) {
	ep.mu.Lock()
	ep.downUntil = t
	ep.mu.Unlock()
}

// call runs method with params and decodes the result into out (a pointer).
func (c *Client) call(ctx context.Context, method string, params, out any) error {
	id, body, err := c.encodeRequest(method, params)
	if err != nil {
		return err
	}
	var failures []error
	for _, ep := range c.order() {
		start := time.Now()
		err := c.callOne(ctx, ep, method, id, body, out)
		c.observed(method, ep, start, err)
		var te *TransportError
		if !errors.As(err, &te) {
			ep.setDownUntil(time.Time{})
			if err != nil && len(failures) > 0 {
				// An earlier endpoint may have received the request: its fate stays open.
				return errors.Join(append([]error{err}, failures...)...)
			}
			return err
		}
		failures = append(failures, err)
		if ctx.Err() != nil {
			break // the caller gave up: not the endpoint's fault, and no time for another
		}
		ep.setDownUntil(c.now().Add(c.cooldown))
	}
	return fmt.Errorf("near rpc %s: no endpoint answered: %w", method, errors.Join(failures...))
}

// encodeRequest returns a fresh request id and the JSON-RPC request of method with params.
func (c *Client) encodeRequest(method string, params any) (id string, body []byte, err error) {
	id = strconv.FormatUint(c.nextID.Add(1), 10)
	body, err = json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		ID      string `json:"id"`
		Method  string `json:"method"`
		Params  any    `json:"params"`
	}{"2.0", id, method, params})
	if err != nil {
		return "", nil, fmt.Errorf("near rpc %s: encode request: %w", method, err)
	}
	return id, body, nil
}

// callOne posts body to ep. It returns a *TransportError when no JSON-RPC answer came, an
// *RPCError when the node answered an error, and nil once out holds the result.
func (c *Client) callOne(ctx context.Context, ep *endpoint, method, id string, body []byte, out any) error {
	fail := func(status int, unknown bool, format string, args ...any) error {
		return &TransportError{Endpoint: ep.name, StatusCode: status, Err: fmt.Errorf(format, args...), unknown: unknown}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.url, bytes.NewReader(body))
	if err != nil {
		return fail(0, false, "build request: %w", withoutURL(err))
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		// The request may have been written before the failure: unknown.
		return fail(0, true, "%w", withoutURL(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return fail(resp.StatusCode, true, "read answer: %w", err)
	}
	if len(data) > maxResponse {
		return fail(resp.StatusCode, true, "answer exceeds %d bytes", maxResponse)
	}
	return decodeAnswer(ep, method, id, resp.StatusCode, data, out)
}

// decodeAnswer reads the answer of ep to the request id of method: HTTP status and body. It
// returns a *TransportError when the answer is not a JSON-RPC answer, an *RPCError when the
// node answered an error, and nil once out holds the result.
func decodeAnswer(ep *endpoint, method, id string, status int, data []byte, out any) error {
	fail := func(status int, unknown bool, format string, args ...any) error {
		return &TransportError{Endpoint: ep.name, StatusCode: status, Err: fmt.Errorf(format, args...), unknown: unknown}
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *rpcErrorJSON   `json:"error"`
	}
	parsed := json.Unmarshal(data, &msg) == nil && (msg.Error != nil || len(msg.Result) > 0)

	switch s := status; {
	case s == http.StatusRequestTimeout || s == http.StatusTooManyRequests || s >= 500:
		// Whatever the body says, the request may have gone through (a proxy timed out while
		// the node worked on it). Keep the node's error, if the body is one, for errors.As.
		if parsed && msg.Error != nil {
			return &TransportError{Endpoint: ep.name, StatusCode: s, Err: msg.Error.toError(method), unknown: true}
		}
		return fail(s, true, "%s", http.StatusText(s))
	case s < 200 || s > 299:
		if parsed && msg.Error != nil {
			return msg.Error.toError(method) // a node answering with an HTTP error status
		}
		return fail(s, false, "%s", http.StatusText(s))
	}
	if !parsed {
		return fail(status, true, "the answer is not a JSON-RPC response")
	}
	if msg.Error != nil {
		return msg.Error.toError(method)
	}
	if string(msg.ID) != strconv.Quote(id) {
		return fail(status, true, "the answer's id %s is not the request's %q", msg.ID, id)
	}
	if err := json.Unmarshal(msg.Result, out); err != nil {
		return fail(status, true, "decode %s result: %w", method, err)
	}
	if v, ok := out.(validator); ok {
		if err := v.validate(); err != nil {
			return fail(status, true, "%s result: %w", method, err)
		}
	}
	return nil
}

// withoutURL drops the *url.Error layer net/http wraps its errors in: it repeats the whole
// URL, credentials and query included.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// validator is implemented by results that check, once decoded, that the fields the method
// relies on came: an answer without them is as good as none, and another endpoint is asked.
type validator interface {
	validate() error
}
