package cluster

import (
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// A group's log store behind the disk guard: a follower refuses to grow its log while the
// disk is low, and the group goes on without it.

// Disk tells whether the data directory has room for writes (persistence.DiskGuard).
type Disk interface {
	// Err is nil while writes are allowed.
	Err() error
}

// guardedLogs is a group's log store that refuses to grow while the disk is low and this
// node follows the group: its leader is elsewhere, and a quorum of the other replicas
// goes on without it. As leader it still stores what it proposed before the disk got low
// (and Raft's own entries): a failed append would make it step down, and leadership go round
// in circles on a node alone.
type guardedLogs struct {
	raft.LogStore
	disk Disk
	r    atomic.Pointer[raft.Raft] // set once the group's Raft exists
}

func (l *guardedLogs) StoreLog(log *raft.Log) error { return l.StoreLogs([]*raft.Log{log}) }

func (l *guardedLogs) StoreLogs(logs []*raft.Log) error {
	if err := l.refused(); err != nil {
		return err
	}
	return l.LogStore.StoreLogs(logs)
}

// DeleteRange refuses, like StoreLogs, to cut the log's tail: a follower replacing a
// conflicting tail deletes it and then appends, and Raft, which caches its last index, would
// stay stuck on entries deleted without their replacement. Compaction (the head) goes on.
func (l *guardedLogs) DeleteRange(lo, hi uint64) error {
	if err := l.refused(); err != nil {
		if last, lerr := l.LogStore.LastIndex(); lerr != nil || hi >= last {
			return err
		}
	}
	return l.LogStore.DeleteRange(lo, hi)
}

// refused is the disk's refusal while this node follows the group, else nil.
func (l *guardedLogs) refused() error {
	if r := l.r.Load(); r != nil && r.State() == raft.Leader {
		return nil
	}
	return l.disk.Err()
}
