package cluster

import (
	"slices"

	"github.com/hashicorp/raft"
)

// Leaving the cluster for good. A node told to stop marks itself retiring (NodeMeta.Retiring)
// and, before it exits, waits until no Raft group it replicates still counts on it: the
// placement ranks retiring nodes last (Placement), so the groups' leaders add a replica on
// another node, promote it once it has caught up and only then remove the retiring one (Decide,
// rules 3–5) — every group keeps R voters throughout, and a second node stopped as soon as the
// first has exited finds every group whole. Consul removes a leaving server from the Raft
// peers before it exits for the same reason: without it, two departures inside the dead-member
// grace take the quorum of every group they shared.

// GroupConfig is a Raft group's latest configuration as this node knows it.
type GroupConfig struct {
	ID      uint32
	Servers []raft.Server
}

// AwaitingHandOff returns the groups a retiring node (self, in alive with the other members
// that are not gone) waits for before it exits: those whose configuration lists self while
// the placement wants it elsewhere, and those it votes in whose other voters that stay (alive
// and not retiring) are fewer than a majority — its exit could take their quorum — while some
// member that is not retiring is left to repair them (the placement adds a replica, the
// dead-member grace removes a departed voter). Retiring voters do not count as staying: two
// nodes told to stop at once decide independently, and each counting on the other would let
// both go. When every member left is retiring, the cluster is stopping as a whole and nothing
// is waited for.
func AwaitingHandOff(configs []GroupConfig, alive []NodeMeta, replicas int, self NodeMeta) []uint32 {
	if !slices.ContainsFunc(alive, func(m NodeMeta) bool { return !m.Retiring && m.ID != self.ID }) {
		return nil
	}
	up := map[string]bool{} // members that stay
	for _, m := range alive {
		up[m.ServerID] = !m.Retiring
	}
	ids := make([]uint32, len(configs))
	for i, c := range configs {
		ids[i] = c.ID
	}
	placement := Placement(ids, alive, replicas)
	var out []uint32
	for _, c := range configs {
		listed, voter, voters, othersUp := false, false, 0, 0
		for _, s := range c.Servers {
			me := string(s.ID) == self.ServerID
			listed = listed || me
			if s.Suffrage != raft.Voter {
				continue
			}
			voters++
			switch {
			case me:
				voter = true
			case up[string(s.ID)]:
				othersUp++
			}
		}
		if !listed {
			continue
		}
		desired := slices.ContainsFunc(placement[c.ID], func(d NodeMeta) bool { return d.ID == self.ID })
		if !desired || (voter && othersUp < voters/2+1) {
			out = append(out, c.ID)
		}
	}
	return out
}
