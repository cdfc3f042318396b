package persistence

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
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
// snapshot taken after one; its id and first partition never change.
//
// Apply, ApplyBatch, Snapshot and Restore are called from raft's FSM goroutine only.
// AppliedIndex, LastTime and Group may be called from any goroutine.
type FSM struct {
	s         *Store
	id, first uint32
	end       atomic.Uint32
	applied   atomic.Uint64
	time      atomic.Int64
	// onSplit, when set, is called on the FSM goroutine after a split's batch is durable,
	// with the group's range after it and the child it created; onRestore after a restore.
	onSplit   func(parent, child Group)
	onRestore func(g Group)
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
	if err := f.load(); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *FSM) load() error {
	for _, m := range []struct {
		name []byte
		set  func(uint64)
	}{
		{metaApplied, f.applied.Store},
		{metaTime, func(v uint64) { f.time.Store(int64(v)) }},
	} {
		v, closer, err := f.s.db.Get(metaKey(f.first, m.name))
		if errors.Is(err, pebble.ErrNotFound) {
			m.set(0)
			continue
		}
		if err != nil {
			return fmt.Errorf("load %s of group %d: %w", m.name, f.id, err)
		}
		if len(v) != 8 {
			closer.Close()
			return fmt.Errorf("corrupt %s of group %d: %x", m.name, f.id, v)
		}
		m.set(binary.BigEndian.Uint64(v))
		closer.Close()
	}
	return nil
}

// Group is the group's id and its range as last applied.
func (f *FSM) Group() Group { return Group{ID: f.id, First: f.first, End: f.end.Load()} }

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

// ApplyBatch applies entries in one Pebble batch. Each response is nil or the error that
// made the command invalid (an invalid command writes nothing, deterministically on every
// replica). A split takes effect for the entries after it in the same batch.
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	resp := make([]any, len(logs))
	applied, last := f.applied.Load(), f.time.Load()
	g := f.Group()
	var children []Group
	b := f.s.db.NewBatch()
	defer b.Close()
	var key []byte
	for i, l := range logs {
		if l.Index <= applied {
			continue
		}
		applied = l.Index
		if l.Type != raft.LogCommand {
			continue
		}
		if len(l.Data) > 0 && l.Data[0] == commandSplit {
			if children == nil {
				f.s.groupsMu.Lock() // until the batch commits (Store.groupsMu)
				children = []Group{}
			}
			t, sp, err := decodeSplit(l.Data[1:])
			var child Group
			if err == nil {
				child, err = f.applySplit(b, g, sp, max(last, t))
			}
			if err != nil {
				resp[i] = fmt.Errorf("group %d entry %d: %w", g.ID, l.Index, err)
				continue
			}
			last = max(last, t)
			g.End = child.First
			children = append(children, child)
			continue
		}
		cmd, err := DecodeCommand(l.Data)
		if err == nil {
			err = confine(&cmd, g)
		}
		if err != nil {
			resp[i] = fmt.Errorf("group %d entry %d: %w", g.ID, l.Index, err)
			continue
		}
		for _, op := range cmd.Ops {
			if f.owns != nil && !f.owns(op.Partition) {
				continue // held here by a group a later split made (SetOwner)
			}
			// The batch copies the key: one buffer serves every op.
			key = append(appendPartitionPrefix(key[:0], op.Partition, sectionState), op.Key...)
			if op.Delete {
				err = b.Delete(key, nil)
			} else {
				err = b.Set(key, op.Value, nil)
			}
			if err != nil {
				panic(fmt.Sprintf("group %d: batch write: %v", g.ID, err))
			}
		}
		last = max(last, cmd.Time)
	}
	if applied == f.applied.Load() {
		return resp
	}
	_ = b.Set(metaKey(f.first, metaApplied), binary.BigEndian.AppendUint64(nil, applied), nil)
	_ = b.Set(metaKey(f.first, metaTime), binary.BigEndian.AppendUint64(nil, uint64(last)), nil)
	// A split is synced: the child's Raft state is written from it, outside this batch, and
	// must never be older than what it was written from.
	sync := pebble.NoSync
	if children != nil {
		sync = pebble.Sync
	}
	// A failed state write cannot be skipped without diverging from the other replicas, and
	// cannot be retried blindly: stop the process, as etcd does, and let restart replay.
	err := b.Commit(sync)
	if children != nil {
		f.s.groupsMu.Unlock()
	}
	if err != nil {
		panic(fmt.Sprintf("group %d: apply up to %d: %v", g.ID, applied, err))
	}
	f.applied.Store(applied)
	f.time.Store(last)
	f.end.Store(g.End)
	for _, c := range children {
		if f.onSplit != nil {
			f.onSplit(Group{ID: f.id, First: f.first, End: c.First}, c)
		}
	}
	return resp
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
