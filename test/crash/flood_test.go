package crash

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/test/proc"
)

// Figures of TestConnectionFloodsAreShed.
const (
	floodMaxConns = 200 // --http-max-conns of the node
	floodIdle     = 400 // keep-alive connections left idle after one request
	floodSlow     = 100 // requests whose body trickles in
	floodSilent   = 100 // connections that never send a byte
	floodHeaders  = 20  // requests with 1 MiB of headers
)

// A node flooded with idle keep-alive connections, slow bodies, silent connections and huge
// headers — more connections than --http-max-conns — keeps answering a normal client within
// 2 s throughout; the abusive connections are closed by the node within its timeouts (2 s
// here, a minute by default), and its file descriptors stay bounded.
func TestConnectionFloodsAreShed(t *testing.T) {
	n := proc.StartReady(t, proc.Config{Bin: proc.Build(t, "./cmd/shardkeeper"), Command: []string{"serve"},
		Flags: []string{"--partitions", "4", "--http-max-conns", fmt.Sprint(floodMaxConns),
			"--http-read-timeout", "2s", "--http-idle-timeout", "2s"}})

	// The normal client: a new connection per request, every 50 ms, until the flood is over.
	stop := make(chan struct{})
	var normal sync.WaitGroup
	var mu sync.Mutex
	var worst time.Duration
	var served, failed int
	var failures []string
	normal.Go(func() {
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			begin := time.Now()
			resp, err := hc.Post(n.URL("/v1/nonces"), "application/json", strings.NewReader(`{"org_id":"acme"}`))
			took := time.Since(begin)
			mu.Lock()
			worst = max(worst, took)
			if err == nil && resp.StatusCode == http.StatusCreated && took < 2*time.Second {
				served++
			} else {
				failed++
				if len(failures) < 10 {
					failures = append(failures, fmt.Sprintf("%v after %v (status %v)", err, took.Round(time.Millisecond), statusOf(resp)))
				}
			}
			mu.Unlock()
			if resp != nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	})

	var abusive []net.Conn
	dial := func() net.Conn {
		c, err := net.Dial("tcp", n.HTTPAddr)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		abusive = append(abusive, c)
		return c
	}
	defer func() {
		for _, c := range abusive {
			c.Close()
		}
	}()
	for range floodIdle {
		c := dial()
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	for range floodSlow {
		c := dial()
		fmt.Fprintf(c, "POST /v1/nonces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
	}
	for range floodSilent {
		dial()
	}
	big := strings.Repeat("a", 1<<20)
	for range floodHeaders {
		c := dial()
		go fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", big)
	}
	fds := openFDs(t, n.PID())
	t.Logf("%d abusive connections open against --http-max-conns %d; the node holds %d file descriptors", len(abusive), floodMaxConns, fds)
	if fds > floodMaxConns+200 {
		t.Errorf("the node holds %d file descriptors with --http-max-conns %d", fds, floodMaxConns)
	}

	// Every abusive connection is closed by the node, within its timeouts: a read ends.
	begin := time.Now()
	var wg sync.WaitGroup
	var open sync.Map
	for i, c := range abusive {
		wg.Go(func() {
			c.SetReadDeadline(time.Now().Add(time.Minute))
			if _, err := io.Copy(io.Discard, bufio.NewReader(c)); err != nil && isTimeout(err) {
				open.Store(i, true)
			}
		})
	}
	wg.Wait()
	closedIn := time.Since(begin)
	close(stop)
	normal.Wait()
	stillOpen := 0
	open.Range(func(any, any) bool { stillOpen++; return true })
	if stillOpen > 0 {
		t.Errorf("%d abusive connections still open after a minute", stillOpen)
	}
	t.Logf("abusive connections all closed by the node within %v; the normal client: %d served, %d failed, slowest %v",
		closedIn.Round(time.Millisecond), served, failed, worst.Round(time.Millisecond))
	if failed > 0 || served == 0 {
		t.Errorf("the normal client was not served within 2 s every time: %d failed: %s", failed, strings.Join(failures, "; "))
	}
}

func statusOf(resp *http.Response) any {
	if resp == nil {
		return "none"
	}
	return resp.StatusCode
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// openFDs counts the file descriptors process pid holds (Linux), or 0 when unknown.
func openFDs(t *testing.T, pid int) int {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Logf("file descriptors of %d: %v", pid, err)
		return 0
	}
	return len(entries)
}
