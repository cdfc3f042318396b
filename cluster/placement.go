package cluster

import (
	"cmp"
	"encoding/binary"
	"hash/fnv"
	"slices"
	"sort"
)

// Placement: each Raft group (and so each of its partitions) ranks the alive nodes by a
// rendezvous (highest-random-weight) score hash(g, node id), and its desired replicas are the
// R best of its ranking that do not already hold their share of the replicas (Placement).
// Every node computes the same sets from the same membership and groups, adding or removing
// one node moves few groups, and no coordination is needed.
//
// A node that is retiring (NodeMeta.Retiring: it was told to stop for good) ranks after every
// node that is not, so its replicas move to others before it exits, as long as others are left
// to take them; when fewer than R are, the retiring nodes with the highest scores stay desired,
// and a cluster stopping as a whole (or a 3-node cluster losing one node) moves nothing.

func score(g uint32, nodeID string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write(binary.BigEndian.AppendUint32(nil, g))
	_, _ = h.Write([]byte(nodeID))
	// FNV's low bits mix poorly for short inputs; finish with a 64-bit mixer (splitmix64).
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Desired returns group g's ranking of nodes, best first, cut to r: the r nodes with the
// highest score (all of them when fewer than r), those retiring after all others. Ties break
// by node id. Placement walks it; alone, it is where a node that knows nothing else about
// a group looks for its replicas.
func Desired(g uint32, nodes []NodeMeta, r int) []NodeMeta {
	out := append([]NodeMeta(nil), nodes...)
	sort.Slice(out, func(i, j int) bool {
		if out[i].Retiring != out[j].Retiring {
			return !out[i].Retiring
		}
		si, sj := score(g, out[i].ID), score(g, out[j].ID)
		if si != sj {
			return si > sj
		}
		return out[i].ID < out[j].ID
	})
	if len(out) > r {
		out = out[:r]
	}
	return out
}

// Placement returns the desired replicas of each of groups among nodes. Groups are placed
// in increasing id order, each on the R nodes that hold the fewest replicas so far, its
// rendezvous ranking (Desired) choosing among equals; nodes that are retiring come after all
// others while at least R are not. So replica counts never differ by more than one from node
// to node: rendezvous alone spreads a few groups unevenly (nine groups of three replicas on
// nine nodes leave some node with none, which could then lead none). Every node computes the
// same placement from the same groups and members.
func Placement(groups []uint32, nodes []NodeMeta, r int) map[uint32][]NodeMeta {
	groups = slices.Clone(groups)
	slices.Sort(groups)
	r = min(r, len(nodes))
	out := make(map[uint32][]NodeMeta, len(groups))
	load := map[string]int{}
	for _, g := range groups {
		ranking := Desired(g, nodes, len(nodes))
		rank := make(map[string]int, len(ranking))
		for i, n := range ranking {
			rank[n.ID] = i
		}
		slices.SortStableFunc(ranking, func(a, b NodeMeta) int {
			if a.Retiring != b.Retiring {
				return cmp.Compare(rank[a.ID], rank[b.ID]) // Desired puts retiring nodes last
			}
			if c := cmp.Compare(load[a.ID], load[b.ID]); c != 0 {
				return c
			}
			return cmp.Compare(rank[a.ID], rank[b.ID])
		})
		picked := ranking[:r]
		for _, n := range picked {
			load[n.ID]++
		}
		out[g] = picked
	}
	return out
}

// BootstrapReplicas is the first configuration of group g (one of groups) in a new cluster,
// written by the bootstrapping node self alone: the desired replicas (Placement), with self in place of the last one
// when it is not among them. The others hold no Raft state yet and only follow a leader, so
// a configuration without the node that wrote it could never elect one; the reconciler then
// moves the group to its desired replicas (the group is empty, so at no cost).
func BootstrapReplicas(g uint32, groups []uint32, nodes []NodeMeta, r int, self string) []NodeMeta {
	out := slices.Clone(Placement(groups, nodes, r)[g])
	for _, d := range out {
		if d.ID == self {
			return out
		}
	}
	for _, n := range nodes {
		if n.ID == self && len(out) > 0 {
			out[len(out)-1] = n
		}
	}
	return out
}
