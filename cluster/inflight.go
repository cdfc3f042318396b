package cluster

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// inflight holds the futures of forwarded requests with where they were sent, so that the
// router can fail them before their deadline when they can no longer be answered:
//   - the connection to their address is lost (protoactor publishes EndpointTerminatedEvent
//     when the endpoint's stream fails, as it does at once when the process there is killed);
//   - their partition has a new leader elsewhere, and the node they wait on has not answered
//     within a grace period (it is frozen or cut off: a live node stepping down answers at
//     once, see Router).
//
// Their outcome is unknown either way (the request may have run), so they fail as unavailable
// and are never re-sent; only the wait is shorter. Safe for concurrent use.
type inflight struct {
	mu      sync.Mutex
	pending map[*actor.PID]forwardTarget
}

// forwardTarget is where a forwarded request waits.
type forwardTarget struct {
	addr     string // protoactor remote address
	serverID string
	p        uint32 // the partition of its actor
}

// connectionLost is the result given to a future whose connection was lost.
type connectionLost struct{ addr string }

// leaderMoved is the result given to a future whose partition is led elsewhere now.
type leaderMoved struct {
	p      uint32
	leader string
}

func (f *inflight) add(pid *actor.PID, t forwardTarget) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pending == nil {
		f.pending = map[*actor.PID]forwardTarget{}
	}
	f.pending[pid] = t
}

func (f *inflight) remove(pid *actor.PID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.pending, pid)
}

// take removes and returns the futures whose target matches.
func (f *inflight) take(match func(forwardTarget) bool) []*actor.PID {
	f.mu.Lock()
	defer f.mu.Unlock()
	var pids []*actor.PID
	for pid, t := range f.pending {
		if match(t) {
			pids = append(pids, pid)
			delete(f.pending, pid)
		}
	}
	return pids
}

// lost takes the futures pending on addr.
func (f *inflight) lost(addr string) []*actor.PID {
	return f.take(func(t forwardTarget) bool { return t.addr == addr })
}

// movedAway takes the futures of partition p pending on any node but leader.
func (f *inflight) movedAway(p uint32, leader string) []*actor.PID {
	return f.take(func(t forwardTarget) bool { return t.p == p && t.serverID != leader })
}
