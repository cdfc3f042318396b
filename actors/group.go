package actors

import (
	"slices"
	"sync"
	"time"

	"github.com/shardkeeper/shardkeeper/persistence"
)

// group is the runtime's state for one Raft group on this node: the partitions whose log it
// is (persistence.Layout), the proposer that merges their batches into commands, and the
// gate that verifies this node still leads them before a read-only reply leaves. Leadership
// is the group's, so all of its partitions gain and lose it together, and one Barrier per
// gain readies all of them, however many there are.
type group struct {
	// span is the group's id and the range it was created with (a group a split created
	// may be known by its id alone, when its leadership was reported first); a split shrinks
	// a group's range and a merge grows it, so the partitions it holds now are parts. Only
	// its id and first partition (which never changes) are relied on; commands name the
	// partitions of their ops (persistence.Command.EncodeFor).
	span persistence.Group
	rt   *Runtime

	// mu serializes the group's leadership transitions: each notification, the opening of
	// the partitions after the Barrier, shutdown, and the partitions moving in and out
	// (Runtime.Regroup) each apply to every partition under it, so the partitions always
	// reflect the same, latest, notification. Lock order: mu, then a partition's mu.
	mu     sync.Mutex
	parts  []*partition
	gen    uint64 // counts leadership notifications and Close, to drop stale barrier results
	leader bool   // the latest notification
	ready  bool   // the partitions opened after the latest gain's Barrier
	closed bool   // the runtime closed: no notification opens anything any more

	proposer proposer
	reads    readGate
}

func newGroup(rt *Runtime, span persistence.Group) *group {
	g := &group{span: span, rt: rt}
	g.proposer.grp = g
	g.proposer.changed = sync.NewCond(&g.proposer.mu)
	g.reads.grp = g
	return g
}

// release takes partition p out of the group: its activations stop, and calls are refused
// (NotApplied) until the group it moves to takes it.
func (g *group) release(p *partition) {
	g.mu.Lock()
	defer g.mu.Unlock()
	p.setLeader(false)
	for i, q := range g.parts {
		if q == p {
			g.parts = append(g.parts[:i], g.parts[i+1:]...)
			break
		}
	}
}

// take makes p one of the group's partitions, in the state of the group's latest
// notification: open if the group is led here and ready, waiting for the Barrier if led,
// refusing calls otherwise.
func (g *group) take(p *partition) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if slices.Contains(g.parts, p) {
		return
	}
	g.parts = append(g.parts, p)
	p.grp.Store(g)
	if g.closed {
		p.close()
		return
	}
	if g.leader {
		p.setLeader(true)
	}
	if g.ready {
		p.open(g.rt.repl.LastTime(g.span.ID))
	}
}

// setLeader records a leadership change reported by the replicator. Either way every
// partition leaves the ready state; a gain then readies them all in the background.
func (g *group) setLeader(leader bool) {
	g.mu.Lock()
	if g.closed {
		// A report that arrives while the node shuts down (the host closes after the
		// runtime) must not start activations over a store about to close.
		g.mu.Unlock()
		return
	}
	g.gen++
	gen := g.gen
	g.leader, g.ready = leader, false
	for _, p := range g.parts {
		p.setLeader(leader)
	}
	g.mu.Unlock()
	if leader {
		go g.becomeReady(gen)
	}
}

// current reports whether gen is still the latest leadership notification.
func (g *group) current(gen uint64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.gen == gen
}

// becomeReady waits until every committed entry of the group is applied, then opens its
// partitions, unless a later notification (a loss, say) came meanwhile: that one decides.
func (g *group) becomeReady(gen uint64) {
	// Commands of the previous leadership still in flight must resolve first, so that the
	// Barrier below orders after them.
	g.proposer.waitResolved()
	for attempt := 0; g.current(gen); attempt++ {
		err := g.rt.repl.Barrier(g.span.ID, g.rt.opts.RequestTimeout)
		if err == nil {
			g.open(gen)
			return
		}
		if !g.current(gen) {
			return
		}
		g.rt.logger.Warn("barrier after becoming leader failed", "group", g.span.ID, "attempt", attempt, "error", err)
		time.Sleep(min(time.Duration(attempt+1)*50*time.Millisecond, time.Second))
	}
}

// open readies every partition after the Barrier of notification gen, if it is still the
// latest. The check and the opening share g.mu with setLeader, so a loss reported while the
// Barrier ran always wins: no partition opens, no scheduler starts.
func (g *group) open(gen uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gen != gen {
		return // leadership changed meanwhile; a newer notification decides
	}
	g.ready = true
	last := g.rt.repl.LastTime(g.span.ID)
	for _, p := range g.parts {
		p.open(last)
	}
}

// close retires every partition for shutdown; a Barrier still in flight opens none of them.
func (g *group) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gen++
	g.leader, g.ready, g.closed = false, false, true
	for _, p := range g.parts {
		p.close()
	}
}
