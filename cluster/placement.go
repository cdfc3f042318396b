package cluster

import (
	"encoding/binary"
	"hash/fnv"
	"sort"
)

// Placement: the desired replicas of Raft group g (and so of its partitions) are the R alive
// nodes with the highest rendezvous (highest-random-weight) score hash(g, node id). Every
// node computes the same set from the same membership, adding or removing one node moves
// only the groups whose top R it enters or leaves, and no coordination is needed.
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

// Desired returns the desired replicas of group g among nodes, best first: the r nodes
// with the highest score (all of them when fewer than r), those retiring after all others.
// Ties break by node id.
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

// BootstrapReplicas is the first configuration of group g in a new cluster, written by
// the bootstrapping node self alone: the desired replicas, with self in place of the last one
// when it is not among them. The others hold no Raft state yet and only follow a leader, so
// a configuration without the node that wrote it could never elect one; the reconciler then
// moves the group to its desired replicas (the group is empty, so at no cost).
func BootstrapReplicas(g uint32, nodes []NodeMeta, r int, self string) []NodeMeta {
	out := Desired(g, nodes, r)
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
