package near

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// OrderedSender sends the transactions of one access key to a node in the order its SendTx
// calls are made, without waiting for one answer before sending the next: the requests are
// written one after the other on a single persistent HTTP/1.1 connection (pipelining), and
// the answers, which HTTP/1.1 returns in the order of the requests, are read back in that
// order. A node that handles a connection's requests in order (nearcore, net/http) thus
// receives the key's transactions in nonce order, while a stream of sends costs about one
// round trip rather than one per transaction.
//
// The order is the order in which calls acquire the connection's writer: a caller that needs
// nonce N+1 to follow nonce N starts the send of N+1 once the send of N reported its request
// written (the written callback of SendTx).
//
// It uses its Client's endpoints in the Client's order (those in cool-down last): it sticks
// to the endpoint it is connected to, and dials the next one when a dial fails. It does not
// try another endpoint for a request once written: that would break the order. It ignores
// the Client's http.Client, except for its Timeout and its *http.Transport's TLS settings
// and dialer (not its proxy).
//
// An OrderedSender is safe for concurrent use. Close releases its connection.
type OrderedSender struct {
	c       *Client
	timeout time.Duration // of a dial, a write, and an answer after its request was written
	idle    time.Duration // an idle connection is closed after this long

	mu     sync.Mutex // held while a request is built and written: the order of the requests
	conn   *orderedConn
	closed bool
}

// DefaultOrderedIdle is how long an OrderedSender keeps an idle connection open: less than
// the 5 s keep-alive of actix-web (nearcore's HTTP server), so that the sender, rather than
// the server, closes an idle connection, and a request is never written onto a connection the
// server is closing. (A server's close is seen as soon as it arrives, and the next call dials.)
const DefaultOrderedIdle = 4 * time.Second

// ErrSenderClosed is returned by the SendTx of a closed OrderedSender; nothing was sent.
var ErrSenderClosed = errors.New("near rpc: the ordered sender is closed")

// Ordered returns a new OrderedSender of c's endpoints: one per access key whose sends must
// keep their order.
func (c *Client) Ordered() *OrderedSender {
	timeout := c.http.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &OrderedSender{c: c, timeout: timeout, idle: DefaultOrderedIdle}
}

// SetIdleTimeout sets how long an idle connection is kept open (DefaultOrderedIdle unless
// set, or when d is not positive); it applies to the connections dialed after the call.
func (s *OrderedSender) SetIdleTimeout(d time.Duration) {
	if d <= 0 {
		d = DefaultOrderedIdle
	}
	s.mu.Lock()
	s.idle = d
	s.mu.Unlock()
}

// SendTx sends the borsh bytes of a signed transaction (`send_tx`, as Client.SendTx, with the
// same request and the same reading of the answer) behind every request an earlier SendTx
// call of s wrote, and waits for its answer.
//
// written, if not nil, is called exactly once, as soon as the request is written to the
// connection, or when the call fails before writing it: from then on, a later call's request
// goes behind this one's.
//
// A failure of the connection (a write or a read fails, the server closes it, an answer that
// is not HTTP, no answer within the Client's timeout) fails this call and every call whose
// request was written after it with an error for which IsOutcomeUnknown is true; the next call
// dials again. A call whose ctx ends before its answer returns an outcome-unknown error too,
// and its answer, when it comes, is discarded. As with Client, HTTP 408, 429 and 5xx answers
// and a node's TIMEOUT_ERROR leave the outcome unknown.
func (s *OrderedSender) SendTx(ctx context.Context, signedTx []byte, wait TxExecutionStatus, written func()) (*TxOutcome, error) {
	call, err := s.write(ctx, signedTx, wait)
	if written != nil {
		written()
	}
	if err != nil {
		return nil, err
	}
	var o TxOutcome
	if err := call.await(ctx, &o); err != nil {
		return nil, err
	}
	return &o, nil
}

// Close closes the connection and waits for its reader to end: calls waiting for an answer
// fail (outcome unknown), later calls fail with ErrSenderClosed.
func (s *OrderedSender) Close() error {
	s.mu.Lock()
	s.closed = true
	oc := s.conn
	s.conn = nil
	s.mu.Unlock()
	if oc != nil {
		oc.fail(errors.New("the ordered sender was closed"), false)
		<-oc.done
	}
	return nil
}

// write writes the request of a send_tx onto the connection, dialing one if needed, and
// returns the call that waits for its answer.
func (s *OrderedSender) write(ctx context.Context, signedTx []byte, wait TxExecutionStatus) (*orderedCall, error) {
	const method = "send_tx"
	params, err := sendTxParams(signedTx, wait)
	if err != nil {
		return nil, err
	}
	id, body, err := s.c.encodeRequest(method, params)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrSenderClosed
	}
	if err := ctx.Err(); err != nil {
		// Nothing was written; as Client, the error does not say so.
		return nil, fmt.Errorf("near rpc %s: %w", method, &TransportError{Endpoint: s.c.endpoints[0].name, Err: err, unknown: true})
	}
	call := &orderedCall{method: method, id: id, answer: make(chan orderedAnswer, 1)}
	// A connection found broken when the call joins its queue (it went idle, the server
	// closed it) is replaced once; a fresh one broken at once is a failure of the call.
	for attempt := 0; ; attempt++ {
		if s.conn == nil {
			oc, err := s.dial(ctx, method)
			if err != nil {
				return nil, err
			}
			s.conn = oc
		}
		call.ep = s.conn.ep
		req, err := newRPCRequest(s.conn.ep, body)
		if err != nil {
			return nil, fmt.Errorf("near rpc %s: %w", method, &TransportError{Endpoint: s.conn.ep.name, Err: fmt.Errorf("build request: %w", withoutURL(err))})
		}
		if s.conn.enqueue(call, s.timeout) {
			oc := s.conn
			if err := oc.writeRequest(req, s.timeout); err != nil {
				// The queue, this call included, fails: bytes may have left.
				oc.fail(fmt.Errorf("write request: %w", err), true)
				s.conn = nil
			}
			return call, nil
		}
		s.conn = nil
		if attempt > 0 {
			return nil, fmt.Errorf("near rpc %s: %w", method, &TransportError{Endpoint: call.ep.name, Err: errors.New("the connection closed at once"), unknown: true})
		}
	}
}

// newRPCRequest is the HTTP request of a JSON-RPC body to ep, as Client sends it.
func newRPCRequest(ep *endpoint, body []byte) (*http.Request, error) {
	req, err := http.NewRequest(http.MethodPost, ep.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if u := req.URL.User; u != nil {
		// What http.Client does with credentials in the URL.
		pw, _ := u.Password()
		req.SetBasicAuth(u.Username(), pw)
	}
	return req, nil
}

// dial connects to the first endpoint, in the Client's order, that accepts a connection.
// s.mu is held.
func (s *OrderedSender) dial(ctx context.Context, method string) (*orderedConn, error) {
	var failures []error
	for _, ep := range s.c.order() {
		nc, err := s.dialOne(ctx, ep)
		if err == nil {
			return newOrderedConn(s.c, ep, nc, s.idle), nil
		}
		// As Client does: whether a request could have gone out is not looked into.
		failures = append(failures, &TransportError{Endpoint: ep.name, Err: fmt.Errorf("dial: %w", withoutURL(err)), unknown: true})
		if ctx.Err() != nil {
			break
		}
		ep.setDownUntil(s.c.now().Add(s.c.cooldown))
	}
	return nil, fmt.Errorf("near rpc %s: no endpoint answered: %w", method, errors.Join(failures...))
}

func (s *OrderedSender) dialOne(ctx context.Context, ep *endpoint) (net.Conn, error) {
	u, err := url.Parse(ep.url)
	if err != nil {
		return nil, err
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	addr := net.JoinHostPort(host, port)
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	dial := (&net.Dialer{Timeout: s.timeout, KeepAlive: 30 * time.Second}).DialContext
	var tlsConf *tls.Config
	if t, ok := s.c.http.Transport.(*http.Transport); ok {
		if t.DialContext != nil {
			dial = t.DialContext
		}
		if t.TLSClientConfig != nil {
			tlsConf = t.TLSClientConfig.Clone()
		}
	}
	nc, err := dial(ctx, "tcp", addr)
	if err != nil || u.Scheme != "https" {
		return nc, err
	}
	if tlsConf == nil {
		tlsConf = &tls.Config{}
	}
	if tlsConf.ServerName == "" {
		tlsConf.ServerName = host
	}
	tlsConf.NextProtos = []string{"http/1.1"} // pipelining is HTTP/1.1's
	tc := tls.Client(nc, tlsConf)
	if err := tc.HandshakeContext(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return tc, nil
}

// orderedCall is one request written on a connection, waiting for its answer.
type orderedCall struct {
	method, id string
	ep         *endpoint
	deadline   time.Time          // the answer must have come by then
	answer     chan orderedAnswer // buffered: the reader never waits for a caller that left
}

type orderedAnswer struct {
	status int
	data   []byte
	err    error // a *TransportError: no answer
}

// await waits for the answer and decodes it into out as Client does.
func (c *orderedCall) await(ctx context.Context, out any) error {
	select {
	case a := <-c.answer:
		if a.err != nil {
			return fmt.Errorf("near rpc %s: %w", c.method, a.err)
		}
		err := decodeAnswer(c.ep, c.method, c.id, a.status, a.data, out)
		var te *TransportError
		if !errors.As(err, &te) {
			c.ep.setDownUntil(time.Time{}) // a JSON-RPC answer: the endpoint works
			return err
		}
		return fmt.Errorf("near rpc %s: %w", c.method, err)
	case <-ctx.Done():
		// The request is on its way: its answer will be read (and dropped) in its turn.
		return fmt.Errorf("near rpc %s: %w", c.method, &TransportError{Endpoint: c.ep.name,
			Err: fmt.Errorf("no answer before the call ended: %w", ctx.Err()), unknown: true})
	}
}

// orderedConn is one connection and the calls whose requests it carries, in order.
type orderedConn struct {
	c    *Client
	ep   *endpoint
	nc   net.Conn
	bw   *bufio.Writer // used under OrderedSender.mu only
	br   *bufio.Reader // used by the reader only
	idle time.Duration
	done chan struct{} // closed when the reader ended

	mu     sync.Mutex
	queue  []*orderedCall // written (or being written), not answered, in order
	broken bool
	idleAt time.Time // with an empty queue, when the connection is closed as idle
}

func newOrderedConn(c *Client, ep *endpoint, nc net.Conn, idle time.Duration) *orderedConn {
	oc := &orderedConn{c: c, ep: ep, nc: nc, bw: bufio.NewWriter(nc), br: bufio.NewReader(nc), idle: idle,
		done: make(chan struct{}), idleAt: time.Now().Add(idle)}
	oc.nc.SetReadDeadline(oc.idleAt)
	go oc.read()
	return oc
}

// enqueue adds call to the queue, unless the connection is broken.
func (oc *orderedConn) enqueue(call *orderedCall, timeout time.Duration) bool {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	if oc.broken {
		return false
	}
	call.deadline = time.Now().Add(timeout)
	oc.queue = append(oc.queue, call)
	if len(oc.queue) == 1 {
		oc.nc.SetReadDeadline(call.deadline)
	}
	return true
}

// writeRequest writes req and flushes it. OrderedSender.mu is held.
func (oc *orderedConn) writeRequest(req *http.Request, timeout time.Duration) error {
	oc.nc.SetWriteDeadline(time.Now().Add(timeout))
	if err := req.Write(oc.bw); err != nil {
		return err
	}
	return oc.bw.Flush()
}

// fail breaks the connection: it closes it and fails every call in the queue with err. fault
// marks the endpoint down, as Client does after a failure to get an answer.
func (oc *orderedConn) fail(err error, fault bool) {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	oc.failLocked(err, fault)
}

func (oc *orderedConn) failLocked(err error, fault bool) {
	if oc.broken {
		return
	}
	oc.broken = true
	oc.nc.Close()
	for _, c := range oc.queue {
		c.answer <- orderedAnswer{err: &TransportError{Endpoint: oc.ep.name, Err: err, unknown: true}}
	}
	if fault && len(oc.queue) > 0 {
		oc.ep.setDownUntil(oc.c.now().Add(oc.c.cooldown))
	}
	oc.queue = nil
}

// read reads the answers in order and hands each to the call at the head of the queue, until
// the connection breaks or stays idle too long.
func (oc *orderedConn) read() {
	defer close(oc.done)
	for {
		_, err := oc.br.Peek(1)
		oc.mu.Lock()
		if oc.broken {
			oc.mu.Unlock()
			return
		}
		if err != nil {
			if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
				// A deadline passed: the idle one, an answer's, or one since moved on.
				now := time.Now()
				if len(oc.queue) == 0 && !now.Before(oc.idleAt) {
					oc.failLocked(errors.New("idle"), false)
					oc.mu.Unlock()
					return
				}
				if len(oc.queue) > 0 && !now.Before(oc.queue[0].deadline) {
					oc.failLocked(errors.New("no answer in time"), true)
					oc.mu.Unlock()
					return
				}
				oc.setDeadlineLocked()
				oc.mu.Unlock()
				continue
			}
			// With nothing asked, the server closed an idle connection: no fault.
			oc.failLocked(fmt.Errorf("connection lost before the answer: %w", err), len(oc.queue) > 0)
			oc.mu.Unlock()
			return
		}
		if len(oc.queue) == 0 {
			oc.failLocked(errors.New("bytes came with no request waiting"), true)
			oc.mu.Unlock()
			return
		}
		oc.mu.Unlock()

		status, data, closing, err := oc.readAnswer()
		oc.mu.Lock()
		if oc.broken {
			oc.mu.Unlock()
			return
		}
		if err != nil {
			oc.failLocked(err, true)
			oc.mu.Unlock()
			return
		}
		head := oc.queue[0]
		oc.queue[0] = nil
		oc.queue = oc.queue[1:]
		head.answer <- orderedAnswer{status: status, data: data}
		if closing {
			oc.failLocked(errors.New("the server closed the connection before the answer"), false)
			oc.mu.Unlock()
			return
		}
		oc.idleAt = time.Now().Add(oc.idle)
		oc.setDeadlineLocked()
		oc.mu.Unlock()
	}
}

// setDeadlineLocked sets the read deadline: the answer at the head's, or the idle one.
func (oc *orderedConn) setDeadlineLocked() {
	if len(oc.queue) > 0 {
		oc.nc.SetReadDeadline(oc.queue[0].deadline)
	} else {
		oc.nc.SetReadDeadline(oc.idleAt)
	}
}

// readAnswer reads one HTTP response (skipping informational ones) and its whole body.
// closing reports that the server closes the connection after it.
func (oc *orderedConn) readAnswer() (status int, data []byte, closing bool, err error) {
	for {
		resp, err := http.ReadResponse(oc.br, nil)
		if err != nil {
			return 0, nil, false, fmt.Errorf("read answer: %w", err)
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			resp.Body.Close()
			continue
		}
		data, err = io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
		resp.Body.Close()
		if err != nil {
			return 0, nil, false, fmt.Errorf("read answer: %w", err)
		}
		if len(data) > maxResponse {
			return 0, nil, false, fmt.Errorf("answer exceeds %d bytes", maxResponse)
		}
		return resp.StatusCode, data, resp.Close, nil
	}
}
