package cluster

import (
	"slices"

	"github.com/hashicorp/raft"
)

// Leaving the cluster for good. A node told to stop marks itself leaving (NodeMeta.Leaving)
// and, before it exits, waits until no Raft group it replicates still counts on it: the
// placement ranks leaving nodes last (Desired), so the groups' leaders add a replica on
// another node, promote it once it has caught up and only then remove the leaving one (Decide,
// rules 3–5) — every group keeps R voters throughout, and a second node stopped as soon as the
// first has exited finds every group whole. Consul removes a leaving server from the Raft
// peers before it exits for the same reason: without it, two departures inside the dead-member
// grace take the quorum of every group they shared.

// GroupConfig is a Raft group's latest configuration as this node knows it.
type GroupConfig struct {
	ID      uint32
	Servers []raft.Server
}

// AwaitingHandOff returns the groups whose configuration still lists self although the
// placement over alive (which holds self, marked leaving) no longer wants it there: those a
// leaving node waits for before it exits. A group that still desires self — when too few
// other nodes are left to take its replica — does not wait for it.
func AwaitingHandOff(configs []GroupConfig, alive []NodeMeta, replicas int, self NodeMeta) []uint32 {
	var out []uint32
	for _, c := range configs {
		listed := slices.ContainsFunc(c.Servers, func(s raft.Server) bool { return string(s.ID) == self.ServerID })
		if !listed {
			continue
		}
		desired := slices.ContainsFunc(Desired(c.ID, alive, replicas), func(d NodeMeta) bool { return d.ID == self.ID })
		if !desired {
			out = append(out, c.ID)
		}
	}
	return out
}
