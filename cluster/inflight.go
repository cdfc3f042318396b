package cluster

import (
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// inflight holds the futures of forwarded requests by the remote address they were sent to.
// When the connection to an address is lost (protoactor publishes EndpointTerminatedEvent
// when the endpoint's stream fails, as it does at once when the process there is killed),
// the router completes them with connectionLost instead of letting them wait for their
// deadline. Their outcome is unknown either way (the request may have run before the
// connection broke), so they fail as unavailable and are never re-sent; only the wait is
// shorter. Safe for concurrent use.
type inflight struct {
	mu     sync.Mutex
	byAddr map[string]map[*actor.PID]struct{}
}

// connectionLost is the result given to a future whose connection was lost.
type connectionLost struct{ addr string }

func (f *inflight) add(addr string, pid *actor.PID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byAddr == nil {
		f.byAddr = map[string]map[*actor.PID]struct{}{}
	}
	if f.byAddr[addr] == nil {
		f.byAddr[addr] = map[*actor.PID]struct{}{}
	}
	f.byAddr[addr][pid] = struct{}{}
}

func (f *inflight) remove(addr string, pid *actor.PID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.byAddr[addr], pid)
	if len(f.byAddr[addr]) == 0 {
		delete(f.byAddr, addr)
	}
}

// lost takes the futures pending on addr.
func (f *inflight) lost(addr string) []*actor.PID {
	f.mu.Lock()
	defer f.mu.Unlock()
	pids := make([]*actor.PID, 0, len(f.byAddr[addr]))
	for pid := range f.byAddr[addr] {
		pids = append(pids, pid)
	}
	delete(f.byAddr, addr)
	return pids
}
