package actors

import (
	"sync"

	"github.com/shardkeeper/shardkeeper/persistence"
)

// group is the runtime's state for one Raft group on this node: the partitions whose log it
// is (persistence.Layout), the proposer that merges their batches into commands, and the
// gate that verifies this node still leads them before a read-only reply leaves. Leadership
// is the group's, so all of its partitions gain and lose it together.
type group struct {
	span  persistence.Group // its id and the partitions whose log it is
	rt    *Runtime
	parts []*partition

	proposer proposer
	reads    readGate
}

func newGroup(rt *Runtime, span persistence.Group, parts []*partition) *group {
	g := &group{span: span, rt: rt, parts: parts}
	g.proposer.grp = g
	g.proposer.changed = sync.NewCond(&g.proposer.mu)
	g.reads.grp = g
	for _, p := range parts {
		p.grp = g
	}
	return g
}
