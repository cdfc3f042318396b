package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	"github.com/shardkeeper/shardkeeper/persistence"
)

// Merges, on the host's side (persistence/merge.go has the protocol and the apply). The
// node leading two adjacent groups on the same voters coordinates: it has each group's log
// record its configuration afresh, freezes the right one for the left one, waits until every
// voter holds the freeze, and proposes the merge in the left one's log. Every replica
// applying the merge brings its instance of the right group to the freeze from its own log,
// stops it, and drops it (mergeIn). A freeze whose merge did not happen is decided against
// in the left group's log first (Abort), then undone (ResolveFreeze).

// ErrMergeBusy reports a merge that cannot start now: a group is not led here, not settled,
// or frozen already.
var ErrMergeBusy = errors.New("merge cannot start now")

// Merge takes group r into group l, both led here, l's range ending where r's starts, both
// with the same voters and no other server. It returns once the merge is applied here, or
// after deciding in l's log that it did not happen and reopening r. Every member must run a
// release that applies merges; the caller checks.
func (h *Host) Merge(l, r uint32, timeout time.Duration) (persistence.Group, error) {
	lg, rg := h.group(l), h.group(r)
	if lg == nil || rg == nil {
		return persistence.Group{}, fmt.Errorf("%w: a group has no replica here", ErrMergeBusy)
	}
	h.mu.Lock()
	if h.merging[l] || h.merging[r] {
		h.mu.Unlock()
		return persistence.Group{}, fmt.Errorf("%w: a merge of these groups is in progress", ErrMergeBusy)
	}
	h.merging[l], h.merging[r] = true, true
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.merging, l)
		delete(h.merging, r)
		h.mu.Unlock()
	}()
	deadline := time.Now().Add(timeout)
	if lg.raft.State() != raft.Leader || rg.raft.State() != raft.Leader {
		return persistence.Group{}, fmt.Errorf("%w: both groups must be led here", ErrMergeBusy)
	}
	if ls, rs := lg.fsm.Group(), rg.fsm.Group(); ls.End != rs.First || rg.fsm.Frozen() != 0 || lg.fsm.Frozen() != 0 {
		return persistence.Group{}, fmt.Errorf("%w: %s [%d, %d) and %s [%d, %d) are not adjacent and open", ErrMergeBusy,
			GroupName(l), ls.First, ls.End, GroupName(r), rs.First, rs.End)
	}
	servers, err := sameVoterConfig(lg.raft, rg.raft)
	if err != nil {
		return persistence.Group{}, err
	}
	// Each log records its configuration afresh, now that every voter runs a release that
	// records it: the freeze and the merge name that entry, which every replica holds alike.
	var configs [2]uint64
	for i, g := range []*group{lg, rg} {
		if configs[i], err = h.recordConfig(g, servers, time.Until(deadline)); err != nil {
			return persistence.Group{}, err
		}
	}
	now := max(time.Now().UnixMilli(), rg.fsm.LastTime(), lg.fsm.LastTime())
	fr := persistence.Freeze{L: l, ConfigIndex: configs[1], Servers: servers}
	f := rg.raft.Apply(persistence.EncodeFreeze(nil, now, fr), time.Until(deadline))
	if err := (applyFuture{f}).Error(); err != nil {
		return persistence.Group{}, fmt.Errorf("freeze group %s: %w", GroupName(r), err)
	}
	at := f.Index()
	rs := rg.fsm.Group()
	err = h.awaitFreeze(rg, servers, at, deadline)
	if err == nil {
		now = max(time.Now().UnixMilli(), rg.fsm.LastTime(), lg.fsm.LastTime())
		cmd := persistence.EncodeMerge(nil, now, persistence.Merge{L: l, R: rs, At: at, ConfigIndex: configs[0], Servers: servers})
		if err = (applyFuture{lg.raft.Apply(cmd, time.Until(deadline))}).Error(); err == nil {
			return lg.fsm.Group(), nil
		}
	}
	if rerr := h.resolveFreeze(lg, rg, at); rerr != nil {
		err = errors.Join(err, rerr)
	}
	return persistence.Group{}, fmt.Errorf("merge group %s into %s: %w", GroupName(r), GroupName(l), err)
}

// recordConfig appends a configuration entry to g's log holding its configuration as it is
// (servers), and waits until g's FSM has applied it; it returns the entry's index.
func (h *Host) recordConfig(g *group, servers []raft.Server, timeout time.Duration) (uint64, error) {
	var self *raft.Server
	for i := range servers {
		if string(servers[i].ID) == h.cfg.ServerID {
			self = &servers[i]
		}
	}
	if self == nil {
		return 0, fmt.Errorf("%w: this node is not a voter of group %s", ErrMergeBusy, GroupName(g.ID))
	}
	// Adding a voter that is one already changes nothing but appends the configuration.
	f := g.raft.AddVoter(self.ID, self.Address, 0, timeout)
	if err := f.Error(); err != nil {
		return 0, fmt.Errorf("record the configuration of group %s: %w", GroupName(g.ID), err)
	}
	if err := g.raft.Barrier(timeout).Error(); err != nil {
		return 0, fmt.Errorf("record the configuration of group %s: %w", GroupName(g.ID), err)
	}
	if got := g.fsm.ConfigIndex(); got != f.Index() {
		return 0, fmt.Errorf("%w: group %s's configuration changed meanwhile (entry %d, not %d)", ErrMergeBusy, GroupName(g.ID), got, f.Index())
	}
	return f.Index(), nil
}

// sameVoterConfig returns the voters of l and r when both configurations hold exactly the
// same voters and no other server.
func sameVoterConfig(l, r *raft.Raft) ([]raft.Server, error) {
	lf, rf := l.GetConfiguration(), r.GetConfiguration()
	if err := errors.Join(lf.Error(), rf.Error()); err != nil {
		return nil, err
	}
	if !persistence.SameVoters(lf.Configuration().Servers, rf.Configuration().Servers) {
		return nil, fmt.Errorf("%w: the groups' replicas differ or one is changing", ErrMergeBusy)
	}
	return rf.Configuration().Servers, nil
}

// awaitFreeze waits, while this node leads r in the same term, until every one of servers has
// acknowledged r's log up to index at in that term (the leader's own view of replication).
func (h *Host) awaitFreeze(r *group, servers []raft.Server, at uint64, deadline time.Time) error {
	term := r.raft.CurrentTerm()
	for {
		if r.raft.State() != raft.Leader || r.raft.CurrentTerm() != term {
			return fmt.Errorf("lost the leadership of group %s", GroupName(r.ID))
		}
		held := true
		for _, s := range servers {
			if string(s.ID) == h.cfg.ServerID {
				continue
			}
			if m, ok := r.progress.MatchIn(s.ID, term); !ok || m < at {
				held = false
			}
		}
		if held {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not every replica of group %s holds its freeze at %d", GroupName(r.ID), at)
		}
		select {
		case <-h.stop:
			return raft.ErrRaftShutdown
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// resolveFreeze decides in l's log that the merge of r frozen at index at did not happen,
// then reopens r. When l's log took r in already, there is nothing to undo.
func (h *Host) resolveFreeze(l, r *group, at uint64) error {
	const timeout = 5 * time.Second
	err := (applyFuture{l.raft.Apply(persistence.EncodeAbort(nil, l.ID, r.ID, at), timeout)}).Error()
	switch {
	case errors.Is(err, persistence.ErrMerged):
		return nil
	case err != nil:
		return fmt.Errorf("abort the merge in group %s: %w", GroupName(l.ID), err)
	}
	return h.unfreeze(r, at, l.ID)
}

func (h *Host) unfreeze(r *group, at uint64, l uint32) error {
	if err := (applyFuture{r.raft.Apply(persistence.EncodeUnfreeze(nil, at), 5*time.Second)}).Error(); err != nil {
		return fmt.Errorf("unfreeze group %s: %w", GroupName(r.ID), err)
	}
	h.cfg.Logger.Info("merge abandoned; raft group reopened", "group", GroupName(r.ID), "into", GroupName(l))
	return nil
}

// ResolveFreeze settles the groups held here that are frozen for a merge nobody carries out
// here (its coordinator failed or lost a leadership). The freeze names the group l the merge
// is for, whose log alone decides it:
//   - l's leader proposes Abort there, unless l's log decided already;
//   - r's leader reopens r once this node's instance of l has applied that Abort, or once
//     l was merged into another group here by its own freeze (its log, applied here up to
//     the freeze, did not take r in, and refuses a merge after it).
//
// It returns how many groups it changed.
func (h *Host) ResolveFreeze() (changed int, err error) {
	var errs []error
	for _, rg := range h.all() {
		at, l := rg.fsm.Frozen(), rg.fsm.FrozenFor()
		h.mu.RLock()
		busy := h.merging[rg.ID] || h.merging[l]
		h.mu.RUnlock()
		if at == 0 || busy {
			continue
		}
		lg := h.group(l)
		gone, gerr := h.cfg.Store.MergedAway(l)
		if gerr != nil {
			errs = append(errs, gerr)
			continue
		}
		switch {
		case lg == nil && !gone:
			continue // nothing known here of l
		case rg.raft.State() == raft.Leader && (gone || lg.fsm.Decision(rg.ID, at) == 'a'):
			err = h.unfreeze(rg, at, l)
		case lg == nil || lg.raft.State() != raft.Leader || lg.fsm.Decision(rg.ID, at) != 0:
			continue // l's leader decides, or r's reopens
		case rg.raft.State() == raft.Leader:
			err = h.resolveFreeze(lg, rg, at)
		default:
			err = (applyFuture{lg.raft.Apply(persistence.EncodeAbort(nil, l, rg.ID, at), 5*time.Second)}).Error()
			if errors.Is(err, persistence.ErrMerged) {
				err = nil
			}
		}
		if err != nil {
			errs = append(errs, err)
		} else {
			changed++
		}
	}
	return changed, errors.Join(errs...)
}

// mergeIn is OnMerge of group l: it brings this node's replica of r to its freeze at index at
// from its own log, which holds every entry up to there (the coordinator saw it so), and
// stops and drops its instance. It runs on l's FSM goroutine.
func (h *Host) mergeIn(l uint32) func(r persistence.Group, at uint64) error {
	return func(r persistence.Group, at uint64) error {
		// At a start, r may not be open yet: wait until every recorded group is.
		select {
		case <-h.opened:
		case <-h.stop:
		}
		fsm := (*persistence.FSM)(nil)
		if rg := h.group(r.ID); rg != nil {
			h.shutdown(rg)
			fsm = rg.fsm
		} else {
			// Not open: stopped here already for a snapshot of l that did not go in, or the
			// node is stopping. Its state and log are on disk until l's merge or restore
			// removes them; its entries up to the freeze apply as in its own instance.
			var err error
			if fsm, err = h.cfg.Store.FSM(r); err != nil {
				return err
			}
			h.hook(fsm, r)
		}
		if applied := fsm.AppliedIndex(); applied < at {
			logs := h.cfg.Store.LogStore(r.First)
			entries := make([]*raft.Log, 0, at-applied)
			for i := applied + 1; i <= at; i++ {
				e := new(raft.Log)
				if err := logs.GetLog(i, e); err != nil {
					return fmt.Errorf("group %s entry %d, before its freeze: %w", GroupName(r.ID), i, err)
				}
				entries = append(entries, e)
			}
			fsm.ApplyBatch(entries)
		}
		if got, by := fsm.Frozen(), fsm.FrozenFor(); got != at || by != l {
			return fmt.Errorf("group %s is frozen at %d for %s here, not at %d for %s", GroupName(r.ID), got, GroupName(by), at, GroupName(l))
		}
		h.forget(r)
		h.cfg.Logger.Info("raft group merged into another", "group", GroupName(r.ID), "into", GroupName(l),
			"partitions", fmt.Sprintf("[%d, %d)", r.First, r.End))
		return nil
	}
}

// merged is OnMerged: l holds r's range from now on. Every replica then compacts l's log past
// the merge, so that whichever of them leads l later never sends the merge entry to a
// replica added after it.
func (h *Host) merged(l, r persistence.Group) {
	h.mu.Lock()
	h.spans[l.ID] = l
	h.rebuildOwners()
	h.mu.Unlock()
	h.spansChanged()
	h.removeSnapshots(r) // tombstoned now: it never opens again
	if g := h.group(l.ID); g != nil {
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			// Raft refuses a snapshot during a leadership transfer, which often follows a
			// merge (the leaderships rebalance): try again for a while.
			var err error
			for range 30 {
				if err = h.compactPastMerge(g); err == nil || errors.Is(err, raft.ErrRaftShutdown) {
					return
				}
				select {
				case <-g.stopping:
					return
				case <-h.stop:
					return
				case <-time.After(time.Second):
				}
			}
			h.cfg.Logger.Warn("compact a raft group's log past its merge", "group", GroupName(l.ID), "error", err)
		}()
	}
}

// absorb is OnAbsorb of group l: a snapshot of l restores [from, to) at generation gen. The
// groups recorded here that start inside it, after from, with an older generation, are
// stopped and no longer hold their partitions (nor open, also at a start); once the snapshot
// is in, they are dropped.
func (h *Host) absorb(l uint32) func(from, to, gen uint32) (func() error, error) {
	return func(from, to, gen uint32) (func() error, error) {
		var held []persistence.Group
		h.mu.Lock()
		for _, s := range h.spans {
			if s.ID != l && s.First > from && s.First < to && s.Gen < gen {
				h.absorbing[s.ID] = true
				held = append(held, s)
			}
		}
		h.mu.Unlock()
		h.retire(held)
		if len(held) == 0 {
			return nil, nil
		}
		return func() error {
			if err := h.cfg.Store.Absorb(held); err != nil {
				return err
			}
			for _, s := range held {
				h.removeSnapshots(s)
				h.cfg.Logger.Info("raft group taken in by a merge, from a snapshot", "group", GroupName(s.ID), "into", GroupName(l))
			}
			return nil
		}, nil
	}
}

// shutdown stops group g's Raft instance here for good and, once its leadership watcher has
// returned, tells the runtime it leads it no more (nothing reports otherwise after that).
func (h *Host) shutdown(g *group) {
	_ = g.stop()
	h.mu.RLock()
	watching := g.watching
	h.mu.RUnlock()
	if watching {
		<-g.watched
	}
	if h.onLeadership != nil {
		h.onLeadership(g.ID, false)
	}
}

// retire stops the groups' instances here, if open, and removes them from the host.
func (h *Host) retire(groups []persistence.Group) {
	for _, s := range groups {
		if g := h.group(s.ID); g != nil {
			h.shutdown(g)
		}
		h.forget(s)
	}
}

// forget removes a stopped group from the host.
func (h *Host) forget(g persistence.Group) {
	h.mu.Lock()
	delete(h.groups, g.ID)
	delete(h.spans, g.ID)
	h.rebuildOwners()
	h.mu.Unlock()
}

// removeSnapshots removes the snapshots of a group tombstoned here (never before: a group
// that opens again needs them, its log may start after them).
func (h *Host) removeSnapshots(g persistence.Group) {
	if err := os.RemoveAll(filepath.Join(h.cfg.SnapshotDir, snapshotDirName(g))); err != nil {
		h.cfg.Logger.Warn("remove the snapshots of a dropped raft group", "group", GroupName(g.ID), "error", err)
	}
}

// dropStale stops and drops the groups recorded here that start where g does with an older
// generation: g took their first partition over (a split of a group that had merged them),
// and a node outside that merge kept them. It reports false when a group as new as g
// already starts there (g is the stale one).
func (h *Host) dropStale(g persistence.Group) (bool, error) {
	var stale []persistence.Group
	h.mu.RLock()
	for _, s := range h.spans {
		switch {
		case s.ID == g.ID || s.First != g.First:
		case s.Gen >= g.Gen:
			h.mu.RUnlock()
			return false, nil
		default:
			stale = append(stale, s)
		}
	}
	h.mu.RUnlock()
	h.retire(stale)
	if len(stale) == 0 {
		return true, nil
	}
	if err := h.cfg.Store.Drop(stale); err != nil {
		return false, err
	}
	for _, s := range stale {
		h.removeSnapshots(s)
		h.cfg.Logger.Info("stale raft group dropped: a newer one starts at its first partition", "group", GroupName(s.ID), "by", GroupName(g.ID))
	}
	return true, nil
}

// compactPastMerge makes sure a replica added to g now starts from a snapshot, never from
// a log entry at or before the last merge g applied: it would have no instance of the
// merged group to bring to its freeze. It snapshots g with no trailing log kept when its log
// still reaches back there.
func (h *Host) compactPastMerge(g *group) error {
	at := g.fsm.MergedAt()
	if at == 0 {
		return nil
	}
	// A first index of 0 is an empty log.
	first, err := h.cfg.Store.LogStore(g.First).FirstIndex()
	if err != nil || first > at || first == 0 {
		return err
	}
	h.compactMu.Lock() // ReloadConfig of one group at a time: each restores what it found
	defer h.compactMu.Unlock()
	rc := g.raft.ReloadableConfig()
	keep := rc
	rc.TrailingLogs = 0
	if err := g.raft.ReloadConfig(rc); err != nil {
		return err
	}
	err = g.raft.Snapshot().Error()
	if errors.Is(err, raft.ErrNothingNewToSnapshot) {
		// Nothing applied since this instance started: a barrier is something.
		if err = g.raft.Barrier(5 * time.Second).Error(); err == nil {
			err = g.raft.Snapshot().Error()
		}
	}
	if rerr := g.raft.ReloadConfig(keep); rerr != nil {
		err = errors.Join(err, rerr)
	}
	if err != nil {
		return fmt.Errorf("compact group %s past its merge at %d: %w", GroupName(g.ID), at, err)
	}
	if first, err = h.cfg.Store.LogStore(g.First).FirstIndex(); err == nil && first != 0 && first <= at {
		err = fmt.Errorf("group %s's log still starts at %d, at or before its merge at %d", GroupName(g.ID), first, at)
	}
	return err
}
