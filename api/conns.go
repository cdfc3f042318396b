package api

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// ConnGuard bounds the connections an HTTP server holds open. Past the bound, a new connection
// takes the place of the one idle the longest — a keep-alive connection between requests, or
// one that has not sent its request yet — and when every connection is in the middle of a
// request, the new one is answered 503 with Retry-After and closed. Clients that hold
// connections without finishing requests are ended by the server's own timeouts (see
// ServerTimeouts); the guard keeps them from crowding out new clients meanwhile, and keeps
// the node's file descriptors bounded.
//
// Use Listener around the server's listener and ConnState as the server's ConnState hook.
type ConnGuard struct {
	max int

	mu    sync.Mutex
	conns map[net.Conn]*connState
}

// connState is what the guard knows of one connection. Guarded by ConnGuard.mu.
type connState struct {
	busy  bool      // reading or answering a request
	since time.Time // of the last change
}

// NewConnGuard returns a guard of at most max connections (max < 1: no bound).
func NewConnGuard(max int) *ConnGuard {
	return &ConnGuard{max: max, conns: map[net.Conn]*connState{}}
}

// Open reports the connections held.
func (g *ConnGuard) Open() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.conns)
}

// ConnState is the http.Server hook that follows each connection the Listener let in.
func (g *ConnGuard) ConnState(c net.Conn, s http.ConnState) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch s {
	case http.StateClosed, http.StateHijacked:
		delete(g.conns, c)
	default:
		// Only admit adds a connection: the server reports one only once Accept has returned
		// it, so one unknown here was evicted. It can still be reported until StateClosed (a
		// request read just before the eviction reports StateActive); added back, it would
		// hold a place with no connection behind it, and new ones would be evicted or refused
		// with room to spare.
		if st, ok := g.conns[c]; ok {
			st.busy, st.since = s == http.StateActive, time.Now()
		}
	}
}

// Listener wraps ln so that each accepted connection passes the guard.
func (g *ConnGuard) Listener(ln net.Listener) net.Listener {
	return &guardedListener{Listener: ln, g: g}
}

type guardedListener struct {
	net.Listener
	g         *ConnGuard
	rejecting atomic.Int32 // refused connections being answered
}

// maxRejecting bounds the refused connections answered at once; past it they are closed
// without an answer.
const maxRejecting = 64

// overloaded is the answer to a connection past the bound that no idle one could make room for.
var overloaded = func() []byte {
	body := `{"error":"unavailable","message":"too many connections; retry in a second"}` + "\n"
	return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n" +
		"Connection: close\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}()

func (l *guardedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.g.admit(c) {
			return c, nil
		}
		if l.rejecting.Add(1) > maxRejecting {
			l.rejecting.Add(-1)
			c.Close()
			continue
		}
		go func() {
			defer l.rejecting.Add(-1)
			defer c.Close()
			// Written before any request is read: the client sees it as the answer to its
			// first. Then half-closed and drained a moment, so that closing with its request
			// unread does not reset the connection before the answer is read.
			c.SetDeadline(time.Now().Add(time.Second))
			if _, err := c.Write(overloaded); err != nil {
				return
			}
			if cw, ok := c.(interface{ CloseWrite() error }); ok {
				cw.CloseWrite()
			}
			_, _ = io.Copy(io.Discard, io.LimitReader(c, MaxHeaderBytes))
		}()
	}
}

// admit makes room for c, closing the connection idle the longest if the guard is full, and
// reports whether c may be served.
func (g *ConnGuard) admit(c net.Conn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.max > 0 && len(g.conns) >= g.max {
		var oldest net.Conn
		var at time.Time
		for oc, st := range g.conns {
			if !st.busy && (oldest == nil || st.since.Before(at)) {
				oldest, at = oc, st.since
			}
		}
		if oldest == nil {
			return false
		}
		// Forgotten now: ConnState ignores what the server still reports of it.
		delete(g.conns, oldest)
		oldest.Close()
	}
	g.conns[c] = &connState{since: time.Now()}
	return true
}

// ServerTimeouts are the HTTP server's bounds on slow clients.
type ServerTimeouts struct {
	// ReadHeader bounds the request line and headers; Read the whole request, body included.
	ReadHeader, Read time.Duration
	// Write bounds the answer, from the end of the request headers: long enough for the
	// longest long poll (30 s) and a request's deadline.
	Write time.Duration
	// Idle closes a keep-alive connection with no request for this long.
	Idle time.Duration
}

// MaxWait bounds how long a long poll (a ?wait= of the API) holds its answer.
const MaxWait = 30 * time.Second

// MaxHeaderBytes bounds a request's headers.
const MaxHeaderBytes = 64 << 10

// Apply sets t and MaxHeaderBytes on s.
func (t ServerTimeouts) Apply(s *http.Server) {
	s.ReadHeaderTimeout, s.ReadTimeout, s.WriteTimeout, s.IdleTimeout = t.ReadHeader, t.Read, t.Write, t.Idle
	s.MaxHeaderBytes = MaxHeaderBytes
}
