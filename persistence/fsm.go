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
// Apply, ApplyBatch, Snapshot and Restore are called from raft's FSM goroutine only.
// AppliedIndex and LastTime may be called from any goroutine.
type FSM struct {
	s       *Store
	g       Group
	applied atomic.Uint64
	time    atomic.Int64
}

var _ raft.BatchingFSM = (*FSM)(nil)

// FSM returns group g's state machine, loading its applied index from disk.
func (s *Store) FSM(g Group) (*FSM, error) {
	if g.End <= g.First {
		return nil, fmt.Errorf("group %d holds no partition ([%d, %d))", g.ID, g.First, g.End)
	}
	f := &FSM{s: s, g: g}
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
		v, closer, err := f.s.db.Get(metaKey(f.g.First, m.name))
		if errors.Is(err, pebble.ErrNotFound) {
			m.set(0)
			continue
		}
		if err != nil {
			return fmt.Errorf("load %s of group %d: %w", m.name, f.g.ID, err)
		}
		if len(v) != 8 {
			closer.Close()
			return fmt.Errorf("corrupt %s of group %d: %x", m.name, f.g.ID, v)
		}
		m.set(binary.BigEndian.Uint64(v))
		closer.Close()
	}
	return nil
}

// AppliedIndex is the index of the last entry applied to Pebble.
func (f *FSM) AppliedIndex() uint64 { return f.applied.Load() }

// LastTime is the greatest command time applied (Unix ms). A new leader never hands out a
// time below it, so the partitions' clocks does not run backwards across failover.
func (f *FSM) LastTime() int64 { return f.time.Load() }

// Apply applies one entry.
func (f *FSM) Apply(l *raft.Log) any { return f.ApplyBatch([]*raft.Log{l})[0] }

// ApplyBatch applies entries in one Pebble batch. Each response is nil or the error that
// made the command invalid (an invalid command writes nothing, deterministically on every
// replica).
func (f *FSM) ApplyBatch(logs []*raft.Log) []any {
	resp := make([]any, len(logs))
	applied, last := f.applied.Load(), f.time.Load()
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
		cmd, err := DecodeCommand(l.Data)
		if err == nil {
			err = f.confine(&cmd)
		}
		if err != nil {
			resp[i] = fmt.Errorf("group %d entry %d: %w", f.g.ID, l.Index, err)
			continue
		}
		for _, op := range cmd.Ops {
			// The batch copies the key: one buffer serves every op.
			key = append(appendPartitionPrefix(key[:0], op.Partition, sectionState), op.Key...)
			if op.Delete {
				err = b.Delete(key, nil)
			} else {
				err = b.Set(key, op.Value, nil)
			}
			if err != nil {
				panic(fmt.Sprintf("group %d: batch write: %v", f.g.ID, err))
			}
		}
		last = max(last, cmd.Time)
	}
	if applied == f.applied.Load() {
		return resp
	}
	_ = b.Set(metaKey(f.g.First, metaApplied), binary.BigEndian.AppendUint64(nil, applied), nil)
	_ = b.Set(metaKey(f.g.First, metaTime), binary.BigEndian.AppendUint64(nil, uint64(last)), nil)
	// A failed state write cannot be skipped without diverging from the other replicas, and
	// cannot be retried blindly: stop the process, as etcd does, and let restart replay.
	if err := b.Commit(pebble.NoSync); err != nil {
		panic(fmt.Sprintf("group %d: apply up to %d: %v", f.g.ID, applied, err))
	}
	f.applied.Store(applied)
	f.time.Store(last)
	return resp
}

// confine gives a version 1 command's ops the group's first partition, and refuses a
// command that names a partition outside the group (nothing of it is applied).
func (f *FSM) confine(cmd *Command) error {
	for i := range cmd.Ops {
		if cmd.v1 {
			cmd.Ops[i].Partition = f.g.First
		}
		if p := cmd.Ops[i].Partition; !f.g.Contains(p) {
			return fmt.Errorf("%w: op %d names partition %d, outside the group's [%d, %d)", ErrBadCommand, i, p, f.g.First, f.g.End)
		}
	}
	return nil
}

// StateHashes returns the applied index and, per partition of the group (First first), a
// SHA-256 over its replicated state — its 'm' and 's' sections; the group's metadata is in
// its first partition's — all read through one Pebble iterator (a consistent view; a plain
// Pebble snapshot would not be, across a Restore's excise). Two replicas at the same applied
// index must return the same hashes; any difference is divergence.
func (f *FSM) StateHashes() (applied uint64, sums [][32]byte, err error) {
	lo, hi := snapshotBounds(f.g)
	it, err := f.s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return 0, nil, err
	}
	hashes := make([]hash.Hash, f.g.End-f.g.First)
	for i := range hashes {
		hashes[i] = sha256.New()
	}
	strip := len(lo) - 1
	applyKey := metaKey(f.g.First, metaApplied)
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
		hashes[p-f.g.First].Write(frame)
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
