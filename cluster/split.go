package cluster

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/raft"
	"github.com/shardkeeper/shardkeeper/persistence"
)

// Splits, on the host's side (persistence/split.go has the apply). A group's leader proposes
// a split; every replica applies it and opens the child here, born from a snapshot of the
// state the split left (writeBirth). A replica that applies the split later, or restarts
// before it opened the child, opens it the same way, from the same state.

// Split cuts group g, which this node leads, at partition at: g keeps its partitions below
// at, a new group takes the others, on g's replicas. It returns the new group once the split
// is applied here. Every member must run a release that applies splits (an older one would
// refuse the entry and diverge); the caller checks.
func (h *Host) Split(g, at uint32, timeout time.Duration) (persistence.Group, error) {
	gr := h.group(g)
	if gr == nil {
		return persistence.Group{}, NotHere(g)
	}
	if gr.raft.State() != raft.Leader {
		return persistence.Group{}, fmt.Errorf("split group %s: %w", GroupName(g), raft.ErrNotLeader)
	}
	span := gr.fsm.Group()
	if at <= span.First || at >= span.End {
		return persistence.Group{}, fmt.Errorf("split group %s at %d: %w: not inside [%d, %d)", GroupName(g), at, persistence.ErrSplitRefused, span.First, span.End)
	}
	f := gr.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return persistence.Group{}, err
	}
	id, err := h.cfg.Store.NextSplitID(at)
	if err != nil {
		return persistence.Group{}, err
	}
	now := max(time.Now().UnixMilli(), gr.fsm.LastTime())
	cmd := persistence.EncodeSplit(nil, now, persistence.Split{At: at, Child: id, Servers: f.Configuration().Servers})
	if err := (applyFuture{gr.raft.Apply(cmd, timeout)}).Error(); err != nil {
		return persistence.Group{}, fmt.Errorf("split group %s at %d: %w", GroupName(g), at, err)
	}
	return persistence.Group{ID: id, First: at, End: span.End}, nil
}

// born opens a child a split of one of this node's groups created. It runs on the parent's
// FSM goroutine, after the split is durable, so the child runs before the parent applies
// anything else. The watchers of ranges hear of the split before the child can report a
// leader. When opening fails the child opens at the next start (its birth record stays).
func (h *Host) born(parent, child persistence.Group) {
	h.mu.Lock()
	h.spans[parent.ID] = parent
	if g, ok := h.groups[child.ID]; ok {
		child = g.fsm.Group() // held here already, maybe with a range a later split shrank
	}
	h.spans[child.ID] = child
	h.rebuildOwners()
	h.mu.Unlock()
	h.spansChanged()
	_, err := h.open(child)
	switch {
	case errors.Is(err, raft.ErrRaftShutdown), errors.Is(err, persistence.ErrGone):
	case err != nil:
		h.cfg.Logger.Error("cannot open the group a split created; it opens at the next start", "group", GroupName(child.ID),
			"partitions", fmt.Sprintf("[%d, %d)", child.First, child.End), "error", err)
	default:
		h.cfg.Logger.Info("raft group born by a split", "group", GroupName(child.ID), "partitions", fmt.Sprintf("[%d, %d)", child.First, child.End))
	}
}

// EnsureGroup opens an instance of g, a group born by a split elsewhere, if this node has
// none, and records it so that it opens again after a restart. It starts without state and
// waits for g's leader to add it; its state then arrives by snapshot.
func (h *Host) EnsureGroup(g persistence.Group) error {
	if h.group(g.ID) != nil {
		return nil
	}
	h.mu.Lock()
	select {
	case <-h.stop: // the store may be closing
		h.mu.Unlock()
		return raft.ErrRaftShutdown
	default:
	}
	h.recording.Add(1) // Close waits for it before the store closes
	h.mu.Unlock()
	defer h.recording.Done()
	// The group's Raft state lives under its first partition: an older group that started
	// there and is still held here (a merge took it in elsewhere) must go first.
	if fresh, err := h.dropStale(g); err != nil || !fresh {
		return err
	}
	err := h.cfg.Store.RecordGroup(g)
	if errors.Is(err, persistence.ErrGone) {
		return nil // a merge took it in here; its record is stale
	}
	if err != nil {
		return err
	}
	_, err = h.open(g)
	if errors.Is(err, persistence.ErrGone) {
		return nil
	}
	return err
}

// writeBirth gives a split-born group that has no Raft state here yet its birth: a snapshot
// at persistence.BirthIndex holding its birth configuration and the state the split left,
// and that term. Every replica that applied the split writes the same one. A group that was
// not born here (or not by a split) is left alone, as is one with Raft state: born already,
// or caught up by its leader.
func (h *Host) writeBirth(pg persistence.Group, fsm *persistence.FSM, logs raft.LogStore, stable raft.StableStore,
	snaps raft.SnapshotStore, trans raft.Transport) error {
	servers, ok, err := h.cfg.Store.Birth(pg)
	if err != nil || !ok {
		return err
	}
	if !fsm.HoldsRange() {
		// A later split's child holds part of the range here already: the state the split
		// left is not all here. Born without state, the group gets its leader's snapshot.
		return nil
	}
	list, err := snaps.List()
	if err != nil {
		return err
	}
	last, err := logs.LastIndex()
	if err != nil || len(list) > 0 || last > 0 || fsm.AppliedIndex() != persistence.BirthIndex {
		return err
	}
	snap, err := fsm.Snapshot()
	if err != nil {
		return err
	}
	defer snap.Release()
	const birth = persistence.BirthIndex
	sink, err := snaps.Create(raft.SnapshotVersionMax, birth, birth, raft.Configuration{Servers: servers}, birth, trans)
	if err != nil {
		return fmt.Errorf("birth snapshot of group %s: %w", GroupName(pg.ID), err)
	}
	if err := snap.Persist(sink); err != nil { // closes or cancels the sink
		return fmt.Errorf("birth snapshot of group %s: %w", GroupName(pg.ID), err)
	}
	// The term after the snapshot's: written after it, so a crash in between leaves a
	// snapshot (state enough to start from) rather than a term without one.
	term, err := stable.GetUint64(keyCurrentTerm)
	if err != nil && !persistence.IsNotFound(err) {
		return err
	}
	if term < birth {
		return stable.SetUint64(keyCurrentTerm, birth)
	}
	return nil
}

// keyCurrentTerm is hashicorp/raft's stable store key of the current term.
var keyCurrentTerm = []byte("CurrentTerm")

// restored records the range a group restored from a snapshot (a split may have shrunk it).
func (h *Host) restored(g persistence.Group) {
	h.mu.Lock()
	changed := h.spans[g.ID] != g
	h.spans[g.ID] = g
	if changed {
		h.rebuildOwners()
	}
	h.mu.Unlock()
	if changed {
		h.spansChanged()
	}
}

// noOwner marks a partition no group holds here.
const noOwner = persistence.NoGroup

// rebuildOwners remakes the map of partitions to the groups holding them here
// (persistence.Holders); h.mu is held.
func (h *Host) rebuildOwners() {
	spans := make([]persistence.Group, 0, len(h.spans))
	for _, g := range h.spans {
		spans = append(spans, g)
	}
	owners := persistence.Holders(spans, h.cfg.Layout.Partitions)
	h.owners.Store(&owners)
}

// Owner returns the group that holds partition p on this node (see rebuildOwners), or
// noOwner.
func (h *Host) Owner(p uint32) uint32 {
	owners := *h.owners.Load()
	if int(p) >= len(owners) {
		return noOwner
	}
	return owners[p]
}

// Spans returns every group this node holds with its range as last applied here, first
// partition first.
func (h *Host) Spans() []persistence.Group {
	h.mu.RLock()
	out := make([]persistence.Group, 0, len(h.spans))
	for _, g := range h.spans {
		out = append(out, g)
	}
	h.mu.RUnlock()
	slices.SortFunc(out, func(a, b persistence.Group) int { return cmp.Compare(a.First, b.First) })
	return out
}

// WatchSpans registers fn, called after the ranges of the groups here change (a split
// applied, a snapshot restored with a smaller range), before a group a split created can
// report a leader. fn must not block: it runs on the applying group's FSM goroutine.
func (h *Host) WatchSpans(fn func()) {
	h.spanMu.Lock()
	defer h.spanMu.Unlock()
	h.spanWatchers = append(h.spanWatchers[:len(h.spanWatchers):len(h.spanWatchers)], fn)
}

func (h *Host) spansChanged() {
	h.spanMu.Lock()
	watchers := h.spanWatchers
	h.spanMu.Unlock()
	for _, fn := range watchers {
		fn()
	}
}
