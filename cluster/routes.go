package cluster

import (
	"context"
	"sync/atomic"

	"github.com/shardkeeper/shardkeeper/persistence"
)

// The routing table: which node's HTTP API leads each range of partitions, served to clients
// (GET /v1/cluster/routes) so that they can send each request where it runs without a
// forward. Redis Cluster's clients keep its slot map the same way; as there, a stale table
// costs one forward (the answer then names the leader, see Forwarded) and never a wrong
// answer, since the node that receives a request routes it by Raft's word, not the client's.

// Routes is the routing table as this node knows it.
type Routes struct {
	// Epoch numbers the map of partitions to Raft groups: it grows with every split and merge
	// this node learns of, and never falls; it changes only when the map, or the generation of
	// a group in it, does. It is the sum, over the partitions, of the highest generation of
	// any group known to have held each, plus the number of groups born by splits (which
	// counts the splits of releases before generations).
	Epoch uint64 `json:"epoch"`
	// Partitions is P: an actor (kind, id) lives in partition FNV-1a-64(kind, 0x00, id) mod P.
	Partitions int     `json:"partitions"`
	Groups     []Route `json:"groups"`
}

// Route is one Raft group's entry: its partitions [First, End) and its leader.
type Route struct {
	Group uint32 `json:"group"`
	First uint32 `json:"first"`
	End   uint32 `json:"end"`
	// Term is the leader's Raft term: of two answers naming different leaders, the higher
	// term's is the newer.
	Term uint64 `json:"term"`
	// Leader is the leader's node id, LeaderHTTP the address of its HTTP API; both "" while
	// the group has no leader this node knows of.
	Leader     string `json:"leader"`
	LeaderHTTP string `json:"leader_http"`
}

// Routes returns the routing table: each group's leader as Leader reports it (this node's
// Raft instance, or the leader's gossip), with the HTTP address the leader gossips.
func (d *Directory) Routes() Routes {
	live := map[string]Member{} // by server id
	for _, m := range d.cfg.Members.Members() {
		if !m.Gone() {
			live[m.ServerID] = m
		}
	}
	rt := Routes{Partitions: d.layout.Partitions, Epoch: d.epoch.Load()}
	for _, g := range d.KnownGroups() {
		r := Route{Group: g.ID, First: g.First, End: g.End}
		leader := d.Leader(g.First)
		if m, ok := live[leader]; ok && leader != "" {
			r.Leader, r.LeaderHTTP = m.ID, m.HTTP
		}
		if r.Leader != "" {
			if in := d.cfg.Host.Info(g.ID); in.Leader == leader {
				r.Term = in.Term
			} else if rec, ok := d.record(g.ID); ok && rec.Leader == leader {
				r.Term = rec.Term
			}
		}
		rt.Groups = append(rt.Groups, r)
	}
	return rt
}

// Forwarded records where a request was forwarded: the partition of the actor and the HTTP
// address of the node that ran it (the last such call, when a request calls several actors).
// The HTTP layer puts one in each request's context (WithForwardNote) and answers with it, so
// that a client that keeps the routing table learns, from the one answer that took a detour,
// which node leads that partition now.
type Forwarded struct{ last atomic.Pointer[forward] }

type forward struct {
	httpAddr  string
	partition uint32
}

// Leader returns the partition and the HTTP address recorded; ok is false if the request was
// not forwarded.
func (f *Forwarded) Leader() (partition uint32, httpAddr string, ok bool) {
	if p := f.last.Load(); p != nil {
		return p.partition, p.httpAddr, true
	}
	return 0, "", false
}

type forwardedKey struct{}

// WithForwardNote returns ctx carrying a fresh Forwarded, and that Forwarded.
func WithForwardNote(ctx context.Context) (context.Context, *Forwarded) {
	f := &Forwarded{}
	return context.WithValue(ctx, forwardedKey{}, f), f
}

// noteForwarded records in ctx's Forwarded, if it has one, that the call of an actor of
// partition p ran at httpAddr.
func noteForwarded(ctx context.Context, p uint32, httpAddr string) {
	if f, ok := ctx.Value(forwardedKey{}).(*Forwarded); ok && httpAddr != "" {
		f.last.Store(&forward{httpAddr: httpAddr, partition: p})
	}
}

// KnownGroups returns the cluster's groups as this node knows them, each with its range,
// first partition first.
func (d *Directory) KnownGroups() []persistence.Group {
	table := *d.table.Load()
	var out []persistence.Group
	for first := 0; first < len(table); {
		end := first + 1
		for end < len(table) && table[end] == table[first] {
			end++
		}
		if table[first] != noOwner { // partitions no known group holds
			out = append(out, persistence.Group{ID: table[first], First: uint32(first), End: uint32(end)})
		}
		first = end
	}
	return out
}
