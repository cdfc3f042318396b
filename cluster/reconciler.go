package cluster

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/shardkeeper/shardkeeper/persistence"
)

// ReconcilerConfig configures the replica reconciler.
type ReconcilerConfig struct {
	Host       *Host
	Membership *Membership
	// Replicas is R; the desired set is capped by the number of alive members.
	Replicas int
	// DeadGrace is how long a member must be dead (or gone) before its replicas are removed.
	// A member that came back with a new incarnation (wiped disk) is removed at once.
	DeadGrace time.Duration
	// Applied asks a member for its applied index of partition p, to decide whether a
	// non-voter has caught up.
	Applied func(ctx context.Context, m NodeMeta, p uint32) (uint64, error)
	// Interval between passes (membership changes also trigger one).
	Interval time.Duration
	Logger   *slog.Logger
}

// Reconciler converges each partition led here toward its desired replica set (Consul
// autopilot is the model): desired members join as non-voters and are promoted once caught up;
// members dead longer than the grace period are removed, never below the quorum floor;
// undesired live members are removed only once every desired member votes; and leadership is
// spread evenly by transferring it away from nodes that lead more than their share.
// It makes at most one configuration change per partition per pass.
type Reconciler struct {
	cfg     ReconcilerConfig
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	missing map[raft.ServerID]time.Time // servers in a configuration but unknown to gossip
}

// caughtUpLag is how many entries a non-voter may trail the leader and still be promoted.
const caughtUpLag = 64

// StartReconciler runs the reconciler until Stop.
func StartReconciler(cfg ReconcilerConfig) *Reconciler {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	r := &Reconciler{cfg: cfg, stop: make(chan struct{}), done: make(chan struct{}), missing: map[raft.ServerID]time.Time{}}
	go r.run()
	return r
}

// Stop ends the reconciler and waits for it.
func (r *Reconciler) Stop() {
	close(r.stop)
	<-r.done
}

func (r *Reconciler) run() {
	defer close(r.done)
	changes := r.cfg.Membership.Changes()
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		case <-changes:
		}
		r.pass()
	}
}

func (r *Reconciler) pass() {
	h, m := r.cfg.Host, r.cfg.Membership
	m.Update(func(meta *NodeMeta) {
		meta.Leading = h.Leading()
		meta.Bootstrapped = meta.Bootstrapped || h.HasState()
	})
	alive := m.Alive()
	members := map[string]Member{}
	for _, mem := range m.Members() {
		members[mem.ID] = mem
	}
	for _, g := range h.groups {
		if g.raft.State() != raft.Leader {
			continue
		}
		if err := r.reconcile(g, alive, members); err != nil {
			r.cfg.Logger.Warn("reconcile partition", "partition", g.p, "error", err)
		}
	}
	r.balance(alive)
}

func (r *Reconciler) reconcile(g *group, alive []NodeMeta, members map[string]Member) error {
	f := g.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	servers := f.Configuration().Servers
	suffrage := map[raft.ServerID]raft.ServerSuffrage{}
	voters := 0
	for _, s := range servers {
		suffrage[s.ID] = s.Suffrage
		if s.Suffrage == raft.Voter {
			voters++
		}
	}
	desired := Desired(g.p, alive, r.cfg.Replicas)
	want := map[raft.ServerID]NodeMeta{}
	for _, d := range desired {
		want[raft.ServerID(d.ServerID)] = d
	}
	const timeout = 5 * time.Second

	// 1. Servers whose member is dead past the grace period, gone, or re-incarnated leave
	// (first: a re-incarnated node's new server has the old one's address, which Raft
	// refuses to hold twice).
	floor := r.cfg.Replicas/2 + 1
	now := time.Now()
	for _, s := range servers {
		if r.isAlive(s.ID, alive) {
			continue
		}
		gone := r.goneSince(s.ID, members, now)
		if now.Sub(gone) < r.cfg.DeadGrace {
			continue
		}
		if s.Suffrage == raft.Voter && voters-1 < floor {
			continue // keep the quorum floor: a dead voter is better than too few
		}
		r.cfg.Logger.Info("removing replica of a gone member", "partition", g.p, "server", s.ID)
		return g.raft.RemoveServer(s.ID, 0, timeout).Error()
	}
	// 2. Desired members not in the configuration join as non-voters.
	for _, d := range desired {
		if _, ok := suffrage[raft.ServerID(d.ServerID)]; !ok {
			r.cfg.Logger.Info("adding replica", "partition", g.p, "server", d.ServerID)
			return g.raft.AddNonvoter(raft.ServerID(d.ServerID), RaftAddress(d.Raft, d.ServerID), 0, timeout).Error()
		}
	}
	// 3. Caught-up desired non-voters are promoted.
	for _, d := range desired {
		if suffrage[raft.ServerID(d.ServerID)] != raft.Nonvoter {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		applied, err := r.cfg.Applied(ctx, d, g.p)
		cancel()
		if err != nil || applied+caughtUpLag < g.fsm.AppliedIndex() {
			continue
		}
		r.cfg.Logger.Info("promoting replica", "partition", g.p, "server", d.ServerID, "applied", applied)
		return g.raft.AddVoter(raft.ServerID(d.ServerID), RaftAddress(d.Raft, d.ServerID), 0, timeout).Error()
	}
	// 4. Live but undesired servers leave once every desired member votes.
	for _, d := range desired {
		if suffrage[raft.ServerID(d.ServerID)] != raft.Voter {
			return nil
		}
	}
	for _, s := range servers {
		if _, ok := want[s.ID]; ok || !r.isAlive(s.ID, alive) {
			continue
		}
		if s.ID == raft.ServerID(r.cfg.Host.cfg.ServerID) {
			r.cfg.Logger.Info("handing over leadership before leaving the replica set", "partition", g.p)
			return g.raft.LeadershipTransfer().Error()
		}
		r.cfg.Logger.Info("removing undesired replica", "partition", g.p, "server", s.ID)
		return g.raft.RemoveServer(s.ID, 0, timeout).Error()
	}
	return nil
}

func (r *Reconciler) isAlive(id raft.ServerID, alive []NodeMeta) bool {
	for _, a := range alive {
		if raft.ServerID(a.ServerID) == id {
			r.mu.Lock()
			delete(r.missing, id)
			r.mu.Unlock()
			return true
		}
	}
	return false
}

// goneSince is when the server stopped being a live member: the gossip time of death, the
// distant past for a re-incarnated node, or when this reconciler first missed it.
func (r *Reconciler) goneSince(id raft.ServerID, members map[string]Member, now time.Time) time.Time {
	if mem, ok := members[persistence.NodeOfServer(string(id))]; ok {
		if mem.ServerID != string(id) && (mem.State == "alive" || mem.State == "suspect") {
			return time.Time{} // the node is back with a new disk: its old replica is lost
		}
		if mem.ServerID == string(id) && (mem.State == "dead" || mem.State == "left") {
			return mem.Since
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if t, ok := r.missing[id]; ok {
		return t
	}
	r.missing[id] = now
	return now
}

// balance moves one partition's leadership from this node to a voter that leads fewer, when
// this node leads more than its share.
func (r *Reconciler) balance(alive []NodeMeta) {
	h := r.cfg.Host
	if len(alive) < 2 {
		return
	}
	share := (len(h.groups) + len(alive) - 1) / len(alive)
	if h.Leading() <= share {
		return
	}
	leading := map[raft.ServerID]int{}
	for _, a := range alive {
		leading[raft.ServerID(a.ServerID)] = a.Leading
	}
	for _, g := range h.groups {
		if g.raft.State() != raft.Leader {
			continue
		}
		f := g.raft.GetConfiguration()
		if f.Error() != nil {
			continue
		}
		for _, s := range f.Configuration().Servers {
			n, ok := leading[s.ID]
			if !ok || s.Suffrage != raft.Voter || s.ID == raft.ServerID(h.cfg.ServerID) || n+1 > share {
				continue
			}
			r.cfg.Logger.Info("balancing leadership", "partition", g.p, "to", s.ID)
			if err := g.raft.LeadershipTransferToServer(s.ID, s.Address).Error(); err != nil {
				r.cfg.Logger.Warn("leadership transfer", "partition", g.p, "to", s.ID, "error", err)
			}
			return
		}
	}
}
