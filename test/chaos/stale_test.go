package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/services/oracle"
)

// TestStaleReadAfterPause is the focused reproducer of a fixed bug: a deposed leader answering
// reads from stale state (fixed by actors' readGate). Node X leads
// partition p; X is frozen (SIGSTOP) until another node leads p; a nonce of p is consumed
// through that new leader (acknowledged); reads of the nonce are then sent to X (they wait in
// its socket buffers) and X resumes (SIGCONT). Every read began after the consume was
// acknowledged, so each must show the nonce used; an answer "unused" (or unknown_nonce for a
// nonce issued while X was frozen) is a stale read. Nor may X, deposed, hold a read until its
// deadline and answer 503 "no leader on this node": once its Raft reports the leadership lost,
// X refuses the reads locally and its router sends them to the new leader. (Other 503s, of
// unknown outcome, are allowed.)
func TestStaleReadAfterPause(t *testing.T) {
	if testing.Short() {
		t.Skip("the reproducer of a fixed bug runs in the full suite only")
	}
	c := startCluster(t)
	x, _ := c.pickByLeadership(true)
	X, Y := c.nodes[x], c.nodes[(x+1)%len(c.nodes)]
	var v clusterView
	if err := c.getJSON(Y, "/v1/cluster", &v); err != nil {
		t.Fatal(err)
	}
	p := -1
	for _, ps := range v.Partitions {
		if ps.Leader == X.Config.NodeID {
			p = int(ps.ID)
			break
		}
	}
	if p < 0 {
		t.Fatalf("%s leads no partition: %+v", X.Config.NodeID, v.Partitions)
	}
	inP := func(nonce string) bool {
		return int(actors.PartitionOf(oracle.KindName, nonce[:2], partitions)) == p
	}
	// Keep-alive connections to X, opened before the pause: requests sent on them during the
	// pause are read as soon as X resumes (no accept needed), as a busy client's would be.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	post := func(url, body string) (int, map[string]any) {
		resp, err := hc.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			return 0, map[string]any{"error": err.Error()}
		}
		defer resp.Body.Close()
		var out map[string]any
		b, _ := io.ReadAll(resp.Body)
		_ = json.Unmarshal(b, &out)
		return resp.StatusCode, out
	}

	// A nonce of partition p, issued before the pause (so X has it too). Issued through X: a
	// node issues from the shards of partitions it leads, so another node would not pick p.
	var nonce string
	for i := 0; nonce == "" && i < 2000; i++ {
		if status, out := post(X.URL("/v1/nonces"), `{"org_id":"chaos"}`); status == http.StatusCreated && inP(out["nonce"].(string)) {
			nonce = out["nonce"].(string)
		}
	}
	if nonce == "" {
		t.Fatalf("no nonce of partition %d issued", p)
	}

	const readers = 16
	var warm sync.WaitGroup
	for range readers {
		warm.Go(func() {
			if resp, err := hc.Get(X.URL("/healthz")); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	warm.Wait()

	c.note("SIGSTOP %s, leader of partition %d", X.Config.NodeID, p)
	X.Stop()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if err := c.getJSON(Y, "/v1/cluster", &v); err == nil && v.Partitions[p].Leader != "" && v.Partitions[p].Leader != X.Config.NodeID {
			break
		}
		if time.Now().After(deadline) {
			X.Cont()
			t.Fatalf("partition %d has no new leader 15s after %s froze", p, X.Config.NodeID)
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.note("partition %d now led by %s", p, v.Partitions[p].Leader)
	var status int
	for i := 0; i < 50; i++ {
		if status, _ = post(Y.URL("/v1/nonces/"+nonce+"/consume"), `{"org_id":"chaos","request_id":"stale-test"}`); status == http.StatusOK {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if status != http.StatusOK {
		X.Cont()
		t.Fatalf("consume through %s: %d", Y.Config.NodeID, status)
	}
	c.note("consumed through %s (acknowledged); now reading through frozen %s", Y.Config.NodeID, X.Config.NodeID)

	answers := make([]string, readers)
	var wg, written sync.WaitGroup
	written.Add(readers)
	for i := range readers {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var once sync.Once
			wrote := func() { once.Do(written.Done) }
			defer wrote() // a request that failed before being written must not hold up the test
			ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { wrote() }})
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, X.URL("/v1/nonces/"+nonce), nil)
			resp, err := hc.Do(req)
			if err != nil {
				answers[i] = "error: " + err.Error()
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			answers[i] = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(b)))
		})
	}
	written.Wait() // every read is written: it waits in X's socket buffers
	X.Cont()
	c.note("SIGCONT %s", X.Config.NodeID)
	wg.Wait()
	stale, held := 0, 0
	for i, a := range answers {
		t.Logf("read %d through %s: %s", i, X.Config.NodeID, a)
		if strings.HasPrefix(a, "200 ") && strings.Contains(a, `"used_at":null`) || strings.HasPrefix(a, "404 ") {
			stale++
		} else if strings.HasPrefix(a, "503 ") && strings.Contains(a, "has no leader on this node") {
			held++
		}
	}
	if held > 0 {
		t.Errorf("%d of %d reads through %s were held until their deadline instead of going to the new leader %s", held, readers, X.Config.NodeID, v.Partitions[p].Leader)
	}
	if stale > 0 {
		t.Errorf("%d of %d reads through %s, all sent after the consume was acknowledged by %s, answered from stale state (nonce unused)",
			stale, readers, X.Config.NodeID, v.Partitions[p].Leader)
	}
}
