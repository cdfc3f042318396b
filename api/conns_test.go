package api_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/api"
	"github.com/shardkeeper/shardkeeper/ops"
	"github.com/shardkeeper/shardkeeper/test/await"
)

// guardedServer serves h behind a ConnGuard of max connections and the given timeouts.
func guardedServer(t *testing.T, max int, timeouts api.ServerTimeouts, h http.Handler) (string, *api.ConnGuard, *connStates) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := api.NewConnGuard(max)
	states := &connStates{last: map[string]http.ConnState{}}
	srv := &http.Server{Handler: h, ConnState: func(c net.Conn, s http.ConnState) {
		g.ConnState(c, s)
		states.set(c, s)
	}}
	timeouts.Apply(srv)
	go srv.Serve(g.Listener(ln))
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), g, states
}

// connStates is the last state the server reported of each connection, once the guard has
// seen it, by client address. The server reports a connection idle only after its answer is
// written, so a client can have the answer while the guard still counts the connection busy.
type connStates struct {
	mu   sync.Mutex
	last map[string]http.ConnState
}

func (cs *connStates) set(c net.Conn, s http.ConnState) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.last[c.RemoteAddr().String()] = s
}

// is reports whether the server last reported s of the client connection c.
func (cs *connStates) is(c net.Conn, s http.ConnState) bool {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	st, ok := cs.last[c.LocalAddr().String()]
	return ok && st == s
}

// rawGet sends one GET on c and reads the status line of the answer.
func rawGet(c net.Conn, br *bufio.Reader, path string) (string, error) {
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return "", err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.Status, nil
}

// dial connects to addr, closing the connection when t ends.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitTimeout bounds each wait of these tests for the server.
const waitTimeout = 10 * time.Second

// awaitEntered waits for n requests to reach the handler (entered), failing t with the error
// of a request that ends first (ended) or after waitTimeout.
func awaitEntered(t *testing.T, entered <-chan struct{}, ended <-chan error, n int) {
	t.Helper()
	timeout := time.After(waitTimeout)
	for i := 0; i < n; {
		select {
		case <-entered:
			i++
		case err := <-ended:
			t.Fatalf("a request ended before it was released (%d of %d in the handler): %v", i, n, err)
		case <-timeout:
			t.Fatalf("%d of %d requests in the handler after %v", i, n, waitTimeout)
		}
	}
}

// awaitEnded waits for n requests to end, failing t with the first error or after waitTimeout.
func awaitEnded(t *testing.T, ended <-chan error, n int) {
	t.Helper()
	timeout := time.After(waitTimeout)
	for i := range n {
		select {
		case err := <-ended:
			if err != nil {
				t.Fatal(err)
			}
		case <-timeout:
			t.Fatalf("%d of %d requests ended after %v", i, n, waitTimeout)
		}
	}
}

// blocking answers /block once release is closed (or the request is gone), signalling entered
// first; other paths at once.
func blocking(entered chan<- struct{}, release <-chan struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			select {
			case entered <- struct{}{}:
			case <-r.Context().Done():
				return
			}
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		io.WriteString(w, "ok")
	})
}

var long = api.ServerTimeouts{ReadHeader: time.Minute, Read: time.Minute, Write: time.Minute, Idle: time.Minute}

// Past its bound, a new connection replaces the one idle the longest: clients holding
// keep-alive connections cannot lock new ones out. With every connection busy, the new one is
// answered 503 with Retry-After.
func TestConnGuardEvictsIdleThenRefuses(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 3)
	addr, g, states := guardedServer(t, 3, long, blocking(entered, release))
	// The guard counts a connection busy until the server reports it idle, which may come
	// after its client has the answer; each is awaited so that they are idle in this order.
	var idle []net.Conn
	for range 3 {
		c := dial(t, addr)
		if st, err := rawGet(c, bufio.NewReader(c), "/"); err != nil || st != "200 OK" {
			t.Fatalf("first requests: %q %v", st, err)
		}
		await.True(t, waitTimeout, "a first connection reported idle", func() bool { return states.is(c, http.StateIdle) })
		idle = append(idle, c)
	}

	// A fourth client is served: the oldest idle connection made room.
	fourth := dial(t, addr)
	if st, err := rawGet(fourth, bufio.NewReader(fourth), "/"); err != nil || st != "200 OK" {
		t.Fatalf("a new client with the guard full of idle connections: %q %v", st, err)
	}
	idle[0].SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := idle[0].Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the oldest idle connection was not closed: %v", err)
	}
	fourth.Close()
	await.True(t, waitTimeout, "the fourth connection forgotten", func() bool { return g.Open() == 2 })

	// Three new connections take the places of the two left idle and the free one; every
	// connection busy, the next is refused.
	ended := make(chan error, 3)
	for range 3 {
		c := dial(t, addr)
		go func() {
			st, err := rawGet(c, bufio.NewReader(c), "/block")
			if err == nil && st != "200 OK" {
				err = fmt.Errorf("answered %q", st)
			}
			if err != nil {
				err = fmt.Errorf("a busy request: %w", err)
			}
			ended <- err
		}()
	}
	awaitEntered(t, entered, ended, 3)
	if n := g.Open(); n != 3 {
		t.Fatalf("%d connections held, want the 3 busy ones", n)
	}
	c := dial(t, addr)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("the refused connection got no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" || !strings.Contains(string(body), `"error":"unavailable"`) {
		t.Fatalf("refused with %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	close(release)
	awaitEnded(t, ended, 3)
}

// connList is a listener handing out the connections sent on it, then net.ErrClosed once it
// is closed.
type connList chan net.Conn

func (l connList) Accept() (net.Conn, error) {
	c, ok := <-l
	if !ok {
		return nil, net.ErrClosed
	}
	return c, nil
}

func (l connList) Close() error   { return nil }
func (l connList) Addr() net.Addr { return &net.TCPAddr{} }

// admitted reports whether g lets c in: c is its listener's only connection, so a refused c
// leaves Accept with net.ErrClosed.
func admitted(g *api.ConnGuard, c net.Conn) bool {
	l := make(connList, 1)
	l <- c
	close(l)
	got, err := g.Listener(l).Accept()
	return err == nil && got == c
}

// pipe returns the server end of a connection and its client end, both closed when t ends.
func pipe(t *testing.T) (server, client net.Conn) {
	server, client = net.Pipe()
	t.Cleanup(func() {
		server.Close()
		client.Close()
	})
	return server, client
}

// The server still reports a connection the guard evicted until it reports it closed: a
// request read just before the eviction is reported active, then idle. Those reports do not
// bring it back, so it holds no place: a new connection is not refused for it.
func TestConnGuardForgetsEvictedConns(t *testing.T) {
	g := api.NewConnGuard(2)
	a, aClient := pipe(t)
	b, _ := pipe(t)
	c, _ := pipe(t)
	d, _ := pipe(t)
	for _, conn := range []net.Conn{a, b} {
		if !admitted(g, conn) {
			t.Fatal("refused with room for it")
		}
		g.ConnState(conn, http.StateNew)
	}
	g.ConnState(b, http.StateActive)
	// a is the one idle: c takes its place.
	if !admitted(g, c) {
		t.Fatal("no room made for a new connection with one idle")
	}
	g.ConnState(c, http.StateNew)
	aClient.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := aClient.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("the idle connection was not closed: %v", err)
	}
	g.ConnState(a, http.StateActive)
	if n := g.Open(); n != 2 {
		t.Errorf("%d connections held after a report of an evicted one, want 2", n)
	}
	g.ConnState(b, http.StateClosed)
	g.ConnState(c, http.StateActive)
	// c alone held: d is let in.
	if !admitted(g, d) {
		t.Fatal("refused with one connection held of two")
	}
	g.ConnState(d, http.StateNew)
	g.ConnState(a, http.StateIdle)
	g.ConnState(a, http.StateClosed)
	if n := g.Open(); n != 2 {
		t.Errorf("%d connections held, want c and d", n)
	}
}

// A client that sends its body too slowly is cut off at the read timeout, and one that sits
// on a keep-alive connection at the idle timeout; headers past MaxHeaderBytes are refused.
func TestServerTimeoutsEndSlowClients(t *testing.T) {
	addr, g, _ := guardedServer(t, 0, api.ServerTimeouts{ReadHeader: 200 * time.Millisecond, Read: 300 * time.Millisecond, Write: time.Second, Idle: 300 * time.Millisecond},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			io.WriteString(w, "ok")
		}))
	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fmt.Fprintf(slow, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nab")
	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	if st, err := rawGet(idle, bufio.NewReader(idle), "/"); err != nil || st != "200 OK" {
		t.Fatalf("%q %v", st, err)
	}
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	begin := time.Now()
	for _, c := range []net.Conn{slow, idle, silent} {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadAll(c); err != nil {
			t.Fatalf("the server did not close a slow connection: %v", err)
		}
	}
	if d := time.Since(begin); d > 3*time.Second {
		t.Fatalf("slow connections closed after %v", d)
	}
	await.True(t, 5*time.Second, "every connection forgotten", func() bool { return g.Open() == 0 })

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", api.MaxHeaderBytes+4096))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("oversized headers: %v %v", resp, err)
	}
}

// Past max requests at once, Shed answers 503 unavailable with Retry-After at once; exempt
// requests always pass.
func TestShed(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 2)
	addr, _, _ := guardedServer(t, 0, long, api.Shed(2, ops.IsHealthCheck, blocking(entered, release)))
	ended := make(chan error, 2)
	for range 2 {
		go func() {
			resp, err := http.Get("http://" + addr + "/block")
			if err != nil {
				ended <- err
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				err = fmt.Errorf("a request within the bound: %s", resp.Status)
			}
			ended <- err
		}()
	}
	awaitEntered(t, entered, ended, 2)
	resp, err := http.Get("http://" + addr + "/v1/nonces/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" || !strings.Contains(string(body), `"unavailable"`) {
		t.Fatalf("over the bound: %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if resp, err := http.Get("http://" + addr + "/readyz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("a health check over the bound: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	close(release)
	awaitEnded(t, ended, 2)
	if resp, err := http.Get("http://" + addr + "/v1/nonces/x"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("after: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

// A request whose body is still arriving holds no place in Shed's bound: with a bound of one,
// a client trickling its body does not keep others out.
func TestShedCountsRequestsOnceTheirBodyIsRead(t *testing.T) {
	h := api.Shed(1, ops.IsHealthCheck, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	}))
	addr, _, _ := guardedServer(t, 0, long, h)
	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fmt.Fprintf(slow, "POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab")
	for i := range 3 {
		resp, err := http.Post("http://"+addr+"/v1/nonces", "application/json", strings.NewReader(`{"org_id":"a"}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != `{"org_id":"a"}` {
			t.Fatalf("request %d beside a slow body: %d %s", i, resp.StatusCode, body)
		}
	}
	// The slow body, once complete, reaches its handler whole.
	fmt.Fprintf(slow, "cdefghij")
	resp, err := http.ReadResponse(bufio.NewReader(slow), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != "abcdefghij" {
		t.Fatalf("the slow request: %d %q", resp.StatusCode, body)
	}
}
