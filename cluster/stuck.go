package cluster

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/shardkeeper/shardkeeper/persistence"
)

// A leader whose leadership transfer never ends.
//
// hashicorp/raft marks a transfer in progress and refuses every Apply, Barrier and
// configuration change of its leader (ErrLeadershipTransferInProgress) until the goroutine
// that runs the transfer returns. That goroutine can wait for ever: when the leader steps
// down mid-transfer, the follower's replication goroutine stops, and the transfer may be
// blocked handing that goroutine a request it will never take. The mark outlives the term:
// once the node leads again, the group takes no write until the process restarts.
//
// Two measures keep a group out of it. A transfer goes only to a voter that answered this
// leader within a heartbeat timeout (Host.Change, Host.TransferLeadership): a stalled
// follower is what leaves the transfer hanging. And a watchdog restarts a group's Raft
// instance here when its writes have been refused for a transfer in progress for stuckAfter
// election timeouts and a Barrier, asked then, is refused the same way. A transfer that ends
// lasts two election timeouts and its TimeoutNow at most (that RPC is bounded by the
// transport's timeout, and goes only to a peer that answers). A restart costs an election; the
// stores are untouched.
//
// The restart is safe against splits and merges of the group: only a leader whose writes are
// refused is restarted, so its log takes no split, freeze or merge entry until the new
// instance runs, and a group frozen for a merge is left alone.

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

// electionTimeout is the groups' election timeout. Raft refuses 0, so a host with groups has
// one; the default only keeps a host without any from ticking at 0.
func (h *Host) electionTimeout() time.Duration {
	if h.cfg.ElectionTimeout > 0 {
		return h.cfg.ElectionTimeout
	}
	return raft.DefaultConfig().ElectionTimeout
}

// watchTransfers restarts, every election timeout, the instances whose transfer never ends,
// and opens again the groups whose restart could not open them.
func (h *Host) watchTransfers() {
	defer h.wg.Done()
	et := h.electionTimeout()
	tick := time.NewTicker(et)
	defer tick.Stop()
	reopen := map[uint32]persistence.Group{}
	for {
		select {
		case <-h.stop:
			return
		case now := <-tick.C:
			for id, pg := range reopen {
				if _, err := h.open(pg); err == nil || errors.Is(err, raft.ErrRaftShutdown) || errors.Is(err, persistence.ErrGone) {
					delete(reopen, id)
				} else {
					h.cfg.Logger.Error("raft group not running here after a restart: opening it again", "group", GroupName(id), "error", err)
				}
			}
			for _, g := range h.all() {
				d := g.refusals.stuckFor(now)
				if d < stuckAfter*et || g.raft.State() != raft.Leader || g.fsm.Frozen() != 0 {
					continue
				}
				// The refusals may be stale (a write refused as a transfer ended, on an idle
				// group): ask once more.
				if err := g.raft.Barrier(et).Error(); !errors.Is(err, raft.ErrLeadershipTransferInProgress) {
					g.refusals.note(err)
					continue
				}
				h.cfg.Logger.Warn("raft group refused every write for a leadership transfer that does not end: restarting its raft instance",
					"group", GroupName(g.ID), "for", d.Round(time.Millisecond))
				if pg, err := h.restart(g); err != nil {
					h.cfg.Logger.Error("raft group not running here after a restart: opening it again", "group", GroupName(g.ID), "error", err)
					reopen[g.ID] = pg
				}
			}
		}
	}
}

// restart replaces group g's Raft instance here with a new one on the same stores, unless
// the group is no longer g's instance or a merge is changing it. Its range stays held here
// meanwhile: a proposal in between is refused as not applied (NotHere) and retried. When the
// new instance does not open, it returns the group to open again. The stuck instance's
// transfer goroutine stays behind, blocked; it holds no lock and no store.
func (h *Host) restart(g *group) (persistence.Group, error) {
	pg := g.fsm.Group()
	h.mu.Lock()
	select {
	case <-h.stop:
		h.mu.Unlock()
		return pg, nil
	default:
	}
	if h.groups[g.ID] != g || h.merging[g.ID] || h.absorbing[g.ID] {
		h.mu.Unlock()
		return pg, nil
	}
	delete(h.groups, g.ID)
	h.mu.Unlock()
	h.shutdown(g)
	_, err := h.open(pg)
	if err != nil && !errors.Is(err, raft.ErrRaftShutdown) && !errors.Is(err, persistence.ErrGone) {
		return pg, fmt.Errorf("reopen raft group %s: %w", GroupName(g.ID), err)
	}
	return pg, nil
}

// answered reports whether server id answered this leader's appends (heartbeats included)
// within the heartbeat timeout.
func (h *Host) answered(g *group, id raft.ServerID) bool {
	t, ok := g.progress.Contact(id)
	return ok && time.Since(t) <= h.cfg.HeartbeatTimeout
}
