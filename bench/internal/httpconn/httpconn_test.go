package httpconn

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// server is an httptest server that counts the connections it accepts and closes.
type server struct {
	*httptest.Server
	accepted, closed atomic.Int64
	closedSig        chan struct{} // poked on every close
}

func startServer(t testing.TB, h http.HandlerFunc, cfg func(*http.Server)) *server {
	t.Helper()
	s := &server{Server: httptest.NewUnstartedServer(h), closedSig: make(chan struct{}, 1)}
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.accepted.Add(1)
		case http.StateClosed, http.StateHijacked:
			s.closed.Add(1)
			select {
			case s.closedSig <- struct{}{}:
			default:
			}
		}
	}
	if cfg != nil {
		cfg(s.Config)
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// waitClosed waits until the server has seen n connections closed.
func (s *server) waitClosed(t *testing.T, n int64) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for s.closed.Load() < n {
		select {
		case <-s.closedSig:
		case <-timeout:
			t.Fatalf("server closed %d connections, want %d", s.closed.Load(), n)
		}
	}
}

func newClient(t testing.TB, tr *Transport) *http.Client {
	if tr == nil {
		tr = &Transport{MaxIdlePerHost: 64}
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// do sends a request and returns the status and body.
func do(t *testing.T, hc *http.Client, method, url, body string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func TestKeepAliveReuse(t *testing.T) {
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s", r.URL.Query().Get("i"))
	}, nil)
	hc := newClient(t, nil)
	for i := range 20 {
		resp, body := do(t, hc, "GET", fmt.Sprintf("%s/?i=%d", s.URL, i), "")
		if want := fmt.Sprintf("hello %d", i); resp.StatusCode != 200 || body != want {
			t.Fatalf("request %d: %d %q, want 200 %q", i, resp.StatusCode, body, want)
		}
	}
	if n := s.accepted.Load(); n != 1 {
		t.Fatalf("20 sequential requests used %d connections, want 1", n)
	}
}

func TestConcurrentRequests(t *testing.T) {
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Id", r.Header.Get("X-Id"))
		w.Write(b)
	}, nil)
	hc := newClient(t, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 64 {
		wg.Go(func() {
			for i := range 30 {
				id := fmt.Sprintf("%d-%d", g, i)
				body := strings.Repeat(id, i+1)
				req, _ := http.NewRequest("POST", s.URL+"/echo", strings.NewReader(body))
				req.Header.Set("X-Id", id)
				resp, err := hc.Do(req)
				if err != nil {
					errs <- err
					return
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || string(got) != body || resp.Header.Get("X-Id") != id {
					errs <- fmt.Errorf("%s: got %q (X-Id %q, err %v)", id, got, resp.Header.Get("X-Id"), err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := s.accepted.Load(); n > 64 {
		t.Errorf("64 clients used %d connections", n)
	}
}

func TestChunkedResponse(t *testing.T) {
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Parts")
		for i := range 5 {
			fmt.Fprintf(w, "part%d;", i)
			w.(http.Flusher).Flush()
		}
		w.Header().Set("X-Parts", "5")
	}, nil)
	hc := newClient(t, nil)
	for range 3 {
		resp, body := do(t, hc, "GET", s.URL, "")
		if body != "part0;part1;part2;part3;part4;" {
			t.Fatalf("body %q", body)
		}
		if !slices.Equal(resp.TransferEncoding, []string{"chunked"}) || resp.ContentLength != -1 {
			t.Fatalf("TransferEncoding %q, ContentLength %d", resp.TransferEncoding, resp.ContentLength)
		}
	}
	if n := s.accepted.Load(); n != 1 {
		t.Fatalf("chunked responses (with trailers) used %d connections, want 1", n)
	}
}

func TestContentLengthResponse(t *testing.T) {
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "11")
		w.Write([]byte("hello world"))
	}, nil)
	resp, body := do(t, newClient(t, nil), "GET", s.URL, "")
	if body != "hello world" || resp.ContentLength != 11 || resp.TransferEncoding != nil {
		t.Fatalf("body %q, ContentLength %d, TransferEncoding %q", body, resp.ContentLength, resp.TransferEncoding)
	}
}

func TestServerConnectionClose(t *testing.T) {
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/close" {
			w.Header().Set("Connection", "close")
		}
		w.Write([]byte("ok"))
	}, nil)
	hc := newClient(t, nil)
	for _, path := range []string{"/close", "/", "/"} {
		if resp, body := do(t, hc, "GET", s.URL+path, ""); resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("%s: %d %q", path, resp.StatusCode, body)
		}
	}
	s.waitClosed(t, 1)
	if n := s.accepted.Load(); n != 2 {
		t.Fatalf("used %d connections, want 2 (the first closed by the server)", n)
	}
}

func TestServerClosesIdleConnection(t *testing.T) {
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(r.Method)) },
		func(srv *http.Server) { srv.IdleTimeout = 20 * time.Millisecond })
	tr := &Transport{MaxIdlePerHost: 4}
	hc := newClient(t, tr)
	do(t, hc, "GET", s.URL, "")
	s.waitClosed(t, 1)
	if resp, body := do(t, hc, "GET", s.URL, ""); resp.StatusCode != 200 || body != "GET" {
		t.Fatalf("GET after idle close: %d %q", resp.StatusCode, body)
	}
	// A POST is not resent once written, so it relies on the stale connection being noticed
	// before use. Wait until the client side has seen the server's FIN.
	s.waitClosed(t, 2)
	waitPooledDead(t, tr, s.Listener.Addr().String())
	if resp, body := do(t, hc, "POST", s.URL, "x"); resp.StatusCode != 200 || body != "POST" {
		t.Fatalf("POST after idle close: %d %q", resp.StatusCode, body)
	}
	if n := s.accepted.Load(); n != 3 {
		t.Fatalf("used %d connections, want 3", n)
	}
}

// waitPooledDead waits until the idle connection to addr reads as closed (linux only: elsewhere
// it cannot tell).
func waitPooledDead(t *testing.T, tr *Transport, addr string) {
	t.Helper()
	tr.mu.Lock()
	cs := slices.Clone(tr.idle[addr])
	tr.mu.Unlock()
	if len(cs) != 1 {
		t.Fatalf("%d idle connections, want 1", len(cs))
	}
	deadline := time.Now().Add(10 * time.Second)
	for cs[0].alive() {
		if cs[0].rc == nil || time.Now().After(deadline) {
			t.Skip("cannot see that the idle connection was closed")
		}
		time.Sleep(time.Millisecond)
	}
}

func idleCount(tr *Transport, addr string) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.idle[addr])
}

func TestContextDeadline(t *testing.T) {
	release := make(chan struct{})
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		w.Write([]byte("ok"))
	}, nil)
	defer close(release)
	tr := &Transport{MaxIdlePerHost: 4}
	hc := newClient(t, tr)
	do(t, hc, "GET", s.URL, "") // a pooled connection, which the slow request reuses

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.URL+"/slow", nil)
	start := time.Now()
	_, err := hc.Do(req)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("took %v to time out", d)
	}
	if n := idleCount(tr, s.Listener.Addr().String()); n != 0 {
		t.Fatalf("%d idle connections after the timeout, want 0", n)
	}
	do(t, hc, "GET", s.URL, "")
	if n := s.accepted.Load(); n != 2 {
		t.Fatalf("used %d connections, want 2 (the timed-out one is not reused)", n)
	}
}

func TestContextCancel(t *testing.T) {
	release := make(chan struct{})
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}, nil)
	defer close(release)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	req, _ := http.NewRequestWithContext(ctx, "POST", s.URL, strings.NewReader("x"))
	start := time.Now()
	if _, err := newClient(t, nil).Do(req); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("took %v to cancel", d)
	}
}

func TestStatusAndHeaders(t *testing.T) {
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.Header().Set("Content-Type", "application/json")
		w.Header().Add("X-Multi", "a")
		w.Header().Add("X-Multi", "b")
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write([]byte(`{"error":"slow down"}`))
	}, nil)
	resp, body := do(t, newClient(t, nil), "POST", s.URL, "{}")
	if resp.StatusCode != 429 || resp.Status != "429 Too Many Requests" || resp.Proto != "HTTP/1.1" {
		t.Fatalf("status %d %q %q", resp.StatusCode, resp.Status, resp.Proto)
	}
	if resp.Header.Get("Retry-After") != "7" || resp.Header.Get("Content-Type") != "application/json" ||
		!slices.Equal(resp.Header.Values("X-Multi"), []string{"a", "b"}) {
		t.Fatalf("headers %v", resp.Header)
	}
	if body != `{"error":"slow down"}` {
		t.Fatalf("body %q", body)
	}
}

func TestRequestArrivesIntact(t *testing.T) {
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s host=%s cl=%d te=%v auth=%q multi=%q body=%q", r.Method, r.RequestURI, r.Host,
			r.ContentLength, r.TransferEncoding, r.Header.Get("Authorization"), r.Header.Values("X-Multi"), b)
	}, nil)
	hc := newClient(t, nil)
	req, _ := http.NewRequest("PUT", s.URL+"/a/b%2Fc?x=1&y=%20", strings.NewReader(`{"k":"v"}`))
	req.Host = "example.test"
	req.Header.Set("Authorization", "Bearer tok")
	req.Header.Add("X-Multi", "1")
	req.Header.Add("X-Multi", "2")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	want := `PUT /a/b%2Fc?x=1&y=%20 host=example.test cl=9 te=[] auth="Bearer tok" multi=["1" "2"] body="{\"k\":\"v\"}"`
	if string(got) != want {
		t.Fatalf("server saw\n%s\nwant\n%s", got, want)
	}

	// A body of unknown length (ContentLength 0, no GetBody) is sent with its real length; a
	// POST without a body says Content-Length: 0.
	req, _ = http.NewRequest("POST", s.URL+"/u", io.NopCloser(strings.NewReader("abc")))
	resp, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ = io.ReadAll(resp.Body)
	if want := `POST /u host=` + s.Listener.Addr().String() + ` cl=3 te=[] auth="" multi=[] body="abc"`; string(got) != want {
		t.Fatalf("server saw\n%s\nwant\n%s", got, want)
	}
	if _, body := do(t, hc, "POST", s.URL+"/e", ""); !strings.HasPrefix(body, "POST /e") || !strings.Contains(body, "cl=0 ") {
		t.Fatalf("server saw %s", body)
	}
}

func TestLargeBodies(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/cl":
			w.Header().Set("Content-Length", fmt.Sprint(len(big)))
			w.Write(big)
		case "/chunked":
			for i := 0; i < len(big); i += 100_000 {
				w.Write(big[i:min(i+100_000, len(big))])
				w.(http.Flusher).Flush()
			}
		case "/echo":
			io.Copy(w, r.Body)
		}
	}, nil)
	hc := newClient(t, nil)
	for _, path := range []string{"/cl", "/chunked", "/echo"} {
		body := ""
		if path == "/echo" {
			body = string(big)
		}
		resp, got := do(t, hc, "POST", s.URL+path, body)
		if resp.StatusCode != 200 || got != string(big) {
			t.Fatalf("%s: status %d, %d bytes, want %d", path, resp.StatusCode, len(got), len(big))
		}
	}
	if n := s.accepted.Load(); n != 1 {
		t.Fatalf("used %d connections, want 1", n)
	}
}

func TestResponsesWithoutBody(t *testing.T) {
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/204":
			w.WriteHeader(http.StatusNoContent)
		case "/304":
			w.WriteHeader(http.StatusNotModified)
		default:
			w.Header().Set("Content-Length", "5")
			w.Write([]byte("hello"))
		}
	}, nil)
	hc := newClient(t, nil)
	resp, body := do(t, hc, "HEAD", s.URL, "")
	if resp.StatusCode != 200 || body != "" || resp.ContentLength != 5 {
		t.Fatalf("HEAD: %d %q ContentLength %d", resp.StatusCode, body, resp.ContentLength)
	}
	for _, code := range []int{204, 304} {
		if resp, body := do(t, hc, "GET", fmt.Sprintf("%s/%d", s.URL, code), ""); resp.StatusCode != code || body != "" {
			t.Fatalf("%d: %d %q", code, resp.StatusCode, body)
		}
	}
	if _, body := do(t, hc, "GET", s.URL, ""); body != "hello" {
		t.Fatalf("GET: %q", body)
	}
	if n := s.accepted.Load(); n != 1 {
		t.Fatalf("used %d connections, want 1", n)
	}
}

func TestInterimResponsesSkipped(t *testing.T) {
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hints" {
			w.Header().Set("Link", "</style.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
		}
		b, _ := io.ReadAll(r.Body) // answers "Expect: 100-continue" with 100 Continue first
		w.Write(append([]byte("got "), b...))
	}, nil)
	hc := newClient(t, nil)
	if resp, body := do(t, hc, "GET", s.URL+"/hints", ""); resp.StatusCode != 200 || body != "got " {
		t.Fatalf("103 then 200: %d %q", resp.StatusCode, body)
	}
	req, _ := http.NewRequest("POST", s.URL, strings.NewReader("body"))
	req.Header.Set("Expect", "100-continue")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || string(got) != "got body" {
		t.Fatalf("100 then 200: %d %q", resp.StatusCode, got)
	}
}

func TestCloseIdleConnections(t *testing.T) {
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) {}, nil)
	tr := &Transport{}
	do(t, newClient(t, tr), "GET", s.URL, "")
	tr.CloseIdleConnections()
	s.waitClosed(t, 1)
}

func TestMaxIdlePerHost(t *testing.T) {
	var in sync.WaitGroup
	in.Add(3)
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) { in.Done(); in.Wait() }, nil)
	tr := &Transport{MaxIdlePerHost: 1}
	hc := newClient(t, tr)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { do(t, hc, "GET", s.URL, "") })
	}
	wg.Wait()
	s.waitClosed(t, 2)
	if n := idleCount(tr, s.Listener.Addr().String()); n != 1 {
		t.Fatalf("%d idle connections, want 1", n)
	}
}

// trackingBody records that it was closed.
type trackingBody struct {
	io.Reader
	closed atomic.Bool
}

func (b *trackingBody) Close() error { b.closed.Store(true); return nil }

func TestRequestBodyClosed(t *testing.T) {
	s := startServer(t, func(w http.ResponseWriter, r *http.Request) {}, nil)
	tr := &Transport{}
	defer tr.CloseIdleConnections()
	for _, url := range []string{s.URL, "http://127.0.0.1:1", "https://example.test"} {
		body := &trackingBody{Reader: strings.NewReader("x")}
		req, _ := http.NewRequest("POST", url, body)
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		if !body.closed.Load() {
			t.Errorf("%s: request body not closed (err %v)", url, err)
		}
	}
}

// rawServer serves each connection with answer(i, req, conn), i counting the requests on the
// connection from 0; answer returns false to close the connection. It reports the number of
// connections accepted.
func rawServer(t *testing.T, answer func(i int, req *http.Request, c net.Conn) bool) (url string, accepted *atomic.Int64) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = new(atomic.Int64)
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			wg.Go(func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for i := 0; ; i++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					if !answer(i, req, c) {
						return
					}
				}
			})
		}
	})
	return "http://" + ln.Addr().String(), accepted
}

func TestRetryRule(t *testing.T) {
	// The server reads the second request on a connection and closes it unanswered: to
	// the client, a keep-alive connection the server dropped just as the request went out.
	dropSecond := func(i int, _ *http.Request, c net.Conn) bool {
		if i > 0 {
			return false
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
		return true
	}
	// The server answers the second request with part of a status line, then closes.
	cutSecond := func(i int, _ *http.Request, c net.Conn) bool {
		if i > 0 {
			io.WriteString(c, "HTTP/1.1 20")
			return false
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return true
	}
	for _, tc := range []struct {
		name      string
		answer    func(int, *http.Request, net.Conn) bool
		method    string
		idemKey   bool
		wantRetry bool
	}{
		{"GET", dropSecond, "GET", false, true},
		{"HEAD", dropSecond, "HEAD", false, true},
		{"POST", dropSecond, "POST", false, false},
		{"PUT", dropSecond, "PUT", false, false},
		{"POST Idempotency-Key", dropSecond, "POST", true, true},
		{"GET after a response byte", cutSecond, "GET", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, accepted := rawServer(t, tc.answer)
			tr := &Transport{}
			defer tr.CloseIdleConnections()
			var last error
			for range 2 {
				body := io.Reader(nil)
				if tc.method == "POST" || tc.method == "PUT" {
					body = strings.NewReader("payload")
				}
				req, _ := http.NewRequest(tc.method, url, body)
				if tc.idemKey {
					req.Header.Set("Idempotency-Key", "k1")
				}
				resp, err := tr.RoundTrip(req)
				if err == nil {
					resp.Body.Close()
				}
				last = err
			}
			if retried := accepted.Load() == 2; retried != tc.wantRetry || (last == nil) != tc.wantRetry {
				t.Fatalf("second request: err %v after %d connections; want retried=%v", last, accepted.Load(), tc.wantRetry)
			}
		})
	}
}

func TestRetryConditions(t *testing.T) {
	mk := func(method string, body io.Reader, hdr string) *http.Request {
		req, _ := http.NewRequest(method, "http://h/", body)
		if hdr != "" {
			req.Header.Set(hdr, "k")
		}
		return req
	}
	noGetBody := mk("GET", io.NopCloser(strings.NewReader("x")), "")
	for _, tc := range []struct {
		name                   string
		req                    *http.Request
		rewindable, replayable bool
	}{
		{"GET", mk("GET", nil, ""), true, true},
		{"OPTIONS", mk("OPTIONS", nil, ""), true, true},
		{"POST bytes body", mk("POST", strings.NewReader("x"), ""), true, false},
		{"POST no body", mk("POST", nil, ""), true, false},
		{"POST Idempotency-Key", mk("POST", strings.NewReader("x"), "Idempotency-Key"), true, true},
		{"POST X-Idempotency-Key", mk("POST", strings.NewReader("x"), "X-Idempotency-Key"), true, true},
		{"GET body without GetBody", noGetBody, false, false},
	} {
		if rw, rp := rewindable(tc.req), replayable(tc.req); rw != tc.rewindable || rp != tc.replayable {
			t.Errorf("%s: rewindable %v replayable %v, want %v %v", tc.name, rw, rp, tc.rewindable, tc.replayable)
		}
	}
	for _, err := range []error{io.EOF, fmt.Errorf("read: %w", &net.OpError{Op: "read", Err: syscall.ECONNRESET})} {
		if !isConnDrop(err) {
			t.Errorf("isConnDrop(%v) = false", err)
		}
	}
	if isConnDrop(context.DeadlineExceeded) || isConnDrop(errors.New("other")) {
		t.Error("isConnDrop true for a timeout or another error")
	}
}

func TestReadChunked(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		err      bool
	}{
		{"5\r\nhello\r\n0\r\n\r\n", "hello", false},
		{"3;ext=1\r\nabc\r\nA\r\n0123456789\r\n0\r\nX-Trailer: v\r\nY: w\r\n\r\nNEXT", "abc0123456789", false},
		{"3\nabc\n0\n\n", "abc", false},
		{"0\r\n\r\n", "", false},
		{"zz\r\nabc\r\n0\r\n\r\n", "", true},
		{"\r\n", "", true},
		{"3\r\nabcX\r\n0\r\n\r\n", "", true},
		{"5\r\nabc", "", true},
		{"5\r\nhello\r\n0\r\n", "", true}, // no end of trailers
		{"FFFFFFFFFFFFFFFFFFFF\r\n", "", true},
		{"1000001\r\n", "", true}, // over MaxBody
	} {
		br := bufio.NewReader(strings.NewReader(tc.in))
		got, err := readChunked(br)
		if (err != nil) != tc.err || string(got) != tc.want {
			t.Errorf("readChunked(%q) = %q, %v", tc.in, got, err)
		}
		if err == nil && strings.HasSuffix(tc.in, "NEXT") {
			if rest, _ := io.ReadAll(br); string(rest) != "NEXT" {
				t.Errorf("readChunked(%q) left %q", tc.in, rest)
			}
		}
	}
}

func TestMalformedResponses(t *testing.T) {
	for _, tc := range []struct{ name, answer string }{
		{"too large", "HTTP/1.1 200 OK\r\nContent-Length: 16777217\r\n\r\n"},
		{"bad status line", "HTTP/1.1 2x0 OK\r\n\r\n"},
		{"HTTP/2 status line", "HTTP/2 200 OK\r\n\r\n"},
		{"conflicting lengths", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"},
		{"gzip coding", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n"},
		{"short body", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab"},
		{"upgrade", "HTTP/1.1 101 Switching Protocols\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, _ := rawServer(t, func(_ int, _ *http.Request, c net.Conn) bool {
				io.WriteString(c, tc.answer)
				return false
			})
			tr := &Transport{}
			req, _ := http.NewRequest("GET", url, nil)
			if resp, err := tr.RoundTrip(req); err == nil {
				resp.Body.Close()
				t.Fatalf("no error for %q", tc.answer)
			}
		})
	}
	// A response delimited by the end of the connection is read in full.
	url, _ := rawServer(t, func(_ int, _ *http.Request, c net.Conn) bool {
		io.WriteString(c, "HTTP/1.0 200 OK\r\nX: y\r\n\r\nuntil the end")
		return false
	})
	req, _ := http.NewRequest("GET", url, nil)
	resp, err := (&Transport{}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != "until the end" || resp.ContentLength != -1 {
		t.Fatalf("body %q, ContentLength %d", b, resp.ContentLength)
	}
}

// BenchmarkRoundTrip compares this transport with net/http's on small POSTs to a trivial
// handler in the same process (the allocations include the server's).
func BenchmarkRoundTrip(b *testing.B) {
	s := startServer(b, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true}`))
	}, nil)
	body := []byte(`{"registry":"bench","ttl_ms":30000}`)
	for _, tc := range []struct {
		name string
		rt   http.RoundTripper
	}{
		{"lean", &Transport{MaxIdlePerHost: 256}},
		{"nethttp", &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, DisableCompression: true}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			hc := &http.Client{Transport: tc.rt}
			defer hc.CloseIdleConnections()
			b.ReportAllocs()
			b.SetParallelism(16)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req, _ := http.NewRequest("POST", s.URL+"/v1/nonces", bytes.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					resp, err := hc.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		})
	}
}

func TestHugeHead(t *testing.T) {
	url, _ := rawServer(t, func(_ int, _ *http.Request, c net.Conn) bool {
		io.WriteString(c, "HTTP/1.1 200 OK\r\n")
		line := "X-Filler: " + strings.Repeat("x", 1000) + "\r\n"
		for range 2 << 10 { // 2 MiB of header fields
			if _, err := io.WriteString(c, line); err != nil {
				return false
			}
		}
		return false
	})
	req, _ := http.NewRequest("GET", url, nil)
	if _, err := (&Transport{}).RoundTrip(req); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
}
