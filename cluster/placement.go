package cluster

import (
	"encoding/binary"
	"hash/fnv"
	"sort"
)

// Placement: the desired replicas of partition p are the R alive nodes with the highest
// rendezvous (highest-random-weight) score hash(p, node id). Every node computes the same set
// from the same membership, adding or removing one node moves only the partitions whose top R
// it enters or leaves, and no coordination is needed.

func score(p uint32, nodeID string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write(binary.BigEndian.AppendUint32(nil, p))
	_, _ = h.Write([]byte(nodeID))
	// FNV's low bits mix poorly for short inputs; finish with a 64-bit mixer (splitmix64).
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Desired returns the desired replicas of partition p among nodes, best first: the r nodes
// with the highest score (all of them when fewer than r). Ties break by node id.
func Desired(p uint32, nodes []NodeMeta, r int) []NodeMeta {
	out := append([]NodeMeta(nil), nodes...)
	sort.Slice(out, func(i, j int) bool {
		si, sj := score(p, out[i].ID), score(p, out[j].ID)
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
