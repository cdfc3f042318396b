package cluster

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/shardkeeper/shardkeeper/persistence"
)

// raftGroups is what the reconciler needs of the Raft host: what each group looks like
// here, and a way to carry out a decided change.
type raftGroups interface {
	ServerID() string
	Layout() persistence.Layout
	Spans() []persistence.Group
	Info(g uint32) GroupInfo
	IsLeader(g uint32) bool
	Leading() int
	HasState() bool
	Change(g uint32, a Action) error
	Split(g, at uint32, timeout time.Duration) (persistence.Group, error)
	Merge(l, r uint32, timeout time.Duration) (persistence.Group, error)
	ResolveFreeze() (changed int, err error)
	Leader(g uint32) string
}

// groupView tells the cluster's groups as this node knows them, and who leads them
// (Directory).
type groupView interface {
	KnownGroups() []persistence.Group
	Leaderships() []GroupInfo
	Configurations() []GroupConfig
}

// memberView is what the reconciler needs of gossip.
type memberView interface {
	Local() NodeMeta
	Members() []Member
	Update(fn func(*NodeMeta))
	Changes() <-chan struct{}
}

// ReconcilerConfig configures the replica reconciler.
type ReconcilerConfig struct {
	Host    raftGroups
	Members memberView
	// Replicas is R; the desired set is capped by the number of live members.
	Replicas int
	// DeadGrace is how long a member must be failed, left or unknown before its replicas are
	// removed. A member that came back with a new incarnation (wiped disk) is removed at once.
	DeadGrace time.Duration
	// Interval between passes (membership changes also trigger one).
	Interval time.Duration
	// Disk, when set, tells whether this node's disk is low: it then gossips so (nobody hands
	// it a leadership) and hands away every leadership it holds.
	Disk Disk
	// Groups, when set, tells the cluster's groups, and GroupsPerNode (> 0) turns on splits:
	// the cluster aims for that many groups per live node (DecideSplit).
	Groups        groupView
	GroupsPerNode int
	// MergeDelay is how long the cluster must have had fewer live nodes before groups merge
	// down to GroupsPerNode per node (DecideMerge); 0: never merge.
	MergeDelay time.Duration
	Logger     *slog.Logger
}

// Reconciler converges each Raft group led here toward its desired replica set, one change
// per group per pass, as Decide rules, and spreads leadership as DecideBalance rules.
// This file holds the effects; decision.go the decisions.
type Reconciler struct {
	cfg  ReconcilerConfig
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	missing map[raft.ServerID]time.Time // servers in a configuration but unknown to gossip
	// sizes holds the live node counts of recent passes, for MergeDelay.
	sizes []sized
}

type sized struct {
	at    time.Time
	nodes int
}

// NewReconciler returns a reconciler; Start runs it, or call Pass directly.
func NewReconciler(cfg ReconcilerConfig) *Reconciler {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Second
	}
	return &Reconciler{cfg: cfg, stop: make(chan struct{}), done: make(chan struct{}), missing: map[raft.ServerID]time.Time{}}
}

// Start runs passes until Stop.
func (r *Reconciler) Start() {
	go func() {
		defer close(r.done)
		changes := r.cfg.Members.Changes()
		t := time.NewTicker(r.cfg.Interval)
		defer t.Stop()
		for {
			select {
			case <-r.stop:
				return
			case <-t.C:
			case <-changes:
			}
			r.Pass(time.Now())
		}
	}()
}

// Stop ends the reconciler and waits for it.
func (r *Reconciler) Stop() {
	close(r.stop)
	<-r.done
}

// Pass gossips this node's leadership count, then decides and applies at most one change for
// each group led here, and at most one leadership transfer to balance.
func (r *Reconciler) Pass(now time.Time) {
	h := r.cfg.Host
	diskLow := r.cfg.Disk != nil && r.cfg.Disk.Err() != nil
	r.cfg.Members.Update(func(meta *NodeMeta) {
		meta.Leading = h.Leading()
		meta.Bootstrapped = meta.Bootstrapped || h.HasState()
		meta.DiskLow = diskLow
	})
	// A member of another layout (misconfigured, refused at join) never holds a replica: its
	// group g would be other partitions than ours.
	layout := h.Layout()
	members := slices.DeleteFunc(r.cfg.Members.Members(), func(m Member) bool { return !m.Layout().Same(layout) })
	var alive []NodeMeta
	for _, m := range members {
		if !m.Gone() {
			alive = append(alive, m.NodeMeta)
		}
	}
	self := h.ServerID()
	var led []GroupInfo
	missing := map[raft.ServerID]time.Time{}
	spans := h.Spans()
	ids := make([]uint32, 0, len(spans))
	if r.cfg.Groups != nil {
		for _, g := range r.cfg.Groups.KnownGroups() {
			ids = append(ids, g.ID)
		}
	} else {
		for _, g := range spans {
			ids = append(ids, g.ID)
		}
	}
	ms, merging := r.mergeSituation(now, alive, members)
	placement := Placement(ids, alive, r.cfg.Replicas)
	if merging {
		// A merge needs both groups on the same voters: the pair due next is placed together.
		if l, rg, ok := SteerMerge(ms); ok {
			placement[rg] = placement[l]
		}
	}
	for _, span := range spans {
		g := span.ID
		if !h.IsLeader(g) {
			continue
		}
		in := h.Info(g)
		if in.Leader != self {
			continue
		}
		led = append(led, in)
		r.noteMissing(in.Servers, members, now, missing)
		a := Decide(Situation{Self: raft.ServerID(self), Servers: in.Servers, Members: members,
			Desired: desiredOf(placement, g, alive, r.cfg.Replicas), Replicas: r.cfg.Replicas, DeadGrace: r.cfg.DeadGrace,
			Now: now, Missing: missing, Match: in.Match, LastIndex: in.LastIndex})
		r.apply(g, a)
	}
	r.mu.Lock()
	r.missing = missing
	r.mu.Unlock()
	r.split(led, alive, members)
	ms.Led = led
	groups := len(ids)
	if r.merge(ms, merging) {
		led = slices.DeleteFunc(led, func(in GroupInfo) bool { return !h.IsLeader(in.ID) })
		groups = len(h.Spans())
		if r.cfg.Groups != nil {
			groups = len(r.cfg.Groups.KnownGroups())
		}
	}

	leading := map[string]int{}
	addrs := map[string]raft.ServerAddress{}
	unfit := map[string]string{}
	for _, m := range members {
		if m.State != StateAlive {
			continue // a suspect member may be gone: no leadership goes to it
		}
		leading[m.ServerID] = m.Leading
		addrs[m.ServerID] = RaftAddress(m.Raft, m.ServerID)
		unfit[m.ServerID] = unfitness(m.DiskLow, m.Retiring)
	}
	leading[self] = len(led)
	unfit[self] = unfitness(diskLow, r.cfg.Members.Local().Retiring)
	bs := BalanceSituation{Self: self, Leading: leading, Unfit: unfit, Groups: groups, Led: led, Addresses: addrs}
	if r.cfg.Groups != nil {
		bs.Others = r.cfg.Groups.Leaderships()
	}
	for {
		g, a, ok := DecideBalance(bs)
		if !ok {
			return
		}
		r.apply(g, a)
		if unfit[self] == "" {
			return // one transfer per pass to balance
		}
		// Unfit to lead (disk low, or retiring): every leadership goes now.
		bs.Led = slices.DeleteFunc(bs.Led, func(in GroupInfo) bool { return in.ID == g })
		bs.Leading[string(a.Server)]++
	}
}

// desiredOf is group g's desired replicas in placement, or its own ranking when placement
// does not know g (gossip has not told this node's directory of it yet).
func desiredOf(placement map[uint32][]NodeMeta, g uint32, alive []NodeMeta, r int) []NodeMeta {
	if d, ok := placement[g]; ok {
		return d
	}
	return Desired(g, alive, r)
}

// split cuts a group led here when DecideSplit says so.
func (r *Reconciler) split(led []GroupInfo, alive []NodeMeta, members []Member) {
	if r.cfg.Groups == nil || r.cfg.GroupsPerNode <= 0 {
		return
	}
	s := SplitSituation{Partitions: r.cfg.Host.Layout().Partitions, Groups: r.cfg.Groups.KnownGroups(), Led: led,
		Capable: true, PerNode: r.cfg.GroupsPerNode, Splits: map[string]bool{}}
	for _, m := range members {
		s.Splits[m.ServerID] = m.Splits
	}
	s.Splits[r.cfg.Host.ServerID()] = true
	for _, m := range alive {
		s.Capable = s.Capable && m.Splits
		if !m.Retiring {
			s.Nodes++
		}
	}
	g, at, why, ok := DecideSplit(s)
	if !ok {
		return
	}
	r.cfg.Logger.Info("splitting raft group", "group", GroupName(g), "at", at, "reason", why)
	child, err := r.cfg.Host.Split(g, at, 5*time.Second)
	if err != nil {
		r.cfg.Logger.Warn("split raft group", "group", GroupName(g), "at", at, "error", err)
		return
	}
	r.cfg.Logger.Info("raft group split", "group", GroupName(g), "new_group", GroupName(child.ID),
		"partitions", fmt.Sprintf("[%d, %d)", child.First, child.End))
}

// mergeSituation is what DecideMerge (once Led is set) and the steering of placement need to
// know this pass;
// ok is false while no merge may be due: merges are off, a live member's release cannot apply
// them, or a whole MergeDelay of cluster sizes has not been seen. Called once per pass: it
// records the pass's cluster size.
func (r *Reconciler) mergeSituation(now time.Time, alive []NodeMeta, members []Member) (s MergeSituation, ok bool) {
	h := r.cfg.Host
	if r.cfg.Groups == nil || r.cfg.GroupsPerNode <= 0 || r.cfg.MergeDelay <= 0 {
		return s, false
	}
	nodes, capable := 0, true
	for _, m := range alive {
		if !m.Retiring {
			nodes++
		}
		// A member of an older release routes by the rule before generations: it would send
		// the partitions a merge moved to the group it took in.
		capable = capable && m.Merges
	}
	r.mu.Lock()
	r.sizes = append(r.sizes, sized{now, nodes})
	// The samples older than MergeDelay go, but the newest of them: the size it saw held
	// until the next sample.
	for len(r.sizes) > 1 && now.Sub(r.sizes[1].at) >= r.cfg.MergeDelay {
		r.sizes = r.sizes[1:]
	}
	// Until a whole MergeDelay has been seen, the cluster may have been larger.
	peak := 0
	if now.Sub(r.sizes[0].at) >= r.cfg.MergeDelay {
		for _, s := range r.sizes {
			peak = max(peak, s.nodes)
		}
	}
	r.mu.Unlock()
	if peak == 0 || !capable {
		return s, false
	}
	s = MergeSituation{Leaders: map[uint32]string{}, Nodes: peak, PerNode: r.cfg.GroupsPerNode, Merges: map[string]bool{}}
	for _, m := range members {
		// A merge waits for every voter of both groups: one that is down now would hold
		// the coordinator for its whole timeout.
		s.Merges[m.ServerID] = m.Merges && m.State == StateAlive
	}
	s.Merges[h.ServerID()] = true
	for _, in := range r.cfg.Groups.Leaderships() {
		s.Leaders[in.ID] = in.Leader
	}
	configs := map[uint32][]raft.Server{}
	for _, c := range r.cfg.Groups.Configurations() {
		configs[c.ID] = c.Servers
	}
	for _, g := range r.cfg.Groups.KnownGroups() {
		if l := h.Leader(g.ID); l != "" {
			s.Leaders[g.ID] = l
		}
		s.Groups = append(s.Groups, GroupInfo{ID: g.ID, First: g.First, End: g.End, Servers: configs[g.ID]})
	}
	return s, true
}

// merge settles the frozen groups led here whose merge nobody carries out here, and merges
// two groups when DecideMerge says so (s, when ok). It reports whether it changed any group.
func (r *Reconciler) merge(s MergeSituation, ok bool) bool {
	h := r.cfg.Host
	n, err := h.ResolveFreeze()
	if err != nil {
		r.cfg.Logger.Warn("settle raft groups frozen for a merge", "error", err)
	}
	changed := n > 0
	if !ok {
		return changed
	}
	l, rg, step, why := DecideMerge(s)
	switch step {
	case MergeHere:
		r.cfg.Logger.Info("merging raft groups", "group", GroupName(rg.ID), "into", GroupName(l.ID), "reason", why)
		got, err := h.Merge(l.ID, rg.ID, 10*time.Second)
		if err != nil {
			r.cfg.Logger.Warn("merge raft groups", "group", GroupName(rg.ID), "into", GroupName(l.ID), "error", err)
			return true
		}
		r.cfg.Logger.Info("raft groups merged", "group", GroupName(l.ID), "partitions", fmt.Sprintf("[%d, %d)", got.First, got.End))
		return true
	case HandRToLeft:
		if s.Leaders[l.ID] == h.ServerID() {
			return changed // gossip still names this node, which no longer leads l
		}
		r.handTo(rg, s.Leaders[l.ID], "to merge it into group "+GroupName(l.ID)+" ("+why+")")
		return true
	}
	return changed
}

// handTo transfers the leadership of group in, led here, to the voter with server id to.
func (r *Reconciler) handTo(in GroupInfo, to, why string) {
	for _, sv := range in.Servers {
		if string(sv.ID) == to && sv.Suffrage == raft.Voter {
			r.apply(in.ID, Action{Kind: TransferLeadership, Server: sv.ID, Address: sv.Address, Reason: why})
			return
		}
	}
}

// unfitness is why a member must not lead ("" when it may): its disk is low, or it is
// retiring.
func unfitness(diskLow, retiring bool) string {
	switch {
	case diskLow:
		return "disk-low"
	case retiring:
		return "retiring"
	}
	return ""
}

// noteMissing records in next when each server of the configuration that gossip does not
// know was first missed (keeping the earlier time from the last pass).
func (r *Reconciler) noteMissing(servers []raft.Server, members []Member, now time.Time, next map[raft.ServerID]time.Time) {
	known := map[string]bool{}
	for _, m := range members {
		known[m.ID] = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range servers {
		if known[persistence.NodeOfServer(string(s.ID))] {
			continue
		}
		if t, ok := r.missing[s.ID]; ok {
			next[s.ID] = t
		} else if _, ok := next[s.ID]; !ok {
			next[s.ID] = now
		}
	}
}

func (r *Reconciler) apply(g uint32, a Action) {
	if a.Kind == NoAction {
		return
	}
	r.cfg.Logger.Info("reconciling raft group", "group", g, "action", a.String())
	if err := r.cfg.Host.Change(g, a); err != nil {
		r.cfg.Logger.Warn("reconcile raft group", "group", g, "action", a.String(), "error", err)
	}
}
