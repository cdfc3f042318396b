package api_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/api"
	"github.com/shardkeeper/shardkeeper/test/await"
)

// guardedServer serves h behind a ConnGuard of max connections and the given timeouts.
func guardedServer(t *testing.T, max int, timeouts api.ServerTimeouts, h http.Handler) (string, *api.ConnGuard) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := api.NewConnGuard(max)
	srv := &http.Server{Handler: h, ConnState: g.ConnState}
	timeouts.Apply(srv)
	go srv.Serve(g.Listener(ln))
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), g
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

var long = api.ServerTimeouts{ReadHeader: time.Minute, Read: time.Minute, Write: time.Minute, Idle: time.Minute}

// Past its bound, a new connection replaces the one idle the longest: clients holding
// keep-alive connections cannot lock new ones out. With every connection busy, the new one is
// answered 503 with Retry-After.
func TestConnGuardEvictsIdleThenRefuses(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 3)
	addr, g := guardedServer(t, 3, long, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			entered <- struct{}{}
			<-release
		}
		io.WriteString(w, "ok")
	}))
	var idle []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if st, err := rawGet(c, bufio.NewReader(c), "/"); err != nil || st != "200 OK" {
			t.Fatalf("first requests: %q %v", st, err)
		}
		idle = append(idle, c)
	}
	// A fourth client is served: the oldest idle connection made room.
	resp, err := http.Get("http://" + addr + "/")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("a new client with the guard full of idle connections: %v %v", resp, err)
	}
	resp.Body.Close()
	idle[0].SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := idle[0].Read(make([]byte, 1)); err == nil {
		t.Fatal("the oldest idle connection was not closed")
	}
	http.DefaultClient.CloseIdleConnections()

	// Every connection busy: the next is refused.
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			resp, err := http.Get("http://" + addr + "/block")
			if err != nil || resp.StatusCode != 200 {
				t.Errorf("a busy request: %v %v", resp, err)
				return
			}
			resp.Body.Close()
		})
	}
	for range 3 {
		<-entered
	}
	if n := g.Open(); n != 3 {
		t.Fatalf("%d connections held, want the 3 busy ones", n)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err = http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("the refused connection got no answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" || !strings.Contains(string(body), `"error":"unavailable"`) {
		t.Fatalf("refused with %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	close(release)
	wg.Wait()
}

// A client that sends its body too slowly is cut off at the read timeout, and one that sits
// on a keep-alive connection at the idle timeout; headers past MaxHeaderBytes are refused.
func TestServerTimeoutsEndSlowClients(t *testing.T) {
	addr, g := guardedServer(t, 0, api.ServerTimeouts{ReadHeader: 200 * time.Millisecond, Read: 300 * time.Millisecond, Write: time.Second, Idle: 300 * time.Millisecond},
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
	entered := make(chan struct{}, 4)
	h := api.Shed(2, api.IsOps, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			entered <- struct{}{}
			<-release
		}
		io.WriteString(w, "ok")
	}))
	addr, _ := guardedServer(t, 0, long, h)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			resp, err := http.Get("http://" + addr + "/slow")
			if err == nil {
				resp.Body.Close()
			}
		})
	}
	<-entered
	<-entered
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
	wg.Wait()
	if resp, err := http.Get("http://" + addr + "/v1/nonces/x"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("after: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

// A request whose body is still arriving holds no place in Shed's bound: with a bound of one,
// a client trickling its body does not keep others out.
func TestShedCountsRequestsOnceTheirBodyIsRead(t *testing.T) {
	h := api.Shed(1, api.IsOps, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	}))
	addr, _ := guardedServer(t, 0, long, h)
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
