package chaos

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/services/oracle"
	"github.com/shardkeeper/shardkeeper/test/proc"
)

// TestForwardFailsWhenLeaderDies checks that a request forwarded to a partition's leader
// fails as soon as the leader's process dies, not at the request deadline. Node X leads
// partition p and is frozen (SIGSTOP); a consume of a nonce of p is sent through node Y, which
// still sees X as the leader and forwards it (it waits in X's socket buffers); X is then
// killed (SIGKILL). The kernel closes X's connections, and Y must answer 503 unavailable
// (outcome unknown: the request might have run) within a few seconds, far inside the 20 s
// request deadline the nodes run with here.
func TestForwardFailsWhenLeaderDies(t *testing.T) {
	testForwardToFrozenLeader(t, true, "connection lost")
}

// TestForwardFailsWhenLeaderFreezes is the same with X left frozen: no connection closes, but
// the other nodes elect a new leader of p, and Y must fail the request waiting on X a grace
// period (two election timeouts) after it sees the new leader, not at the deadline.
func TestForwardFailsWhenLeaderFreezes(t *testing.T) {
	testForwardToFrozenLeader(t, false, "is led by")
}

// testForwardToFrozenLeader freezes X, then kills it if kill is set, and checks the answer
// and that its message names the mechanism that failed it (why).
func testForwardToFrozenLeader(t *testing.T, kill bool, why string) {
	const deadline = 20 * time.Second
	c := startClusterBinding(t, false, "--request-timeout", deadline.String())
	hc := &http.Client{Timeout: 2 * deadline}
	post := func(url, body string) (int, string) {
		resp, err := hc.Post(url, "application/json", strings.NewReader(body))
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	// A nonce whose partition another node X leads, as Y sees it just before X freezes (the
	// reconciler may still be moving leaders to spread them). A node issues nonces of
	// partitions it leads, so they are issued through the others.
	Y := c.nodes[0]
	var X *proc.Node
	var nonce string
	p := -1
	for try := 0; X == nil; try++ {
		if try == 200 {
			t.Fatalf("no nonce of a partition led by another node than %s", Y.Config.NodeID)
		}
		issuer := c.nodes[1+try%(len(c.nodes)-1)]
		status, body := post(issuer.URL("/v1/nonces"), `{"org_id":"chaos"}`)
		var out struct{ Nonce string }
		if status != http.StatusCreated || json.Unmarshal([]byte(body), &out) != nil {
			t.Fatalf("issue through %s: %d %s", issuer.Config.NodeID, status, body)
		}
		p = int(actors.PartitionOf(oracle.KindName, out.Nonce[:2], partitions))
		var v clusterView
		if err := c.getJSON(Y, "/v1/cluster", &v); err != nil {
			t.Fatal(err)
		}
		for _, n := range c.nodes[1:] {
			if v.Partitions[p].Leader == n.Config.NodeID {
				X, nonce = n, out.Nonce
			}
		}
	}
	// Y forwards a read to X first, so that it has a connection to X to lose.
	if resp, err := hc.Get(Y.URL("/v1/nonces/" + nonce)); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("read through %s: %v %v", Y.Config.NodeID, resp, err)
	} else {
		resp.Body.Close()
	}
	c.note("SIGSTOP %s, leader of partition %d; consume through %s", X.Config.NodeID, p, Y.Config.NodeID)
	X.Stop()
	type answer struct {
		status int
		body   string
		at     time.Time
	}
	done := make(chan answer, 1)
	go func() {
		status, body := post(Y.URL("/v1/nonces/"+nonce+"/consume"), `{"org_id":"chaos","request_id":"forward-test"}`)
		done <- answer{status, body, time.Now()}
	}()
	fault, since := "freeze", time.Now()
	if kill {
		// Let the forward reach X's socket before X dies (X is frozen: it cannot answer either way).
		time.Sleep(200 * time.Millisecond)
		fault, since = "kill", time.Now()
		X.Kill()
		c.note("SIGKILL %s", X.Config.NodeID)
	} else {
		defer X.Cont()
	}
	a := <-done
	took := a.at.Sub(since)
	t.Logf("consume through %s: %d %s, %v after the %s", Y.Config.NodeID, a.status, a.body, took.Round(time.Millisecond), fault)
	if a.status != http.StatusServiceUnavailable || !strings.Contains(a.body, "unavailable") || !strings.Contains(a.body, why) {
		t.Errorf("consume forwarded to the lost leader: %d %s, want 503 unavailable, %q", a.status, a.body, why)
	}
	if took > deadline/4 {
		t.Errorf("consume forwarded to the lost leader answered %v after the %s; want well within the %v deadline", took, fault, deadline)
	}
}
