package client

import (
	"context"
	"hash/fnv"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Routing: with WithRouting, the client keeps the cluster's routing table
// (GET /v1/cluster/routes) and sends each request for one actor straight to the node that
// leads the actor's partition, saving the forward any other node would make (Redis Cluster's
// clients keep its slot map the same way). The table may be stale at any time: the node that
// receives a request routes it by Raft's word, so a stale entry costs a forward, never a
// wrong answer; such an answer names the leader (Shardkeeper-Leader), which the client takes
// at once, and it refreshes the whole table in the background, at most once a second. A
// table older than routesMaxAge is refreshed too: a node that has come to lead a group
// answers no forward that would tell the client, and would otherwise never be sent the work
// that may run on any leader.

// WithRouting makes the client send each request for one actor to the leader of its
// partition, as the routing table says. Use it when the client reaches every node directly
// (the addresses nodes advertise); behind a load balancer, leave it off and the nodes forward.
// The table is fetched on first use (RefreshRoutes fetches it at once); until then, and for
// calls that name no actor, requests go round robin over the base URLs.
func WithRouting() Option { return func(c *Client) { c.routes = &routes{} } }

// The actors a request runs on, as the server names them: an actor (kind, id) lives in
// partition FNV-1a-64(kind, 0x00, id) mod P.
const (
	kindDevices = "device-registry"
	kindServers = "server-registry"
	kindNonces  = "nonce-oracle"
	kindChain   = "chain"
)

// actor names the actor a call runs on; a nil *actor names none.
type actor struct{ kind, id string }

// nonceActor is the oracle shard that issued nonce (its first two characters, before '_'),
// or nil when nonce does not have that shape (the server then answers without an actor).
func nonceActor(nonce string) *actor {
	if len(nonce) < 3 || nonce[2] != '_' {
		return nil
	}
	return &actor{kindNonces, nonce[:2]}
}

// partitionOf is the server's partition of actor a among n.
func partitionOf(a actor, n int) uint32 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(a.kind))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(a.id))
	return uint32(h.Sum64() % uint64(n))
}

// Routes is the routing table as GET /v1/cluster/routes serves it.
type Routes struct {
	Epoch      uint64  `json:"epoch"`
	Partitions int     `json:"partitions"`
	Groups     []Route `json:"groups"`
}

// Route is one Raft group: its partitions [First, End) and its leader ("" while none).
type Route struct {
	Group      uint32 `json:"group"`
	First      uint32 `json:"first"`
	End        uint32 `json:"end"`
	Term       uint64 `json:"term"`
	Leader     string `json:"leader"`
	LeaderHTTP string `json:"leader_http"`
}

// GetRoutes reads the routing table from one node.
func (c *Client) GetRoutes(ctx context.Context) (*Routes, error) {
	var out Routes
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/cluster/routes", idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RefreshRoutes fetches the routing table now (WithRouting).
func (c *Client) RefreshRoutes(ctx context.Context) error {
	if c.routes == nil {
		return nil
	}
	rt, err := c.GetRoutes(ctx)
	if err != nil {
		return err
	}
	c.routes.set(rt, c.scheme(), c.now())
	return nil
}

// scheme is the scheme of the base URLs, which the nodes' advertised addresses are reached
// with too.
func (c *Client) scheme() string {
	if u, err := url.Parse(c.bases[0]); err == nil {
		return u.Scheme
	}
	return "http"
}

// routes is the client's copy of the routing table.
type routes struct {
	mu         sync.Mutex
	partitions int
	groups     []Route  // sorted by First
	bases      []string // per group, its leader's base URL ("" unknown)
	leaders    []string // the distinct leaders' base URLs
	next       atomic.Uint64

	refreshing atomic.Bool
	lastFetch  time.Time // when the last refresh started
	fetched    time.Time // when the table in use was fetched
}

// routesMaxAge is how old a routing table may grow before a call refreshes it.
const routesMaxAge = 10 * time.Second

func (r *routes) set(rt *Routes, scheme string, now time.Time) {
	if rt.Partitions <= 0 {
		return
	}
	groups := append([]Route(nil), rt.Groups...)
	sort.Slice(groups, func(i, j int) bool { return groups[i].First < groups[j].First })
	r.mu.Lock()
	defer r.mu.Unlock()
	// A node that lags may answer with an older leader than one held: of two entries for the
	// same group, the higher term's stays.
	held := map[[2]uint32]Route{}
	if r.partitions == rt.Partitions {
		for _, g := range r.groups {
			held[[2]uint32{g.First, g.End}] = g
		}
	}
	bases := make([]string, len(groups))
	seen := map[string]bool{}
	var leaders []string
	for i, g := range groups {
		if h, ok := held[[2]uint32{g.First, g.End}]; ok && h.Term > g.Term {
			groups[i] = h
			g = h
		}
		if g.LeaderHTTP == "" {
			continue
		}
		bases[i] = scheme + "://" + g.LeaderHTTP
		if !seen[bases[i]] {
			seen[bases[i]] = true
			leaders = append(leaders, bases[i])
		}
	}
	r.partitions, r.groups, r.bases, r.leaders, r.fetched = rt.Partitions, groups, bases, leaders, now
}

// group returns the index of the group holding partition p, or -1; r.mu is held.
func (r *routes) group(p uint32) int {
	i := sort.Search(len(r.groups), func(i int) bool { return r.groups[i].End > p })
	if i < len(r.groups) && r.groups[i].First <= p {
		return i
	}
	return -1
}

// base returns the base URL of the leader of a's partition, "" when unknown.
func (r *routes) base(a actor) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.partitions == 0 {
		return ""
	}
	if i := r.group(partitionOf(a, r.partitions)); i >= 0 {
		return r.bases[i]
	}
	return ""
}

// anyLeader returns, in turn, the base URL of each node that leads a group ("" when none is
// known): work that may run on any actor of a kind (issuing a nonce) runs there without a
// forward, the node picking an actor it leads.
func (r *routes) anyLeader() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.leaders) == 0 {
		return ""
	}
	return r.leaders[(r.next.Add(1)-1)%uint64(len(r.leaders))]
}

// learn records the leader an answer named for a's partition. An answer about another actor's
// partition (a request that called several) teaches nothing about a's.
func (r *routes) learn(a actor, f forwarded, scheme string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.partitions == 0 {
		return
	}
	p := partitionOf(a, r.partitions)
	if f.partition != int64(p) {
		return
	}
	if i := r.group(p); i >= 0 {
		r.bases[i] = scheme + "://" + f.addr
		r.groups[i].Leader, r.groups[i].LeaderHTTP = "", f.addr
	}
}

// forget drops base as a leader (it did not answer).
func (r *routes) forget(base string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.bases {
		if r.bases[i] == base {
			r.bases[i] = ""
		}
	}
	r.leaders = slices.DeleteFunc(r.leaders, func(l string) bool { return l == base })
}

// old reports whether the table in use was fetched routesMaxAge or more before now.
func (r *routes) old(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return now.Sub(r.fetched) >= routesMaxAge
}

// due reports whether a refresh may start now (at most one at a time, one a second).
func (r *routes) due(now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now.Sub(r.lastFetch) < time.Second || !r.refreshing.CompareAndSwap(false, true) {
		return false
	}
	r.lastFetch = now
	return true
}

// refreshSoon fetches the table in the background when one is due.
func (c *Client) refreshSoon() {
	if c.routes == nil || !c.routes.due(c.now()) {
		return
	}
	go func() {
		defer c.routes.refreshing.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.RefreshRoutes(ctx)
	}()
}

// On an answer a node got by forwarding the request, leaderHeader names the HTTP address of
// the node that ran it and partitionHeader the partition of that actor (the last forwarded,
// when the request called several actors).
const (
	leaderHeader    = "Shardkeeper-Leader"
	partitionHeader = "Shardkeeper-Partition"
)

// forwarded is what an answer says of a forward; addr is "" when it was not forwarded, and
// partition -1 when it does not say which.
type forwarded struct {
	addr      string
	partition int64
}

func forwardedOf(h http.Header) forwarded {
	f := forwarded{addr: h.Get(leaderHeader), partition: -1}
	if p, err := strconv.ParseUint(h.Get(partitionHeader), 10, 32); err == nil {
		f.partition = int64(p)
	}
	return f
}
