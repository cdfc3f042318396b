// Package httpconn is a lean HTTP/1.1 client transport for the benchmark load generator: an
// http.RoundTripper that keeps persistent connections per host:port and does each exchange on
// the calling goroutine (write the request in one write, read the whole response), without
// the per-connection read and write goroutines and hand-offs of net/http's Transport. It
// exists so that the load generator, which shares the CPU with the servers it measures,
// costs as little as the RESP client it uses for Redis (package resp).
//
// Supported: plain http:// URLs, any method, request bodies (read fully and sent with a
// Content-Length), responses framed by Content-Length, chunked transfer coding (trailers are
// read and dropped) or the connection's end; interim 1xx responses are skipped; HEAD, 204 and
// 304 responses have no body; the request's context bounds the exchange.
//
// Not supported: TLS (https), proxies, HTTP/2, protocol upgrades (101), CONNECT, sending
// "Expect: 100-continue" (the body is always sent with the header), chunked request bodies,
// request trailers and compression (no Accept-Encoding is added; bodies are returned as
// received). Response bodies are read into memory before RoundTrip returns, up to 16 MiB.
package httpconn

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/textproto"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// MaxBody is the largest request or response body the transport handles.
	MaxBody = 16 << 20
	// maxHeader bounds the bytes read for the head (status line and header fields) of a
	// response.
	maxHeader = 1 << 20
	// bufSize is the size of each connection's read and write buffers.
	bufSize = 4 << 10
)

// ErrTooLarge is returned for a body over MaxBody or a response head over 1 MiB.
var ErrTooLarge = errors.New("httpconn: message too large")

// Transport is an http.RoundTripper over pooled HTTP/1.1 connections (see the package
// comment for what it supports). The zero value is ready to use. It is safe for concurrent
// use; its fields must not change once it is in use.
//
// A connection serves one exchange at a time. RoundTrip takes the most recently used idle
// connection to the request's host:port, or dials one, and puts it back once the response
// has been read in full, unless the exchange failed, was cut short by the request's context,
// or either side asked to close it (Connection: close, or a response framed by the
// connection's end). Before an idle connection is reused it is checked, on Linux, with a
// non-blocking peek: one the server has closed meanwhile is dropped (net/http's Transport
// notices this with the read goroutine it keeps on every idle connection).
//
// Retries follow net/http's Transport (shouldRetryRequest in net/http/transport.go): a
// request that failed on a reused connection is sent again, once, on a newly dialled one
// if (a) no byte of it had been written and its body is empty or has GetBody, or (b) it was
// written, no byte of the response arrived, and it is replayable: GET, HEAD, OPTIONS or
// TRACE, or with an Idempotency-Key or X-Idempotency-Key header, and with no body or with
// GetBody. So a POST that was written is never resent. In addition (narrower than net/http)
// only an io.EOF, ECONNRESET or EPIPE is retried, and never once the context is done.
type Transport struct {
	// MaxIdlePerHost is how many idle connections are kept per host:port; 0 means 2 (as
	// net/http's default), negative keeps none.
	MaxIdlePerHost int
	// DialTimeout bounds connecting; 0 means 5 s.
	DialTimeout time.Duration
	// IdleTimeout, when positive, is how long a connection may stay idle and still be
	// reused.
	IdleTimeout time.Duration

	mu   sync.Mutex
	idle map[string][]*conn // per host:port, most recently used last
}

var _ http.RoundTripper = (*Transport)(nil)

// RoundTrip sends req and returns its response, whose Body holds the whole response body in
// memory. It always closes req.Body. Errors wrap the underlying network error, and the
// context's error when the request's context ended the exchange.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	bodyBuf, err := readRequestBody(req)
	if err != nil {
		return nil, err
	}
	defer putBuf(bodyBuf)
	u := req.URL
	if u == nil || u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("httpconn: unsupported URL %v (only http://host[:port]/...)", u)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c, err := t.get(ctx, addr)
	if err != nil {
		return nil, err
	}
	resp, retry, err := t.exchange(ctx, c, req, bodyBuf.Bytes())
	if err != nil && retry && c.reused && ctx.Err() == nil {
		if c, err = t.dial(ctx, addr); err != nil {
			return nil, err
		}
		resp, _, err = t.exchange(ctx, c, req, bodyBuf.Bytes())
	}
	return resp, err
}

// CloseIdleConnections closes every idle connection. Connections in use are unaffected.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, cs := range idle {
		for _, c := range cs {
			c.nc.Close()
		}
	}
}

// get returns an idle connection to addr that still looks usable, or a new one.
func (t *Transport) get(ctx context.Context, addr string) (*conn, error) {
	for {
		t.mu.Lock()
		cs := t.idle[addr]
		if len(cs) == 0 {
			t.mu.Unlock()
			return t.dial(ctx, addr)
		}
		c := cs[len(cs)-1]
		cs[len(cs)-1] = nil
		t.idle[addr] = cs[:len(cs)-1]
		t.mu.Unlock()
		if (t.IdleTimeout > 0 && time.Since(c.idleAt) > t.IdleTimeout) || !c.alive() {
			c.nc.Close()
			continue
		}
		c.reused = true
		return c, nil
	}
}

// put returns c to the idle pool, or closes it when the pool is full. Idle connections over
// IdleTimeout are closed on the way.
func (t *Transport) put(c *conn) {
	max := t.MaxIdlePerHost
	if max == 0 {
		max = 2
	}
	var stale []*conn
	c.idleAt = time.Now()
	t.mu.Lock()
	cs := t.idle[c.addr]
	for t.IdleTimeout > 0 && len(cs) > 0 && c.idleAt.Sub(cs[0].idleAt) > t.IdleTimeout {
		stale = append(stale, cs[0])
		cs = cs[1:]
	}
	if len(cs) < max {
		if t.idle == nil {
			t.idle = make(map[string][]*conn)
		}
		t.idle[c.addr] = append(cs, c)
		c = nil
	} else {
		t.idle[c.addr] = cs
	}
	t.mu.Unlock()
	if c != nil {
		c.nc.Close()
	}
	for _, s := range stale {
		s.nc.Close()
	}
}

// dial connects to addr.
func (t *Transport) dial(ctx context.Context, addr string) (*conn, error) {
	timeout := t.DialTimeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	nc, err := (&net.Dialer{Timeout: timeout}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &conn{nc: nc, addr: addr}
	c.r.nc, c.w.nc = nc, nc
	c.br = bufio.NewReaderSize(&c.r, bufSize)
	c.bw = bufio.NewWriterSize(&c.w, bufSize)
	c.tp.R = c.br
	if sc, ok := nc.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			c.rc, c.peekFn = rc, c.peek
		}
	}
	return c, nil
}

// exchange does one request-response exchange on c under ctx, then pools or closes c.
// retry reports whether a failed request may be resent on a new connection, if c was
// reused (see Transport).
func (t *Transport) exchange(ctx context.Context, c *conn, req *http.Request, body []byte) (resp *http.Response, retry bool, err error) {
	deadline, hasDeadline := ctx.Deadline()
	if hasDeadline {
		if err := c.nc.SetDeadline(deadline); err != nil {
			c.nc.Close()
			return nil, false, err
		}
	}
	var stop func() bool
	if ctx.Done() != nil {
		// Cancellation (with or without a deadline) expires the deadline, which unblocks
		// the read or write in progress.
		stop = context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(time.Unix(1, 0)) })
	}
	resp, reusable, retry, err := c.roundTrip(req, body)
	if stop != nil && !stop() {
		reusable = false // the deadline was expired under us
	}
	if err != nil {
		c.nc.Close()
		if errors.Is(err, os.ErrDeadlineExceeded) && ctx.Done() != nil {
			// Only the context sets deadlines: the conn's may expire a moment before the
			// context's timer fires.
			<-ctx.Done()
		}
		if cerr := ctx.Err(); cerr != nil {
			return nil, false, fmt.Errorf("httpconn: %w (%w)", cerr, err)
		}
		return nil, retry, err
	}
	if reusable && hasDeadline && c.nc.SetDeadline(time.Time{}) != nil {
		reusable = false
	}
	if reusable && t.MaxIdlePerHost >= 0 {
		t.put(c)
	} else {
		c.nc.Close()
	}
	return resp, false, nil
}

// conn is one client connection.
type conn struct {
	nc     net.Conn
	addr   string // host:port, the pool key
	r      budgetReader
	w      countingWriter
	br     *bufio.Reader
	bw     *bufio.Writer
	tp     textproto.Reader
	reused bool      // taken from the pool
	idleAt time.Time // when it was last pooled

	rc     syscall.RawConn // for alive; nil when nc has none
	peekFn func(fd uintptr) bool
	peeked error // the result of peekFn
}

// roundTrip writes req with body and reads the response. reusable reports whether c may
// serve another exchange; retry is as for exchange.
func (c *conn) roundTrip(req *http.Request, body []byte) (resp *http.Response, reusable, retry bool, err error) {
	written := c.w.n
	if err := c.writeRequest(req, body); err != nil {
		nothingWritten := c.w.n == written
		return nil, false, nothingWritten && rewindable(req) && isConnDrop(err), err
	}
	c.r.left = maxHeader
	if _, err := c.br.Peek(1); err != nil {
		return nil, false, replayable(req) && isConnDrop(err), fmt.Errorf("httpconn: reading response: %w", err)
	}
	resp, reusable, err = c.readResponse(req)
	if err != nil {
		return nil, false, false, fmt.Errorf("httpconn: reading response: %w", err)
	}
	return resp, reusable && !req.Close && !hasToken(req.Header["Connection"], "close"), false, nil
}

// writeRequest writes req's head and body with one flush.
func (c *conn) writeRequest(req *http.Request, body []byte) error {
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	uri := req.URL.RequestURI()
	if !validKey(method) || !validValue(uri) || !validValue(host) {
		return errors.New("httpconn: invalid request line or host")
	}
	bw := c.bw
	bw.WriteString(method)
	bw.WriteByte(' ')
	bw.WriteString(uri)
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(host)
	bw.WriteString("\r\n")
	if len(body) > 0 || method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
		bw.WriteString("Content-Length: ")
		bw.Write(strconv.AppendInt(bw.AvailableBuffer(), int64(len(body)), 10))
		bw.WriteString("\r\n")
	}
	if req.Close {
		bw.WriteString("Connection: close\r\n")
	}
	for k, vs := range req.Header {
		switch k {
		case "Host", "Content-Length", "Transfer-Encoding":
			continue // ours to write
		}
		if !validKey(k) {
			return fmt.Errorf("httpconn: invalid header field name %q", k)
		}
		for _, v := range vs {
			if !validValue(v) {
				return fmt.Errorf("httpconn: invalid value for header %s", k)
			}
			bw.WriteString(k)
			bw.WriteString(": ")
			bw.WriteString(v)
			bw.WriteString("\r\n")
		}
	}
	bw.WriteString("\r\n")
	bw.Write(body)
	return bw.Flush() // an earlier write error is returned here too
}

// readResponse reads one final response (skipping 1xx ones) and its whole body.
func (c *conn) readResponse(req *http.Request) (*http.Response, bool, error) {
	resp := &http.Response{Request: req}
	for {
		line, err := readLine(c.br)
		if err != nil {
			return nil, false, err
		}
		proto, status, ok := bytes.Cut(line, []byte{' '})
		major, minor, okProto := http.ParseHTTPVersion(string(proto))
		if !ok || !okProto || major != 1 || len(status) < 3 || (len(status) > 3 && status[3] != ' ') {
			return nil, false, fmt.Errorf("malformed status line %q", line)
		}
		code := 0
		for _, d := range status[:3] {
			if d < '0' || d > '9' {
				return nil, false, fmt.Errorf("malformed status line %q", line)
			}
			code = code*10 + int(d-'0')
		}
		hdr, err := c.tp.ReadMIMEHeader()
		if err != nil {
			return nil, false, err
		}
		if code == http.StatusSwitchingProtocols {
			return nil, false, errors.New("protocol upgrades are not supported")
		}
		if code >= 100 && code < 200 {
			c.r.left = maxHeader
			continue // interim response
		}
		resp.Status, resp.StatusCode = string(status), code
		resp.Proto, resp.ProtoMajor, resp.ProtoMinor = string(proto), major, minor
		resp.Header = http.Header(hdr)
		break
	}
	c.r.left = math.MaxInt64 // the body is bounded below
	h := resp.Header
	reusable := !hasToken(h["Connection"], "close") &&
		(resp.ProtoMinor >= 1 || hasToken(h["Connection"], "keep-alive"))
	length, err := contentLength(h["Content-Length"])
	if err != nil {
		return nil, false, err
	}
	resp.ContentLength = length
	var body []byte
	switch {
	case req.Method == http.MethodHead || resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified:
		if req.Method != http.MethodHead {
			resp.ContentLength = 0
		}
	case len(h["Transfer-Encoding"]) > 0:
		if len(h["Transfer-Encoding"]) != 1 || !strings.EqualFold(h["Transfer-Encoding"][0], "chunked") {
			return nil, false, fmt.Errorf("unsupported Transfer-Encoding %q", h["Transfer-Encoding"])
		}
		if body, err = readChunked(c.br); err != nil {
			return nil, false, err
		}
		resp.TransferEncoding, resp.ContentLength = []string{"chunked"}, -1
		h.Del("Content-Length") // overridden by the chunked coding, as net/http does
	case length >= 0:
		if length > MaxBody {
			return nil, false, ErrTooLarge
		}
		body = make([]byte, length)
		if _, err := io.ReadFull(c.br, body); err != nil {
			return nil, false, err
		}
	default: // delimited by the end of the connection
		reusable = false
		if body, err = io.ReadAll(io.LimitReader(c.br, MaxBody+1)); err != nil {
			return nil, false, err
		}
		if len(body) > MaxBody {
			return nil, false, ErrTooLarge
		}
	}
	resp.Close = !reusable
	if len(body) == 0 {
		resp.Body = http.NoBody
	} else {
		mb := new(memBody)
		mb.Reset(body)
		resp.Body = mb
	}
	// Bytes beyond the response mean the framing is off: do not reuse the connection.
	return resp, reusable && c.br.Buffered() == 0, nil
}

// readLine reads one line without its CRLF (or LF). It must fit in the read buffer.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		return nil, errors.New("line too long")
	}
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// readChunked reads a chunked body up to and including its trailer section, which is
// dropped.
func readChunked(br *bufio.Reader) ([]byte, error) {
	var body []byte
	for {
		line, err := readLine(br)
		if err != nil {
			return nil, err
		}
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i] // a chunk extension
		}
		line = bytes.TrimRight(line, " \t")
		if len(line) == 0 {
			return nil, errors.New("malformed chunk size")
		}
		size := 0
		for _, d := range line {
			v, ok := unhex(d)
			if !ok {
				return nil, fmt.Errorf("malformed chunk size %q", line)
			}
			if size = size<<4 | v; size > MaxBody {
				return nil, ErrTooLarge
			}
		}
		if size == 0 {
			break
		}
		if len(body)+size > MaxBody {
			return nil, ErrTooLarge
		}
		n := len(body)
		body = append(body, make([]byte, size)...)
		if _, err := io.ReadFull(br, body[n:]); err != nil {
			return nil, err
		}
		if crlf, err := readLine(br); err != nil || len(crlf) != 0 {
			return nil, errors.New("malformed chunked encoding")
		}
	}
	for i := 0; ; i++ { // trailer fields, up to an empty line
		line, err := readLine(br)
		if err != nil {
			return nil, err
		}
		if len(line) == 0 {
			return body, nil
		}
		if i == 100 {
			return nil, errors.New("too many trailer fields")
		}
	}
}

func unhex(d byte) (int, bool) {
	switch {
	case d >= '0' && d <= '9':
		return int(d - '0'), true
	case d >= 'a' && d <= 'f':
		return int(d-'a') + 10, true
	case d >= 'A' && d <= 'F':
		return int(d-'A') + 10, true
	}
	return 0, false
}

// contentLength parses Content-Length values: -1 when there are none; several must agree.
func contentLength(vs []string) (int64, error) {
	if len(vs) == 0 {
		return -1, nil
	}
	for _, v := range vs[1:] {
		if v != vs[0] {
			return 0, fmt.Errorf("conflicting Content-Length values %q", vs)
		}
	}
	n, err := strconv.ParseUint(vs[0], 10, 63)
	if err != nil {
		return 0, fmt.Errorf("bad Content-Length %q", vs[0])
	}
	return int64(n), nil
}

// memBody is a response body held in memory.
type memBody struct{ bytes.Reader }

func (*memBody) Close() error { return nil }

// hasToken reports whether the comma-separated header values vs hold token (case
// insensitively).
func hasToken(vs []string, token string) bool {
	for _, v := range vs {
		for item := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.Trim(item, " \t"), token) {
				return true
			}
		}
	}
	return false
}

// validKey reports whether k is a token (RFC 9110), as a method or field name must be.
func validKey(k string) bool {
	for i := 0; i < len(k); i++ {
		if c := k[i]; c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return k != ""
}

// validValue reports whether v can be written in a header line: no CR, LF or NUL.
func validValue(v string) bool { return !strings.ContainsAny(v, "\r\n\x00") }

// rewindable is net/http's condition for resending a request none of which was written:
// no body, or a body that GetBody can produce again. (This transport holds a copy of the
// body anyway; the condition is kept to match net/http.)
func rewindable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// replayable is net/http's Request.isReplayable: a request that may be resent after it was
// written, because resending it is safe.
func replayable(req *http.Request) bool {
	if !rewindable(req) {
		return false
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, ok := req.Header["Idempotency-Key"]
	_, okX := req.Header["X-Idempotency-Key"]
	return ok || okX
}

// isConnDrop reports whether err is the peer having closed or reset the connection.
func isConnDrop(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// budgetReader reads from nc at most left bytes: it bounds the head of each response.
type budgetReader struct {
	nc   net.Conn
	left int64
}

func (r *budgetReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, ErrTooLarge
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.nc.Read(p)
	r.left -= int64(n)
	return n, err
}

// countingWriter writes to nc and counts the bytes written.
type countingWriter struct {
	nc net.Conn
	n  int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.nc.Write(p)
	w.n += int64(n)
	return n, err
}

// bodyBuf holds a request body; they are pooled.
type bodyBuf struct {
	bytes.Buffer
	lr io.LimitedReader
}

var bufPool = sync.Pool{New: func() any { return new(bodyBuf) }}

// readRequestBody reads and closes req.Body; the buffer goes back with putBuf.
func readRequestBody(req *http.Request) (*bodyBuf, error) {
	buf := bufPool.Get().(*bodyBuf)
	buf.Reset()
	if req.Body == nil || req.Body == http.NoBody {
		return buf, nil
	}
	buf.lr = io.LimitedReader{R: req.Body, N: MaxBody + 1}
	_, err := buf.ReadFrom(&buf.lr)
	buf.lr.R = nil
	req.Body.Close()
	switch {
	case err != nil:
		err = fmt.Errorf("httpconn: reading request body: %w", err)
	case buf.Len() > MaxBody:
		err = ErrTooLarge
	case req.ContentLength > 0 && int64(buf.Len()) != req.ContentLength:
		err = fmt.Errorf("httpconn: ContentLength=%d with body length %d", req.ContentLength, buf.Len())
	}
	if err != nil {
		putBuf(buf)
		return nil, err
	}
	return buf, nil
}

func putBuf(buf *bodyBuf) {
	if buf.Cap() <= 64<<10 {
		bufPool.Put(buf)
	}
}
