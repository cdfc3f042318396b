package client

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/services/chain"
	"github.com/shardkeeper/shardkeeper/services/device"
	"github.com/shardkeeper/shardkeeper/services/oracle"
	"github.com/shardkeeper/shardkeeper/services/servers"
	"github.com/shardkeeper/shardkeeper/test/await"
)

// The client's names of the actors and its partition function are the server's: a mismatch
// would send every request to the wrong node (answered all the same, through a forward).
func TestRoutingNamesAndHashAreTheServers(t *testing.T) {
	for mine, theirs := range map[string]string{kindDevices: device.KindName, kindServers: servers.KindName,
		kindNonces: oracle.KindName, kindChain: chain.KindName} {
		if mine != theirs {
			t.Errorf("client kind %q, server kind %q", mine, theirs)
		}
		for _, n := range []int{1, 16, 4096, 16384} {
			for i := range 64 {
				id := fmt.Sprintf("id-%d", i)
				if got, want := partitionOf(actor{mine, id}, n), actors.PartitionOf(theirs, id, n); got != want {
					t.Fatalf("partition of (%s, %s) among %d: client %d, server %d", mine, id, n, got, want)
				}
			}
		}
	}
	n := oracle.RandomShard() + "_" + base64.RawURLEncoding.EncodeToString(make([]byte, 32)) // an issued nonce's shape
	shard, ok := oracle.ShardOf(n)
	if a := nonceActor(n); !ok || a == nil || a.id != shard {
		t.Fatalf("nonce %s: client actor %v, server shard %q", n, a, shard)
	}
}

// fakeNode answers the routing table and any other request with its own name, with
// Shardkeeper-Leader and Shardkeeper-Partition set when hint returns an address (a forward).
type fakeNode struct {
	name   string
	srv    *httptest.Server
	routes func() Routes
	hint   func(path string) (addr string, partition uint32)

	mu   sync.Mutex
	seen []string
}

func newFakeNode(t *testing.T, name string) *fakeNode {
	f := &fakeNode{name: name}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/cluster/routes" {
			_ = json.NewEncoder(w).Encode(f.routes())
			return
		}
		f.mu.Lock()
		f.seen = append(f.seen, r.URL.Path)
		f.mu.Unlock()
		if f.hint != nil {
			if h, p := f.hint(r.URL.Path); h != "" {
				w.Header().Set(leaderHeader, h)
				w.Header().Set(partitionHeader, fmt.Sprint(p))
			}
		}
		_, _ = w.Write([]byte(`{"servers":[]}`))
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeNode) addr() string { return strings.TrimPrefix(f.srv.URL, "http://") }

func (f *fakeNode) paths() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen...)
}

// With the table, each request goes to the leader of its actor's partition; an answer that
// names another leader (the table was stale) moves that partition's next requests there.
func TestRoutingSendsToTheLeader(t *testing.T) {
	a, b := newFakeNode(t, "a"), newFakeNode(t, "b")
	const parts = 16
	var mu sync.Mutex
	second := b // leader of group 1
	table := func() Routes {
		mu.Lock()
		defer mu.Unlock()
		return Routes{Partitions: parts, Groups: []Route{
			{Group: 0, First: 0, End: 8, Leader: "a", LeaderHTTP: a.addr()},
			{Group: 1, First: 8, End: 16, Leader: second.name, LeaderHTTP: second.addr()}}}
	}
	a.routes, b.routes = table, table
	c, err := New([]string{a.srv.URL, b.srv.URL}, WithRouting())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.RefreshRoutes(ctx); err != nil {
		t.Fatal(err)
	}
	// Registries of each half of the partitions.
	var inA, inB string
	for i := 0; inA == "" || inB == ""; i++ {
		name := fmt.Sprintf("reg-%d", i)
		if partitionOf(actor{kindServers, name}, parts) < 8 {
			inA = name
		} else {
			inB = name
		}
	}
	for range 5 {
		for _, reg := range []string{inA, inB} {
			if _, err := c.ListServers(ctx, reg); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := a.paths(); len(got) != 5 || got[0] != "/v1/servers/"+inA {
		t.Fatalf("a served %v, want the 5 lists of %s", got, inA)
	}
	if got := b.paths(); len(got) != 5 || got[0] != "/v1/servers/"+inB {
		t.Fatalf("b served %v, want the 5 lists of %s", got, inB)
	}

	// An answer about another actor's partition (a request that called several) is not
	// taken for this one's: the next call still goes to b (and so does the table the client
	// refreshes in the background).
	b.hint = func(string) (string, uint32) { return a.addr(), partitionOf(actor{kindServers, inA}, parts) }
	if _, err := c.ListServers(ctx, inB); err != nil {
		t.Fatal(err)
	}
	for c.routes.refreshing.Load() { // the background refresh that hint started ends first
		runtime.Gosched()
	}
	// Leadership of group 1 moved to a: b forwards, and says so (the table the client
	// refreshes in the background then says so too).
	mu.Lock()
	second = a
	mu.Unlock()
	b.hint = func(string) (string, uint32) { return a.addr(), partitionOf(actor{kindServers, inB}, parts) }
	if _, err := c.ListServers(ctx, inB); err != nil {
		t.Fatal(err)
	}
	b.hint = nil
	if _, err := c.ListServers(ctx, inB); err != nil {
		t.Fatal(err)
	}
	if got := b.paths(); len(got) != 7 {
		t.Fatalf("b served %d requests, want 7: the wrong partition's hint was not taken, the right one's was", len(got))
	}
	if got := a.paths(); len(got) != 6 || got[5] != "/v1/servers/"+inB {
		t.Fatalf("a served %v, want the list of %s after the hint", got, inB)
	}
}

// Without WithRouting, requests go round robin whatever the answers say.
func TestNoRoutingRoundRobin(t *testing.T) {
	a, b := newFakeNode(t, "a"), newFakeNode(t, "b")
	a.hint = func(string) (string, uint32) { return b.addr(), 0 }
	c, err := New([]string{a.srv.URL, b.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := c.ListServers(context.Background(), "r"); err != nil {
			t.Fatal(err)
		}
	}
	if len(a.paths()) != 2 || len(b.paths()) != 2 {
		t.Fatalf("a served %d, b %d; want 2 each", len(a.paths()), len(b.paths()))
	}
}

// Work that may run on any actor of its kind (issuing a nonce) goes to the leaders in turn; a
// leader that does not answer is dropped from that turn, and the call goes on to a node that
// does.
func TestRoutingIssuesToLeaders(t *testing.T) {
	a, b, c := newFakeNode(t, "a"), newFakeNode(t, "b"), newFakeNode(t, "c")
	var bGone atomic.Bool
	table := func() Routes {
		second := Route{Group: 1, First: 8, End: 16, Term: 1, Leader: "b", LeaderHTTP: b.addr()}
		if bGone.Load() { // a took over b's group
			second = Route{Group: 1, First: 8, End: 16, Term: 2, Leader: "a", LeaderHTTP: a.addr()}
		}
		return Routes{Partitions: 16, Groups: []Route{
			{Group: 0, First: 0, End: 8, Term: 1, Leader: "a", LeaderHTTP: a.addr()}, second}}
	}
	a.routes, b.routes, c.routes = table, table, table
	cl, err := New([]string{c.srv.URL, a.srv.URL, b.srv.URL}, WithRouting())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := cl.RefreshRoutes(ctx); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if _, err := cl.IssueNonce(ctx, "org"); err != nil {
			t.Fatal(err)
		}
	}
	if len(a.paths()) != 2 || len(b.paths()) != 2 || len(c.paths()) != 0 {
		t.Fatalf("issues: a %d, b %d, c %d; want 2, 2 and none to c, which leads nothing", len(a.paths()), len(b.paths()), len(c.paths()))
	}
	b.srv.Close() // b is gone; the client's table names it until it learns otherwise
	bGone.Store(true)
	for range 4 {
		if _, err := cl.IssueNonce(ctx, "org"); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(a.paths()) + len(c.paths()); got != 6 {
		t.Fatalf("after b went away, a and c answered %d issues in all, want 6 (the 2 before and the 4 since)", got)
	}
	if len(c.paths()) > 1 {
		t.Fatalf("c answered %d issues: b's failure should drop it from the leaders once, not each time", len(c.paths()))
	}
}

// A node that comes to lead a group answers no forward that would tell the client, so a
// table grown old is refreshed: the new leader then gets its turn at work any leader may run.
func TestRoutingRefreshesAnOldTable(t *testing.T) {
	a, c := newFakeNode(t, "a"), newFakeNode(t, "c")
	var cLeads atomic.Bool
	table := func() Routes {
		second := Route{Group: 1, First: 8, End: 16, Term: 1, Leader: "a", LeaderHTTP: a.addr()}
		if cLeads.Load() { // leadership balancing gave c the second group
			second = Route{Group: 1, First: 8, End: 16, Term: 2, Leader: "c", LeaderHTTP: c.addr()}
		}
		return Routes{Partitions: 16, Groups: []Route{
			{Group: 0, First: 0, End: 8, Term: 1, Leader: "a", LeaderHTTP: a.addr()}, second}}
	}
	a.routes, c.routes = table, table
	cl, err := New([]string{a.srv.URL, c.srv.URL}, WithRouting())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Now()
	cl.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	ctx := context.Background()
	if err := cl.RefreshRoutes(ctx); err != nil {
		t.Fatal(err)
	}
	cLeads.Store(true)
	for range 4 {
		if _, err := cl.IssueNonce(ctx, "org"); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(c.paths()); n != 0 {
		t.Fatalf("c answered %d issues with the table it had: it led nothing then", n)
	}
	mu.Lock()
	now = now.Add(routesMaxAge)
	mu.Unlock()
	await.True(t, 5*time.Second, "an issue sent to c, the new leader", func() bool {
		if _, err := cl.IssueNonce(ctx, "org"); err != nil {
			t.Fatal(err)
		}
		return len(c.paths()) > 0
	})
}
