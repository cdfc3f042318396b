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
	"sync/atomic"
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
// The order survives a broken connection: the requests written on it and not answered are
// written again, identical and in their order, on the next connection, before any request of
// a later call (send_tx of the same signed bytes is idempotent, so a request the node did
// handle before the connection broke may be written again). Without that, the requests
// behind a lost one would fail, and the next call's request, on a new connection, would reach
// the node before them: a larger nonce landing first makes every smaller one InvalidNonce. The
// request at the head of a connection when it breaks is written again at most MaxReplays
// times (it may be one the node cannot handle); the calls behind it are not charged for it.
//
// It uses its Client's endpoints in the Client's order (those in cool-down last): it sticks
// to the endpoint it is connected to, and dials the next one when a dial fails or the
// connection broke on a fault. It ignores the Client's http.Client, except for its Timeout and
// its *http.Transport's TLS settings and dialer (not its proxy).
//
// An OrderedSender is safe for concurrent use. Close releases its connection.
type OrderedSender struct {
	c       *Client
	timeout time.Duration // of a dial, a write, and an answer after its request was written
	idle    time.Duration // an idle connection is closed after this long

	mu     sync.Mutex // held while a request is built and written: the order of the requests
	conn   *orderedConn
	closed atomic.Bool // set under mu; read by a connection that breaks

	// lost holds the calls of broken connections that wait to be written again, in order:
	// they go before any other request (see replayLocked). Guarded by lostMu, which is taken
	// under mu or under an orderedConn's mu, and never waits for either.
	lostMu   sync.Mutex
	lost     []*orderedCall
	replayer bool // a goroutine is about to replay lost
}

// MaxReplays is how many times the request at the head of a connection that broke is written
// again on a new connection before its call fails as outcome unknown.
const MaxReplays = 3

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
// is not HTTP, no answer within the Client's timeout) has the requests not answered written
// again on a new connection (see OrderedSender); a call fails with an error for which
// IsOutcomeUnknown is true when its request was at the head of MaxReplays+1 broken
// connections, when no endpoint can be dialed for its replay, or when s is closed. A call
// whose ctx ends before its answer returns an outcome-unknown error too, and its request
// keeps its place (it is still written again if its connection breaks). As with Client, HTTP
// 408, 429 and 5xx answers and a node's TIMEOUT_ERROR leave the outcome unknown.
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
	s.closed.Store(true)
	oc := s.conn
	s.conn = nil
	s.mu.Unlock()
	if oc != nil {
		oc.fail(errClosed, false)
		<-oc.done
	}
	s.lostMu.Lock()
	lost := s.lost
	s.lost = nil
	s.lostMu.Unlock()
	answerAll(lost, s.c.endpoints[0], errClosed)
	return nil
}

var errClosed = errors.New("the ordered sender was closed")

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
	if s.closed.Load() {
		return nil, ErrSenderClosed
	}
	if err := ctx.Err(); err != nil {
		// Nothing was written; as Client, the error does not say so.
		return nil, fmt.Errorf("near rpc %s: %w", method, &TransportError{Endpoint: s.c.endpoints[0].name, Err: err, unknown: true})
	}
	call := &orderedCall{client: s.c, start: time.Now(), method: method, id: id, body: body, answer: make(chan orderedAnswer, 1)}
	// A connection found broken when the call joins its queue (it went idle, the server
	// closed it) is replaced once; a fresh one broken at once is a failure of the call.
	for attempt := 0; ; attempt++ {
		s.replayLocked()
		if s.conn == nil {
			oc, err := s.dial(ctx, method)
			if err != nil {
				return nil, err
			}
			s.conn = oc
		}
		call.firstEp = s.conn.ep
		if s.writeLocked(call) {
			return call, nil
		}
		if attempt > 0 {
			return nil, fmt.Errorf("near rpc %s: %w", method, &TransportError{Endpoint: call.firstEp.name, Err: errors.New("the connection closed at once"), unknown: true})
		}
	}
}

// writeLocked puts call on the current connection and writes its request: it reports false
// when the connection no longer takes requests. Once call joined, it is answered whatever
// happens: a write that fails stops the connection's writes (see stopWrites), and its
// unanswered calls, this one included, wait for their replay. s.mu is held.
func (s *OrderedSender) writeLocked(call *orderedCall) bool {
	oc := s.conn
	if !oc.enqueue(call, s.timeout) {
		return false
	}
	req, err := newRPCRequest(oc.ep, call.body)
	if err == nil {
		err = oc.writeRequest(req, s.timeout)
	}
	if err != nil {
		oc.stopWrites()
	}
	return true
}

// retireLocked drops the current connection once it takes no more requests, after its reader
// ended: its unanswered calls are then among the lost ones, ahead of anything written later.
// s.mu is held.
func (s *OrderedSender) retireLocked() {
	if s.conn != nil && !s.conn.writable() {
		<-s.conn.done
		s.conn = nil
	}
}

// replayLocked writes the lost calls again, in their order, on a new connection, until none
// is left: a connection that breaks meanwhile puts its calls back at the front, followed by
// those not yet written. When no endpoint can be dialed, or new connections end before taking
// a request twice in a row, the lost calls fail. s.mu is held.
func (s *OrderedSender) replayLocked() {
	closedAtOnce := 0
	for {
		s.retireLocked()
		s.lostMu.Lock()
		lost := s.lost
		s.lost = nil
		s.lostMu.Unlock()
		if len(lost) == 0 {
			return
		}
		if s.closed.Load() {
			answerAll(lost, s.c.endpoints[0], errClosed)
			return
		}
		fresh := s.conn == nil
		if fresh {
			oc, err := s.dial(context.Background(), lost[0].method)
			if err != nil {
				answerAll(lost, s.c.endpoints[0], err)
				continue
			}
			s.conn = oc
		}
		for i, call := range lost {
			oc := s.conn
			joined := s.writeLocked(call)
			if joined && oc.writable() {
				continue
			}
			if !joined && i == 0 && fresh {
				// The endpoint accepts connections and closes them: try another, and give up
				// on the second such connection rather than dial for ever.
				oc.ep.setDownUntil(s.c.now().Add(s.c.cooldown))
				if closedAtOnce++; closedAtOnce > 1 {
					s.retireLocked()
					answerAll(lost, oc.ep, errors.New("new connections closed before taking a request"))
					break
				}
			}
			// Broken: its calls are lost again; those not on it yet follow them.
			rest := lost[i:]
			if joined {
				rest = lost[i+1:]
			}
			s.retireLocked()
			s.lostMu.Lock()
			s.lost = append(s.lost, rest...)
			s.lostMu.Unlock()
			break
		}
	}
}

// loseCalls takes the unanswered calls of a broken connection, in order, for their replay, and
// starts a replay unless one is about to run or a call under way will do it first.
func (s *OrderedSender) loseCalls(calls []*orderedCall) {
	s.lostMu.Lock()
	s.lost = append(s.lost, calls...)
	start := !s.replayer
	s.replayer = true
	s.lostMu.Unlock()
	if start {
		go func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.lostMu.Lock()
			s.replayer = false
			s.lostMu.Unlock()
			s.replayLocked()
		}()
	}
}

// answerAll fails calls with err (outcome unknown).
func answerAll(calls []*orderedCall, ep *endpoint, err error) {
	for _, c := range calls {
		c.answer <- orderedAnswer{ep: ep, err: &TransportError{Endpoint: ep.name, Err: err, unknown: true}}
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
			return newOrderedConn(s, ep, nc, s.idle), nil
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
	client     *Client
	start      time.Time
	method, id string
	body       []byte
	firstEp    *endpoint          // where the request was first written
	answer     chan orderedAnswer // buffered, one answer: the reader never waits for a caller that left

	// Guarded by the mu of the connection the call is on.
	deadline time.Time // the answer must have come by then
	replays  int       // connections that broke with this call at their head
}

type orderedAnswer struct {
	ep     *endpoint // that answered, or failed to
	status int
	data   []byte
	err    error // a *TransportError: no answer
}

// await waits for the answer and decodes it into out as Client does, and reports it to the
// Client's observer.
func (c *orderedCall) await(ctx context.Context, out any) (err error) {
	select {
	case a := <-c.answer:
		defer func() { c.client.observed(c.method, a.ep, c.start, err) }()
		if a.err != nil {
			return fmt.Errorf("near rpc %s: %w", c.method, a.err)
		}
		err := decodeAnswer(a.ep, c.method, c.id, a.status, a.data, out)
		var te *TransportError
		if !errors.As(err, &te) {
			a.ep.setDownUntil(time.Time{}) // a JSON-RPC answer: the endpoint works
			return err
		}
		return fmt.Errorf("near rpc %s: %w", c.method, err)
	case <-ctx.Done():
		// The request is on its way: its answer will be read (and dropped) in its turn.
		return fmt.Errorf("near rpc %s: %w", c.method, &TransportError{Endpoint: c.firstEp.name,
			Err: fmt.Errorf("no answer before the call ended: %w", ctx.Err()), unknown: true})
	}
}

// orderedConn is one connection and the calls whose requests it carries, in order.
type orderedConn struct {
	s    *OrderedSender
	c    *Client
	ep   *endpoint
	nc   net.Conn
	bw   *bufio.Writer // used under OrderedSender.mu only
	br   *bufio.Reader // used by the reader only
	idle time.Duration
	done chan struct{} // closed when the reader ended

	mu       sync.Mutex
	queue    []*orderedCall // written (or being written), not answered, in order
	broken   bool
	draining bool      // a write failed: no more requests; the answers already sent are read
	idleAt   time.Time // with an empty queue, when the connection is closed as idle
}

func newOrderedConn(s *OrderedSender, ep *endpoint, nc net.Conn, idle time.Duration) *orderedConn {
	oc := &orderedConn{s: s, c: s.c, ep: ep, nc: nc, bw: bufio.NewWriter(nc), br: bufio.NewReader(nc), idle: idle,
		done: make(chan struct{}), idleAt: time.Now().Add(idle)}
	oc.nc.SetReadDeadline(oc.idleAt)
	go oc.read()
	return oc
}

// enqueue adds call to the queue, unless the connection takes no more requests.
func (oc *orderedConn) enqueue(call *orderedCall, timeout time.Duration) bool {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	if oc.broken || oc.draining {
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

// writable reports whether the connection takes requests.
func (oc *orderedConn) writable() bool {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	return !oc.broken && !oc.draining
}

// stopWrites ends the connection after a failed write: it takes no more requests, but the
// reader still reads the answers the node sent (a write fails when the node reset the
// connection, whose earlier answers may wait unread) for up to drainTime, and then fails it.
func (oc *orderedConn) stopWrites() {
	oc.mu.Lock()
	defer oc.mu.Unlock()
	if oc.broken || oc.draining {
		return
	}
	oc.draining = true
	if cw, ok := oc.nc.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite() // a live node sees the end of the requests and closes after answering
	}
	oc.nc.SetReadDeadline(time.Now().Add(drainTime))
}

// drainTime bounds the reading of a connection whose write failed.
const drainTime = time.Second

// fail breaks the connection: it closes it and hands its calls to the sender for their replay
// (see OrderedSender), except the head's after MaxReplays and every call once the sender is
// closed, which fail with err. fault marks the endpoint down, as Client does after a failure
// to get an answer, so that the replay goes to another endpoint first.
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
	queue := oc.queue
	oc.queue = nil
	if len(queue) == 0 {
		return
	}
	if fault {
		oc.ep.setDownUntil(oc.c.now().Add(oc.c.cooldown))
	}
	if oc.s.closed.Load() {
		answerAll(queue, oc.ep, err)
		return
	}
	if head := queue[0]; head.replays >= MaxReplays {
		answerAll(queue[:1], oc.ep, fmt.Errorf("%w (the request was written %d times)", err, head.replays+1))
		queue = queue[1:]
	} else {
		head.replays++
	}
	if len(queue) > 0 {
		oc.s.loseCalls(queue)
	}
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
				if oc.draining {
					oc.failLocked(errors.New("a write failed, and the answers stopped"), true)
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
		head.answer <- orderedAnswer{ep: oc.ep, status: status, data: data}
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

// setDeadlineLocked sets the read deadline: the answer at the head's, or the idle one (or
// leaves the drain's).
func (oc *orderedConn) setDeadlineLocked() {
	if oc.draining {
		return
	}
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
