package cluster

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// A leader whose leadership transfer never ends.
//
// hashicorp/raft marks a transfer in progress and refuses every Apply, Barrier and
// configuration change of its leader (ErrLeadershipTransferInProgress) until the goroutine
// that runs the transfer returns. That goroutine can wait for ever: on the replication of a
// follower that stopped when the leader stepped down mid-transfer (hashicorp/raft issue 696),
// or on a TimeoutNow to a peer that never answers. The mark outlives the term: once the node
// leads again, the group takes no write until the process restarts.
//
// Two measures keep a group out of it. A transfer goes only to a voter that answered this
// leader within a heartbeat timeout (Host.Change, Host.TransferLeadership): a stalled
// follower is what leaves the transfer hanging. And a watchdog restarts a group's Raft
// instance here when its refusals for a transfer in progress have lasted stuckAfter election
// timeouts with nothing accepted meanwhile. A transfer that ends, either way, lasts at most
// two election timeouts; a restart costs an election, and the stores are untouched.

// stuckAfter is how many election timeouts of refusals mark a transfer as never ending.
const stuckAfter = 4

// transferRefusals tracks, for one group instance, since when Raft has refused its
// proposals for a transfer in progress (unix nanoseconds; 0: it accepted or refused for
// another reason since).
type transferRefusals struct{ since atomic.Int64 }

// note records the outcome of an Apply, a Barrier or a transfer request.
func (t *transferRefusals) note(err error) {
	if errors.Is(err, raft.ErrLeadershipTransferInProgress) {
		t.since.CompareAndSwap(0, time.Now().UnixNano())
		return
	}
	t.since.Store(0)
}

// stuckFor is how long the refusals have lasted (0 when none).
func (t *transferRefusals) stuckFor(now time.Time) time.Duration {
	s := t.since.Load()
	if s == 0 {
		return 0
	}
	return now.Sub(time.Unix(0, s))
}

// noted is a future whose outcome is recorded in refusals when read.
type noted struct {
	f        interface{ Error() error }
	refusals *transferRefusals
}

func (n noted) Error() error {
	err := n.f.Error()
	n.refusals.note(err)
	return err
}

// electionTimeout is the groups' election timeout (hashicorp/raft's default when unset).
func (h *Host) electionTimeout() time.Duration {
	if h.cfg.ElectionTimeout > 0 {
		return h.cfg.ElectionTimeout
	}
	return raft.DefaultConfig().ElectionTimeout
}

// watchTransfers restarts, every election timeout, the instances whose transfer never ends.
func (h *Host) watchTransfers() {
	defer h.wg.Done()
	tick := time.NewTicker(h.electionTimeout())
	defer tick.Stop()
	for {
		select {
		case <-h.stop:
			return
		case now := <-tick.C:
			for _, g := range h.all() {
				if d := g.refusals.stuckFor(now); d >= stuckAfter*h.electionTimeout() && g.raft.State() == raft.Leader {
					h.cfg.Logger.Warn("raft group refused every write for a leadership transfer that does not end: restarting its raft instance",
						"group", GroupName(g.ID), "for", d.Round(time.Millisecond))
					if err := h.restart(g); err != nil {
						h.cfg.Logger.Warn("restart raft group", "group", GroupName(g.ID), "error", err)
					}
				}
			}
		}
	}
}

// restart replaces group g's Raft instance here with a new one on the same stores, unless
// the group is no longer g's instance or a merge is changing it. Its range stays held here
// meanwhile: a proposal in between is refused as not applied (NotHere) and retried. The
// stuck instance's transfer goroutine stays behind, blocked; it holds no lock and no store.
func (h *Host) restart(g *group) error {
	h.mu.Lock()
	select {
	case <-h.stop:
		h.mu.Unlock()
		return nil
	default:
	}
	if h.groups[g.ID] != g || h.merging[g.ID] || h.absorbing[g.ID] {
		h.mu.Unlock()
		return nil
	}
	delete(h.groups, g.ID)
	h.mu.Unlock()
	h.shutdown(g)
	if _, err := h.open(g.fsm.Group()); err != nil {
		return fmt.Errorf("reopen raft group %s: %w", GroupName(g.ID), err)
	}
	return nil
}

// answered reports whether server id answered this leader's appends (heartbeats included)
// within the heartbeat timeout.
func (h *Host) answered(g *group, id raft.ServerID) bool {
	t, ok := g.progress.Contact(id)
	return ok && time.Since(t) <= h.cfg.HeartbeatTimeout
}
