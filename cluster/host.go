// Package cluster holds consensus and placement: the multi-Raft host that runs the
// hashicorp/raft groups of the partitions (persistence.Layout) over a shared transport,
// membership, placement and routing.
package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/persistence"
	"github.com/shardkeeper/shardkeeper/pki"
)

// HostConfig configures a Host.
type HostConfig struct {
	// ServerID is this node's Raft server id (persistence.Store.ServerID).
	ServerID string
	// Peers, when set, puts Raft traffic in mutual TLS (see Mux).
	Peers *pki.Peers
	// Disk, when set, refuses proposals while the disk is low, and log appends of
	// groups this node follows (persistence.DiskGuard).
	Disk     Disk
	RaftAddr string // listen address of the shared Raft transport
	// Advertise maps the Raft listener's bound address to the one other nodes dial
	// (config.Config.Advertised); nil: the bound address itself.
	Advertise func(bound string) string
	// Layout spreads the partitions over Raft groups; it is recorded in the Store on first
	// use and must match afterwards.
	Layout persistence.Layout
	// SnapshotDir holds each group's Raft snapshots (one subdirectory per group, named for
	// its first partition).
	SnapshotDir string
	Store       *persistence.Store

	HeartbeatTimeout time.Duration
	ElectionTimeout  time.Duration
	// CommitTimeout is how long replication to a follower may idle before the leader sends
	// it the commit index anyway; 0: hashicorp/raft's default (50ms). Every group does
	// this for every follower, so it is most of what an idle cluster spends CPU on.
	CommitTimeout     time.Duration
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration // 0: hashicorp/raft's default (2 min)
	TrailingLogs      uint64        // log entries kept after a snapshot; 0: hashicorp/raft's default (10240)

	// BootstrapSelf makes this node the only voter of every group that has no Raft state
	// yet (the one-node cluster). A node that already has state ignores it. Clusters
	// bootstrap later, through Host.Bootstrap, once enough members are known.
	BootstrapSelf bool

	// Logger receives this host's lines and hashicorp/raft's (component=raft), at its
	// handler's level.
	Logger *slog.Logger
}

// Host runs this node's Raft groups, each the log of some partitions, all sharing one Store
// and one listener: the layout's groups, numbered 0..G-1, and the groups born since by
// splits (persistence.SplitID), which a split's apply opens here (split.go). Every method
// takes a group id. Propose, Barrier, LastTime and Info are safe for concurrent use.
type Host struct {
	cfg  HostConfig
	mux  *Mux
	addr string // advertised Raft address (host:port) of this node
	hlog hclog.Logger
	stop chan struct{}
	wg   sync.WaitGroup

	// mu guards groups (a group opens once and stays until Close, or until a merge takes it
	// in), spans and merging.
	mu      sync.RWMutex
	groups  map[uint32]*group
	merging map[uint32]bool // groups a merge coordinated here is changing
	// absorbing holds the groups a snapshot restore is replacing: they never open again.
	absorbing map[uint32]bool
	// opened is closed once NewHost has opened every group recorded here.
	opened    chan struct{}
	compactMu sync.Mutex
	opening   map[uint32]chan struct{} // groups being opened, closed when done
	// recording counts EnsureGroup's records in progress; each starts under mu before stop
	// is closed, so Close can wait for them before the store closes.
	recording sync.WaitGroup
	// spans is each group's range as this node knows it: its FSM's, or, for a group about
	// to open, the recorded one. owners is the map it makes (see rebuildOwners).
	spans  map[uint32]persistence.Group
	owners atomic.Pointer[[]uint32]

	spanMu       sync.Mutex
	spanWatchers []func()

	started      sync.Once
	onLeadership func(g uint32, leader bool)

	watchMu  sync.Mutex
	watchers []func(g uint32, leader string)
}

// group is one Raft group's instance on this node.
type group struct {
	persistence.Group
	raft    *raft.Raft
	fsm     *persistence.FSM
	trans   *progressTransport
	notify  chan bool
	leaders chan raft.Observation // LeaderObservations of this instance
	// progress is the followers' replication as this node saw it while leading.
	progress progress
	// refusals tells how long Raft has refused writes for a transfer in progress (stuck.go).
	refusals transferRefusals
	// stopping is closed when the group stops here for good (a merge, or the host's Close);
	// stopped once its Raft instance and transport are shut down; watched once its
	// leadership watcher, if watching (set under Host.mu), has returned.
	stopping, stopped, watched chan struct{}
	watching                   bool
	stopOnce                   sync.Once
	stopErr                    error
}

// stop shuts the group's Raft instance and transport down, once; every caller returns after
// it is done (raft's own Shutdown returns at once to a second caller).
func (g *group) stop() error {
	g.stopOnce.Do(func() {
		close(g.stopping)
		g.stopErr = g.raft.Shutdown().Error()
		_ = g.trans.Close()
		close(g.stopped)
	})
	<-g.stopped
	return g.stopErr
}

// NewHost opens every Raft group. It refuses to start when the Store was bootstrapped with
// another layout.
func NewHost(cfg HostConfig) (*Host, error) {
	if err := cfg.Store.EnsureLayout(cfg.Layout); err != nil {
		return nil, err
	}
	mux, err := ListenMux(cfg.RaftAddr, cfg.ServerID, cfg.Peers, cfg.Logger)
	if err != nil {
		return nil, err
	}
	advertise := mux.Addr().String()
	if cfg.Advertise != nil {
		advertise = cfg.Advertise(advertise)
	}
	h := &Host{cfg: cfg, mux: mux, addr: advertise, hlog: newHclog(cfg.Logger, "raft"), stop: make(chan struct{}), groups: map[uint32]*group{},
		opening: map[uint32]chan struct{}{}, merging: map[uint32]bool{}, absorbing: map[uint32]bool{},
		opened: make(chan struct{})}
	spans, err := cfg.Store.Groups(cfg.Layout)
	if err != nil {
		h.Close()
		return nil, err
	}
	if spans, err = h.dropCovered(spans); err != nil {
		h.Close()
		return nil, err
	}
	// Every range is known before any group starts applying: a lagging group must already
	// leave alone the partitions a later-born one holds here.
	h.spans = map[uint32]persistence.Group{}
	for _, pg := range spans {
		h.spans[pg.ID] = pg
	}
	h.rebuildOwners()
	for _, pg := range spans {
		// A group gone meanwhile was absorbed by a snapshot an earlier one restored.
		if _, err := h.open(pg); err != nil && !errors.Is(err, persistence.ErrGone) {
			h.Close()
			return nil, err
		}
	}
	close(h.opened)
	h.wg.Add(1)
	go h.watchTransfers()
	return h, nil
}

// dropCovered drops the groups recorded here whose whole range a group of a newer generation
// holds here: a merge took them in by a snapshot whose restore stopped before it dropped them
// (persistence.Store.Absorb). It returns the others.
func (h *Host) dropCovered(spans []persistence.Group) ([]persistence.Group, error) {
	var keep, drop []persistence.Group
	for _, g := range spans {
		if slices.ContainsFunc(spans, func(o persistence.Group) bool { return covers(o, g) }) {
			drop = append(drop, g)
		} else {
			keep = append(keep, g)
		}
	}
	if len(drop) == 0 {
		return spans, nil
	}
	if err := h.cfg.Store.Absorb(drop); err != nil {
		return nil, err
	}
	for _, g := range drop {
		h.removeSnapshots(g)
	}
	return keep, nil
}

// open starts group pg's Raft here, unless it runs already, and reports its leadership
// from then on if Start was called. The watchers of ranges hear of a group new here. The
// Raft instance is made outside h.mu (a birth writes a snapshot of the group's state); a
// second caller for the same group waits for the first.
func (h *Host) open(pg persistence.Group) (*group, error) {
	for {
		h.mu.Lock()
		if g, ok := h.groups[pg.ID]; ok {
			h.mu.Unlock()
			return g, nil
		}
		select {
		case <-h.stop:
			h.mu.Unlock()
			return nil, raft.ErrRaftShutdown
		default:
		}
		if ch, ok := h.opening[pg.ID]; ok {
			h.mu.Unlock()
			<-ch
			continue
		}
		if h.absorbing[pg.ID] {
			h.mu.Unlock()
			return nil, fmt.Errorf("open group %s: %w", GroupName(pg.ID), persistence.ErrGone)
		}
		ch := make(chan struct{})
		h.opening[pg.ID] = ch
		added := false
		if _, ok := h.spans[pg.ID]; !ok {
			h.spans[pg.ID] = pg
			h.rebuildOwners()
			added = true
		}
		h.mu.Unlock()

		g, err := h.openGroup(pg, h.addr, h.hlog.With("group", GroupName(pg.ID)))
		h.mu.Lock()
		stopped := false
		select {
		case <-h.stop:
			stopped = true
		default:
		}
		if err == nil && !stopped && h.absorbing[pg.ID] {
			// A snapshot restore absorbed it while it opened.
			h.mu.Unlock()
			_ = g.stop()
			h.mu.Lock()
			g, err = nil, fmt.Errorf("open group %s: %w", GroupName(pg.ID), persistence.ErrGone)
		}
		if err == nil && stopped {
			// Close came meanwhile and waits for this: the instance is shut down before
			// it is told (outside h.mu: its FSM may report a restore, which takes it).
			h.mu.Unlock()
			_ = g.stop()
			h.mu.Lock()
			g, err = nil, raft.ErrRaftShutdown
		}
		if err == nil {
			h.groups[pg.ID] = g
			if h.onLeadership != nil {
				g.watching = true
				h.wg.Add(1)
				go h.watchLeadership(g)
			}
		} else if added {
			delete(h.spans, pg.ID) // not held here after all
			h.rebuildOwners()
		}
		delete(h.opening, pg.ID)
		close(ch)
		h.mu.Unlock()
		if added && !stopped {
			h.spansChanged()
		}
		return g, err
	}
}

// group returns group id's instance here, nil when this node has none.
func (h *Host) group(id uint32) *group {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.groups[id]
}

// all returns every group instance here, in no particular order.
func (h *Host) all() []*group {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]*group, 0, len(h.groups))
	for _, g := range h.groups {
		out = append(out, g)
	}
	return out
}

// GroupName is how logs, status and the dashboard name a group: its number for the
// layout's, hex for split-born ones.
func GroupName(id uint32) string {
	if id>>31 != 0 {
		return fmt.Sprintf("%#x", id)
	}
	return fmt.Sprint(id)
}

// Start begins reporting leadership: onLeadership is called, in order per group and from
// one goroutine per group, each time this node gains or loses a group's leadership
// (changes before Start are buffered). It lets the runtime that proposes through the Host be
// built after it.
func (h *Host) Start(onLeadership func(g uint32, leader bool)) {
	h.started.Do(func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.onLeadership = onLeadership
		for _, g := range h.groups {
			g.watching = true
			h.wg.Add(1)
			go h.watchLeadership(g)
		}
	})
}

// raftConfig is the configuration of each group's Raft: cfg's timeouts and snapshot
// settings (a zero one keeps hashicorp/raft's default), and what this design needs of raft.
func raftConfig(cfg HostConfig, logger hclog.Logger) *raft.Config {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ServerID)
	rc.Logger = logger
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	// The lease only decides when a leader that hears from no quorum steps down (reads are
	// checked with VerifyLeader, never by lease). As long as the followers' own heartbeat
	// timeout, it spares an overloaded leader, whose replies queue behind its work, a step-down
	// and an election its followers would not have started (hashicorp/raft's half of it
	// stepped leaders of a busy cluster down every few seconds). hashicorp/raft allows no more.
	rc.LeaderLeaseTimeout = cfg.HeartbeatTimeout
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	if cfg.CommitTimeout > 0 {
		rc.CommitTimeout = cfg.CommitTimeout
	}
	if cfg.SnapshotInterval > 0 {
		rc.SnapshotInterval = cfg.SnapshotInterval
	}
	if cfg.TrailingLogs > 0 {
		rc.TrailingLogs = cfg.TrailingLogs
	}
	rc.NoSnapshotRestoreOnStart = true // the FSM's state is already in Pebble
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 256
	return rc
}

// logCacheEntries is the number of a group's latest Raft entries kept in memory (they are
// also in the log store): up to 256 times the largest command, about a megabyte per group
// for commands of a few KB.
const logCacheEntries = 256

// restoreNewer restores the newest snapshot stored for group pg when it is newer than the
// state its FSM holds. Raft keeps a snapshot it received before the FSM has restored it; a
// crash or a failed restore in between, and Raft (which does not restore on start, the state
// being in Pebble) would start past state the FSM never got.
func (h *Host) restoreNewer(pg persistence.Group, fsm *persistence.FSM, snaps raft.SnapshotStore) error {
	list, err := snaps.List()
	if err != nil || len(list) == 0 || list[0].Index <= fsm.AppliedIndex() {
		return err
	}
	_, rc, err := snaps.Open(list[0].ID)
	if err != nil {
		return fmt.Errorf("group %s: open snapshot %s: %w", GroupName(pg.ID), list[0].ID, err)
	}
	h.cfg.Logger.Warn("raft group state older than its newest snapshot: restoring the snapshot", "group", GroupName(pg.ID),
		"applied_index", fsm.AppliedIndex(), "snapshot_index", list[0].Index)
	return fsm.Restore(rc)
}

// hook gives group pg's FSM the host's part in splits, merges and restores.
func (h *Host) hook(fsm *persistence.FSM, pg persistence.Group) {
	fsm.OnSplit(h.born)
	fsm.OnRestore(h.restored)
	fsm.OnMerge(h.mergeIn(pg.ID))
	fsm.OnMerged(h.merged)
	fsm.OnAbsorb(h.absorb(pg.ID))
	// No holder here: the partitions of a group a merge is taking in, between its stop and
	// the merge's batch.
	fsm.SetOwner(func(p uint32) bool { o := h.Owner(p); return o == pg.ID || o == noOwner })
}

// snapshotDirName is the directory, under HostConfig.SnapshotDir, of group g's snapshots.
func snapshotDirName(g persistence.Group) string {
	if g.ID>>31 != 0 {
		return fmt.Sprintf("g%08x", g.ID)
	}
	return fmt.Sprintf("p%04d", g.First)
}

func (h *Host) openGroup(pg persistence.Group, advertise string, hlog hclog.Logger) (*group, error) {
	if gone, err := h.cfg.Store.Gone(pg.ID); err != nil || gone {
		return nil, errors.Join(err, fmt.Errorf("open group %s: %w", GroupName(pg.ID), persistence.ErrGone))
	}
	fsm, err := h.cfg.Store.FSM(pg)
	if err != nil {
		return nil, err
	}
	h.hook(fsm, pg)
	logs, stable := h.cfg.Store.LogStore(pg.First), h.cfg.Store.StableStore(pg.First)
	snaps, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(h.cfg.SnapshotDir, snapshotDirName(pg)), 2, hlog)
	if err != nil {
		return nil, fmt.Errorf("group %s snapshot store: %w", GroupName(pg.ID), err)
	}
	g := &group{Group: pg, fsm: fsm, notify: make(chan bool, 16), stopping: make(chan struct{}), stopped: make(chan struct{}),
		watched: make(chan struct{})}
	var logStore raft.LogStore = logs
	var guarded *guardedLogs
	if h.cfg.Disk != nil {
		guarded = &guardedLogs{LogStore: logs, disk: h.cfg.Disk}
		logStore = guarded
	}
	trans := &progressTransport{NetworkTransport: raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: h.mux.Layer(pg.ID, advertise), MaxPool: 3, Timeout: 10 * time.Second, Logger: hlog,
	}), progress: &g.progress}
	g.trans = trans
	rc := raftConfig(h.cfg, hlog)
	rc.NotifyCh = g.notify

	if err := h.restoreNewer(pg, fsm, snaps); err != nil {
		trans.Close()
		return nil, err
	}
	if err := h.writeBirth(pg, fsm, logs, stable, snaps, trans); err != nil {
		trans.Close()
		return nil, err
	}
	has, err := raft.HasExistingState(logs, stable, snaps)
	if err != nil {
		trans.Close()
		return nil, fmt.Errorf("group %d: %w", pg.ID, err)
	}
	if !has && h.cfg.BootstrapSelf {
		self := raft.Server{ID: rc.LocalID, Address: RaftAddress(advertise, h.cfg.ServerID)}
		if err := raft.BootstrapCluster(rc, logs, stable, snaps, trans, raft.Configuration{Servers: []raft.Server{self}}); err != nil {
			trans.Close()
			return nil, fmt.Errorf("bootstrap group %d: %w", pg.ID, err)
		}
	}
	// Raft reads back every entry it has just written: the leader to replicate it, each
	// follower to apply it once committed. The cache answers those reads from memory. (It
	// wraps store errors as text: nothing above Raft may match on them.)
	cached, err := raft.NewLogCache(logCacheEntries, logStore)
	if err != nil {
		trans.Close()
		return nil, fmt.Errorf("group %d: %w", pg.ID, err)
	}
	if g.raft, err = raft.NewRaft(rc, fsm, cached, stable, snaps, trans); err != nil {
		trans.Close()
		return nil, fmt.Errorf("start raft of group %d: %w", pg.ID, err)
	}
	if guarded != nil {
		guarded.r.Store(g.raft)
	}
	// Non-blocking: when watchers lag, raft drops observations rather than wait; the next
	// change is observed again.
	g.leaders = make(chan raft.Observation, 16)
	g.raft.RegisterObserver(raft.NewObserver(g.leaders, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	}))
	return g, nil
}

func (h *Host) watchLeadership(g *group) {
	defer h.wg.Done()
	defer close(g.watched)
	for {
		select {
		case leader := <-g.notify:
			if leader {
				g.progress.reset()
			}
			g.refusals.note(nil)
			if h.onLeadership != nil {
				h.onLeadership(g.ID, leader)
			}
		case o := <-g.leaders:
			leader := string(o.Data.(raft.LeaderObservation).LeaderID)
			h.watchMu.Lock()
			watchers := h.watchers
			h.watchMu.Unlock()
			for _, fn := range watchers {
				fn(g.ID, leader)
			}
		case <-g.stopping:
			return
		case <-h.stop:
			return
		}
	}
}

// WatchLeaders registers fn, called with each change of leader this node's Raft instance of
// a group observes ("" while it knows none), from one goroutine per group, in order.
// fn must not block.
func (h *Host) WatchLeaders(fn func(g uint32, leader string)) {
	h.watchMu.Lock()
	defer h.watchMu.Unlock()
	h.watchers = append(h.watchers[:len(h.watchers):len(h.watchers)], fn)
}

// Groups is G, the layout's count of groups (split-born groups are not counted).
func (h *Host) Groups() int { return h.cfg.Layout.Count() }

// Layout is the map of partitions to groups.
func (h *Host) Layout() persistence.Layout { return h.cfg.Layout }

// applyFuture turns an FSM error response into the future's error.
type applyFuture struct{ f raft.ApplyFuture }

func (a applyFuture) Error() error {
	if err := a.f.Error(); err != nil {
		return classifyApplyError(err)
	}
	if err, ok := a.f.Response().(error); ok {
		return classifyApplyError(err)
	}
	return nil
}

// classifyApplyError marks the raft.Apply errors after which the entry was certainly not
// appended — raft refuses it while not leader or while a leadership transfer is in progress —
// as actors.ErrNotApplied, so the router may send the request to the new leader. Any other
// error (leadership lost with the entry in flight, shutdown) leaves the outcome unknown.
// The FSM's refusal of a command naming a partition a split moved out is not-applied too:
// every replica refused it alike.
func classifyApplyError(err error) error {
	if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipTransferInProgress) || errors.Is(err, persistence.ErrMoved) {
		return fmt.Errorf("%w: %w", actors.ErrNotApplied, err)
	}
	return err
}

// Propose appends an encoded command to group g's log (see actors.Replicator). While the
// disk is low it is refused before Raft sees it (actors.ErrNotApplied).
func (h *Host) Propose(g uint32, cmd []byte) interface{ Error() error } {
	if h.cfg.Disk != nil {
		if err := h.cfg.Disk.Err(); err != nil {
			return refused{fmt.Errorf("%w: %w", actors.ErrNotApplied, err)}
		}
	}
	gr := h.group(g)
	if gr == nil {
		return refused{NotHere(g)}
	}
	return noted{applyFuture{gr.raft.Apply(cmd, 0)}, &gr.refusals}
}

// NotHere is the error for a group this node holds no instance of.
func NotHere(g uint32) error {
	return fmt.Errorf("%w: group %s has no replica on this node", actors.ErrNotApplied, GroupName(g))
}

// refused is the future of a proposal refused before Raft.
type refused struct{ err error }

func (r refused) Error() error { return r.err }

// Barrier waits until every entry committed in group g is applied locally.
func (h *Host) Barrier(g uint32, timeout time.Duration) error {
	gr := h.group(g)
	if gr == nil {
		return NotHere(g)
	}
	err := gr.raft.Barrier(timeout).Error()
	gr.refusals.note(err)
	return err
}

// VerifyLeader confirms with a quorum that this node still leads group g.
func (h *Host) VerifyLeader(g uint32) interface{ Error() error } {
	gr := h.group(g)
	if gr == nil {
		return refused{NotHere(g)}
	}
	if gr.fsm.Frozen() != 0 {
		// Frozen for a merge: the group on its left may already have written these
		// partitions, and a read from here would miss it.
		return refused{fmt.Errorf("%w: group %s: %w", actors.ErrNotApplied, GroupName(g), persistence.ErrFrozen)}
	}
	return gr.raft.VerifyLeader()
}

// LastTime is the greatest command time applied in group g.
func (h *Host) LastTime(g uint32) int64 {
	if gr := h.group(g); gr != nil {
		return gr.fsm.LastTime()
	}
	return 0
}

// StateHashes returns group g's applied index and its partitions' state hashes on this
// node, first partition first (see persistence.FSM.StateHashes).
func (h *Host) StateHashes(g uint32) (uint64, [][32]byte, error) {
	gr := h.group(g)
	if gr == nil {
		return 0, nil, NotHere(g)
	}
	return gr.fsm.StateHashes()
}

// GroupInfo is group g as this node's Raft instance knows it.
type GroupInfo struct {
	ID uint32
	// First and End are the group's partitions [First, End), and Gen its generation, as
	// applied here; Frozen is true while it is frozen for a merge.
	First, End, Gen uint32
	Frozen          bool
	// Replica is true when this node is in the group's latest configuration.
	Replica bool
	// Leader is the leader's server id, "" when this instance knows none.
	Leader      string
	Term        uint64
	Servers     []raft.Server
	Applied     uint64 // applied on this node
	Commit      uint64
	LastIndex   uint64
	LastContact time.Time // followers: the leader's last contact
	// Match holds, on the leader, each follower's acknowledged log index (see progress).
	Match map[raft.ServerID]uint64
}

// Info reports group id as this node's Raft instance knows it.
func (h *Host) Info(id uint32) GroupInfo {
	g := h.group(id)
	if g == nil {
		return GroupInfo{ID: id}
	}
	_, leader := g.raft.LeaderWithID()
	span := g.fsm.Group()
	in := GroupInfo{ID: id, First: span.First, End: span.End, Gen: span.Gen, Frozen: g.fsm.Frozen() != 0, Leader: string(leader), Term: g.raft.CurrentTerm(), Applied: g.fsm.AppliedIndex(),
		Commit: g.raft.CommitIndex(), LastIndex: g.raft.LastIndex(), LastContact: g.raft.LastContact()}
	if f := g.raft.GetConfiguration(); f.Error() == nil {
		in.Servers = f.Configuration().Servers
	}
	for _, s := range in.Servers {
		if string(s.ID) == h.cfg.ServerID {
			in.Replica = true
		}
	}
	if in.Leader == h.cfg.ServerID {
		in.Match = map[raft.ServerID]uint64{}
		for _, s := range in.Servers {
			if m, ok := g.progress.Match(s.ID); ok {
				in.Match[s.ID] = m
			}
		}
	}
	return in
}

// ServerID is this node's Raft server id.
func (h *Host) ServerID() string { return h.cfg.ServerID }

// HasState reports whether any group has Raft state on this node.
func (h *Host) HasState() bool {
	for _, g := range h.all() {
		if g.raft.LastIndex() > 0 {
			return true
		}
	}
	return false
}

// Bootstrap gives every group without state its initial configuration. Only the node
// chosen to bootstrap a new cluster calls it, once.
func (h *Host) Bootstrap(servers func(g uint32) []raft.Server) error {
	var errs []error
	for _, g := range h.all() {
		if g.ID>>31 != 0 {
			continue // born by a split, with its configuration
		}
		err := g.raft.BootstrapCluster(raft.Configuration{Servers: servers(g.ID)}).Error()
		if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			errs = append(errs, fmt.Errorf("bootstrap group %d: %w", g.ID, err))
		}
	}
	return errors.Join(errs...)
}

// Change carries out a reconciler's decision on group g, which this node leads.
func (h *Host) Change(g uint32, a Action) error {
	const timeout = 5 * time.Second
	gr := h.group(g)
	if gr == nil {
		return NotHere(g)
	}
	r := gr.raft
	if a.Kind != TransferLeadership {
		// After a Barrier this leader has applied every entry its log holds: a freeze (a
		// merge needs the groups' voters unchanged from its check to its end) and a merge
		// (a replica added now must not replay it: the log is compacted past it first).
		if err := r.Barrier(timeout).Error(); err != nil {
			gr.refusals.note(err)
			return err
		}
		h.mu.RLock()
		merging := h.merging[g]
		h.mu.RUnlock()
		if merging || gr.fsm.Frozen() != 0 {
			return fmt.Errorf("%w: group %s is merging", ErrMergeBusy, GroupName(g))
		}
	}
	if a.Kind == AddNonvoter || a.Kind == PromoteVoter {
		if err := h.compactPastMerge(gr); err != nil {
			return err
		}
	}
	switch a.Kind {
	case RemoveServer:
		return r.RemoveServer(a.Server, 0, timeout).Error()
	case AddNonvoter:
		return r.AddNonvoter(a.Server, a.Address, 0, timeout).Error()
	case PromoteVoter:
		return r.AddVoter(a.Server, a.Address, 0, timeout).Error()
	case TransferLeadership:
		if !h.answered(gr, a.Server) {
			return fmt.Errorf("transfer leadership of group %s to %s: it has not answered within %s", GroupName(g), a.Server, h.cfg.HeartbeatTimeout)
		}
		err := r.LeadershipTransferToServer(a.Server, a.Address).Error()
		gr.refusals.note(err)
		return err
	}
	return nil
}

// Close shuts every group down (leadership is not handed over; see TransferLeadership).
func (h *Host) Close() error {
	h.mu.Lock() // no group starts opening after this
	select {
	case <-h.stop:
		h.mu.Unlock()
		return nil
	default:
		close(h.stop)
	}
	var opening []chan struct{}
	for _, ch := range h.opening {
		opening = append(opening, ch)
	}
	h.mu.Unlock()
	for _, ch := range opening {
		<-ch // it shuts its own instance down
	}
	h.recording.Wait() // EnsureGroup's records, which started before stop
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, g := range h.all() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.stop(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("group %d: %w", g.ID, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	h.wg.Wait()
	errs = append(errs, h.mux.Close())
	return errors.Join(errs...)
}

// Addr is the Raft address other nodes dial: the advertised host with the bound port.
func (h *Host) Addr() string { return h.addr }
