package persistence

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"math"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"
)

// FSM applies a group's committed Raft entries to the node's Pebble DB: each op to the state
// of the partition it names, which must be one of the group's.
//
// Invariant: the state written by entries 1..applied and the applied index itself are always
// in Pebble together, because they are written in the same batch. Entries at or below the
// stored applied index are skipped, which makes re-delivery after a restart harmless (raft runs
// with NoSnapshotRestoreOnStart and replays the log after its last snapshot).
//
// State batches are not synced: the Raft log is, and any state lost in a crash is re-derived
// by replaying it. Snapshot syncs before raft may compact the log.
//
// The group's range [First, End) shrinks when it applies a split (split.go) or restores a
// snapshot taken after one, and grows when it applies a merge (merge.go) or restores a
// snapshot taken after one; its id and first partition never change.
//
// Apply, ApplyBatch, Snapshot and Restore are called from raft's FSM goroutine only.
// AppliedIndex, LastTime, Group and the other getters may be called from any goroutine.
type FSM struct {
	s         *Store
	id, first uint32
	end       atomic.Uint32
	applied   atomic.Uint64
	time      atomic.Int64
	gen       atomic.Uint32 // raised by every split and merge (Group.Gen)
	frozen    atomic.Uint64 // the index of the freeze this group is frozen at, 0 when none
	frozenFor atomic.Uint32 // the group the freeze is for
	mergedAt  atomic.Uint64 // the index of the last merge it applied
	config    atomic.Pointer[[]raft.Server]
	configAt  atomic.Uint64 // the index of the entry that set config
	// onSplit, onRestore, onMerge, onMerged and onAbsorb are the host's (split.go,
	// merge.go): onSplit is called on the FSM goroutine after a split's batch is durable,
	// with the group's range after it and the child it created; onRestore after a restore.
	onSplit   func(parent, child Group)
	onRestore func(g Group)
	onMerge   func(r Group, at uint64) error
	onMerged  func(l, r Group)
	onAbsorb  func(from, to, gen uint32) (func() error, error)
	// owns, when set, tells whether this group holds partition p on this node: false for
	// a partition of its range that a group born from it holds here (see SetOwner).
	owns func(p uint32) bool
}

var _ raft.BatchingFSM = (*FSM)(nil)

// FSM returns group g's state machine, loading its applied index from disk.
func (s *Store) FSM(g Group) (*FSM, error) {
	if g.End <= g.First {
		return nil, fmt.Errorf("group %d holds no partition ([%d, %d))", g.ID, g.First, g.End)
	}
	// The group's own metadata, once it has any, is the word on its range (a split may
	// have shrunk it since the range given was known).
	if end, ok, err := s.recordedEnd(g); err != nil {
		return nil, err
	} else if ok {
		g.End = end
	}
	f := &FSM{s: s, id: g.ID, first: g.First}
	f.end.Store(g.End)
	f.gen.Store(g.Gen)
	if err := f.load(); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *FSM) load() error {
	applied, err := f.s.metaU64(f.first, metaApplied)
	if err != nil {
		return err
	}
	last, err := f.s.metaU64(f.first, metaTime)
	if err != nil {
		return err
	}
	mergedAt, err := f.s.metaU64(f.first, metaMergedAt)
	if err != nil {
		return err
	}
	f.applied.Store(applied)
	f.time.Store(int64(last))
	f.mergedAt.Store(mergedAt)
	gen, ok, err := f.s.metaU32(f.first, metaGen)
	if err != nil {
		return err
	}
	if ok {
		f.gen.Store(gen)
	}
	f.frozen.Store(0)
	f.frozenFor.Store(0)
	if v, closer, err := f.s.db.Get(metaKey(f.first, metaFrozen)); err == nil {
		if len(v) != 12 {
			closer.Close()
			return fmt.Errorf("corrupt freeze record of group %d: %x", f.id, v)
		}
		f.frozen.Store(binary.BigEndian.Uint64(v))
		f.frozenFor.Store(binary.BigEndian.Uint32(v[8:]))
		closer.Close()
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("load the freeze of group %d: %w", f.id, err)
	}
	f.config.Store(nil)
	f.configAt.Store(0)
	v, closer, err := f.s.db.Get(metaKey(f.first, metaConfig))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("load configuration of group %d: %w", f.id, err)
	}
	defer closer.Close()
	err = fmt.Errorf("%d bytes", len(v))
	var servers []raft.Server
	if len(v) > 8 {
		servers, err = decodeServers(v[8:])
	}
	if err != nil {
		return fmt.Errorf("corrupt configuration of group %d: %w", f.id, err)
	}
	f.config.Store(&servers)
	f.configAt.Store(binary.BigEndian.Uint64(v))
	return nil
}

// configRecord is the value of a group's configuration record: the index of the entry
// that set it (u64), then its servers as in a split.
func configRecord(index uint64, servers []raft.Server) []byte {
	return appendServers(binary.BigEndian.AppendUint64(nil, index), servers)
}

// Group is the group's id and its range as last applied.
func (f *FSM) Group() Group {
	return Group{ID: f.id, First: f.first, End: f.end.Load(), Gen: f.gen.Load()}
}

// OnSplit sets the function called, on the FSM goroutine, after each split this group
// applies, with the group's range after it and the child it created (see split.go), and
// OnRestore the one called after each restore. Set them before the FSM is used.
func (f *FSM) OnSplit(fn func(parent, child Group)) { f.onSplit = fn }

// OnRestore: see OnSplit.
func (f *FSM) OnRestore(fn func(g Group)) { f.onRestore = fn }

// SetOwner sets the test of whether this group holds a partition of its range on this node.
// A replica that lags behind a split can already hold the split's child here (it received
// the child's snapshot); until it applies the split, the entries it applies and the
// snapshots it restores must leave the child's partitions alone. Their writes are skipped
// (the child's state is newer than anything they carry). Set it before the FSM is used.
func (f *FSM) SetOwner(owns func(p uint32) bool) { f.owns = owns }

// AppliedIndex is the index of the last entry applied to Pebble.
func (f *FSM) AppliedIndex() uint64 { return f.applied.Load() }

// LastTime is the greatest command time applied (Unix ms). A new leader never hands out a
// time below it, so the partitions' clocks does not run backwards across failover.
func (f *FSM) LastTime() int64 { return f.time.Load() }

// Apply applies one entry.
func (f *FSM) Apply(l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch applies entries in one Pebble batch (two around a merge, see applyMerge).
// Each response is nil or the error that made the command invalid (an invalid command
// writes nothing, deterministically on every replica). A split or a merge takes effect for
// the entries after it in the same batch.
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	resp := make([]any, len(logs))
	a := &applying{f: f, b: f.s.db.NewBatch(), applied: f.applied.Load(), last: f.time.Load(), g: f.Group(),
		frozen: f.frozen.Load(), frozenFor: f.frozenFor.Load(), mergedAt: f.mergedAt.Load(), config: f.Config(),
		configAt: f.configAt.Load()}
	a.committed = a.applied
	defer func() { a.b.Close() }()
	var key []byte
	for i, l := range logs {
		if l.Index <= a.applied {
			continue
		}
		a.applied = l.Index
		if l.Type == raft.LogConfiguration {
			// Recorded so that a freeze and a merge can check, the same on every replica,
			// which voters the group has at their place in the log.
			if servers, ok := decodeConfiguration(l.Data); ok {
				a.config, a.configAt = servers, l.Index
				_ = a.b.Set(metaKey(f.first, metaConfig), configRecord(l.Index, servers), nil)
			}
			continue
		}
		if l.Type != raft.LogCommand {
			continue
		}
		if len(l.Data) > 0 && l.Data[0] >= commandSplit && l.Data[0] <= commandAbort {
			if err := a.structural(l); err != nil {
				resp[i] = fmt.Errorf("group %d entry %d: %w", a.g.ID, l.Index, err)
			}
			continue
		}
		cmd, err := DecodeCommand(l.Data)
		if err == nil {
			err = confine(&cmd, a.g)
		}
		if err == nil && a.frozen != 0 {
			err = ErrFrozen
		}
		if err != nil {
			resp[i] = fmt.Errorf("group %d entry %d: %w", a.g.ID, l.Index, err)
			continue
		}
		for _, op := range cmd.Ops {
			if f.owns != nil && !f.owns(op.Partition) {
				continue // held here by a group a later split made (SetOwner)
			}
			// The batch copies the key: one buffer serves every op.
			key = append(appendPartitionPrefix(key[:0], op.Partition, sectionState), op.Key...)
			if op.Delete {
				err = a.b.Delete(key, nil)
			} else {
				err = a.b.Set(key, op.Value, nil)
			}
			if err != nil {
				panic(fmt.Sprintf("group %d: batch write: %v", a.g.ID, err))
			}
		}
		a.last = max(a.last, cmd.Time)
	}
	a.flush()
	return resp
}

// applying is one ApplyBatch in progress: the batch and the group as the entries so far
// left it.
type applying struct {
	f         *FSM
	b         *pebble.Batch
	applied   uint64 // the last entry added to b
	committed uint64 // the applied index when b began
	last      int64
	g         Group
	frozen    uint64
	frozenFor uint32
	mergedAt  uint64
	config    []raft.Server
	configAt  uint64
	sync      bool // b holds a split or a merge: committed synced
	locked    bool // Store.groupsMu is held until b commits
	children  []Group
	merged    []Group
	decided   map[string]byte // merge decisions in b
}

// lock takes Store.groupsMu until the batch commits: a split or a merge reads and writes
// the node's group records, which RecordGroup writes too.
func (a *applying) lock() {
	if !a.locked {
		a.f.s.groupsMu.Lock()
		a.locked = true
	}
	a.sync = true
}

// structural applies a split, freeze, unfreeze, merge or abort.
func (a *applying) structural(l *raft.Log) error {
	body := l.Data[1:]
	switch l.Data[0] {
	case commandSplit:
		t, sp, err := decodeSplit(body)
		if err != nil {
			return err
		}
		if a.frozen != 0 {
			return fmt.Errorf("%w: the group is frozen for a merge", ErrSplitRefused)
		}
		a.lock()
		child, err := a.f.applySplit(a.b, a.g, sp, max(a.last, t))
		if err != nil {
			return err
		}
		a.last = max(a.last, t)
		a.g.End, a.g.Gen = child.First, child.Gen
		a.children = append(a.children, child)
	case commandFreeze:
		t, fr, err := decodeFreeze(body)
		if err != nil {
			return err
		}
		a.sync = true // a merge relies on every replica keeping it once the coordinator saw it
		return a.applyFreeze(l.Index, t, fr)
	case commandUnfreeze:
		v, rest, err := readUvarints(body, 1)
		if err == nil {
			err = noTrailing(rest)
		}
		if err != nil {
			return err
		}
		return a.applyUnfreeze(v[0])
	case commandMerge:
		t, m, err := decodeMerge(body)
		if err != nil {
			return err
		}
		return a.applyMerge(l.Index, t, m)
	case commandAbort:
		v, rest, err := readUvarints(body, 3)
		if err == nil {
			err = noTrailing(rest)
		}
		if err == nil && (v[0] > math.MaxUint32 || v[1] > math.MaxUint32) {
			err = fmt.Errorf("%w: bad group", ErrBadCommand)
		}
		if err != nil {
			return err
		}
		return a.applyAbort(uint32(v[0]), uint32(v[1]), v[2])
	}
	return nil
}

// flush commits the batch, then tells the host of the splits and merges in it, and starts
// a new batch.
func (a *applying) flush() {
	f := a.f
	if a.applied == a.committed {
		return
	}
	_ = a.b.Set(metaKey(f.first, metaApplied), binary.BigEndian.AppendUint64(nil, a.applied), nil)
	_ = a.b.Set(metaKey(f.first, metaTime), binary.BigEndian.AppendUint64(nil, uint64(a.last)), nil)
	// A split or a merge is synced: the child's Raft state is written from it, outside
	// this batch, and must never be older than what it was written from; a merge has
	// stopped the group it took in for good.
	sync := pebble.NoSync
	if a.sync {
		sync = pebble.Sync
	}
	// A failed state write cannot be skipped without diverging from the other replicas, and
	// cannot be retried blindly: stop the process, as etcd does, and let restart replay.
	err := a.b.Commit(sync)
	if a.locked {
		f.s.groupsMu.Unlock()
	}
	if err != nil {
		panic(fmt.Sprintf("group %d: apply up to %d: %v", a.g.ID, a.applied, err))
	}
	f.applied.Store(a.applied)
	f.time.Store(a.last)
	f.end.Store(a.g.End)
	f.gen.Store(a.g.Gen)
	f.frozen.Store(a.frozen)
	f.frozenFor.Store(a.frozenFor)
	f.mergedAt.Store(a.mergedAt)
	if a.config != nil {
		cfg := a.config
		f.config.Store(&cfg)
		f.configAt.Store(a.configAt)
	}
	children, merged := a.children, a.merged
	_ = a.b.Close()
	*a = applying{f: f, b: f.s.db.NewBatch(), applied: a.applied, committed: a.applied, last: a.last, g: a.g,
		frozen: a.frozen, frozenFor: a.frozenFor, mergedAt: a.mergedAt, config: a.config, configAt: a.configAt,
		decided: a.decided}
	for _, c := range children {
		if f.onSplit != nil {
			f.onSplit(Group{ID: f.id, First: f.first, End: c.First, Gen: c.Gen}, c)
		}
	}
	for _, r := range merged {
		if f.onMerged != nil {
			f.onMerged(a.g, r)
		}
	}
}

// confine gives a version 1 command's ops the group's first partition, and refuses a
// command that names a partition outside g (nothing of it is applied). A partition that a
// split moved out is outside: ErrMoved, which tells the proposer to retry at the group that
// holds it now.
func confine(cmd *Command, g Group) error {
	for i := range cmd.Ops {
		if cmd.v1 {
			cmd.Ops[i].Partition = g.First
		}
		if p := cmd.Ops[i].Partition; !g.Contains(p) {
			return fmt.Errorf("%w: op %d names partition %d, outside the group's [%d, %d)", ErrMoved, i, p, g.First, g.End)
		}
	}
	return nil
}

// ErrMoved reports a command naming a partition its group does not hold (any more): it was
// applied nowhere, and belongs to the group that holds the partition now.
var ErrMoved = fmt.Errorf("%w: partition not in the group", ErrBadCommand)

// StateHashes returns the applied index and, per partition of the group (First first), a
// SHA-256 over its replicated state — its 'm' and 's' sections; the group's metadata is in
// its first partition's — all read through one Pebble iterator (a consistent view; a plain
// Pebble snapshot would not be, across a Restore's excise). Two replicas at the same applied
// index must return the same hashes; any difference is divergence.
func (f *FSM) StateHashes() (applied uint64, sums [][32]byte, err error) {
	g := f.Group()
	lo, hi := snapshotBounds(g)
	it, err := f.s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return 0, nil, err
	}
	hashes := make([]hash.Hash, g.End-g.First)
	for i := range hashes {
		hashes[i] = sha256.New()
	}
	strip := len(lo) - 1
	applyKey := metaKey(g.First, metaApplied)
	var frame []byte
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return 0, nil, err
		}
		if bytes.Equal(it.Key(), applyKey) && len(v) == 8 {
			applied = binary.BigEndian.Uint64(v)
		}
		p := binary.BigEndian.Uint32(it.Key()[1:5])
		frame = AppendComponent(frame[:0], it.Key()[strip:])
		frame = AppendComponent(frame, v)
		hashes[p-g.First].Write(frame)
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return 0, nil, err
	}
	sums = make([][32]byte, len(hashes))
	for i, h := range hashes {
		copy(sums[i][:], h.Sum(nil))
	}
	return applied, sums, nil
}

// decodeConfiguration decodes a configuration entry's servers; ok is false for bytes that
// are not one (raft.DecodeConfiguration panics on them).
func decodeConfiguration(data []byte) (servers []raft.Server, ok bool) {
	defer func() {
		if recover() != nil {
			servers, ok = nil, false
		}
	}()
	return raft.DecodeConfiguration(data).Servers, true
}
