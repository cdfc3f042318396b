package actors

import "sync"

// readGate holds replies that depend on no uncommitted write until this node has proven it
// still leads the partition's Raft group (raft VerifyLeader, issued after the reply was produced). Without
// it a leader that was paused or cut off — and already replaced — would answer reads from
// state it no longer owns. Replies carrying writes need no check: their commit proves it.
//
// One verification is in flight per group; replies arriving meanwhile wait for the next
// one, so every reply is covered by a verification that started after it was produced.
type readGate struct {
	grp *group

	mu       sync.Mutex
	waiting  []func(error)
	inflight bool
}

// wait calls done once leadership is verified (nil) or could not be (ErrUnavailable).
func (g *readGate) wait(done func(error)) {
	g.mu.Lock()
	g.waiting = append(g.waiting, done)
	start := !g.inflight
	g.inflight = true
	g.mu.Unlock()
	if start {
		go g.verify()
	}
}

func (g *readGate) verify() {
	for {
		g.mu.Lock()
		group := g.waiting
		g.waiting = nil
		if len(group) == 0 {
			g.inflight = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		err := unconfirmed(g.grp.span.ID, g.grp.rt.repl.VerifyLeader(g.grp.span.ID).Error())
		for _, done := range group {
			done(err)
		}
	}
}

// unconfirmed is the answer of the replies a leadership check covered: nil when it confirmed
// the leadership; not applied otherwise (they wrote nothing, so sending again is safe).
func unconfirmed(group uint32, verr error) error {
	if verr == nil {
		return nil
	}
	return NotApplied("raft group %d: this node could not confirm it still leads: %v", group, verr)
}
