package persistence

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/cockroachdb/pebble/v2"
)

// Layout maps P partitions onto G Raft groups. A partition is the unit of hashing and
// placement of actors; a group is the unit of consensus: one Raft log, one leader, one FSM
// and one snapshot for all of its partitions, so one Raft round commits the writes of every
// one of them. Group g holds the contiguous partitions [⌊g·P/G⌋, ⌊(g+1)·P/G⌋).
//
// Both counts are fixed when a data directory is first used (EnsureLayout). Data
// directories written before groups existed hold one partition per group (G = P), which is
// also what a zero Groups means.
type Layout struct{ Partitions, Groups int }

// Group is one Raft group's share of the partitions: [First, End). Its Raft log, stable
// store and FSM metadata live under its first partition's key prefix, so a group's
// snapshot is one contiguous key range (see keys.go).
//
// Gen is the group's generation: 0 for the layout's groups, raised by every split (on both
// halves) and merge (above both groups) it applies. Where two known ranges overlap, the
// higher generation is the newer word (Holders).
type Group struct{ ID, First, End, Gen uint32 }

// NoGroup marks, in a Holders table, a partition no group holds.
const NoGroup = ^uint32(0)

// Holders maps each of partitions partitions to the id of the group among groups that holds
// it, NoGroup where none does. Where ranges overlap — a group known from before a split or
// merge beside one known from after it — the group of the higher generation holds the
// partition, and among equal generations (ranges recorded before generations existed) the
// one starting later: a split's child always takes the end of its parent's range. groups
// is not changed.
func Holders(groups []Group, partitions int) []uint32 {
	sorted := slices.Clone(groups)
	slices.SortStableFunc(sorted, func(a, b Group) int {
		return cmp.Or(cmp.Compare(a.Gen, b.Gen), cmp.Compare(a.First, b.First))
	})
	table := make([]uint32, partitions)
	for i := range table {
		table[i] = NoGroup
	}
	for _, g := range sorted {
		for p := g.First; p < g.End && int(p) < partitions; p++ {
			table[p] = g.ID
		}
	}
	return table
}

// Count is G, with a zero Groups meaning one group per partition.
func (l Layout) Count() int {
	if l.Groups <= 0 {
		return l.Partitions
	}
	return l.Groups
}

// Group returns group g.
func (l Layout) Group(g uint32) Group {
	return Group{ID: g, First: l.first(g), End: l.first(g + 1)}
}

func (l Layout) first(g uint32) uint32 {
	return uint32(uint64(g) * uint64(l.Partitions) / uint64(l.Count()))
}

// Of returns the group of partition p: the g with ⌊g·P/G⌋ ≤ p < ⌊(g+1)·P/G⌋, which is
// ⌊((p+1)·G − 1) / P⌋.
func (l Layout) Of(p uint32) uint32 {
	return uint32(((uint64(p)+1)*uint64(l.Count()) - 1) / uint64(l.Partitions))
}

// Validate checks 1 ≤ G ≤ P.
func (l Layout) Validate() error {
	if l.Partitions < 1 || l.Count() < 1 || l.Count() > l.Partitions {
		return fmt.Errorf("layout of %d partitions over %d raft groups: want 1 ≤ groups ≤ partitions", l.Partitions, l.Count())
	}
	return nil
}

// Same reports whether l and o map partitions to the same groups.
func (l Layout) Same(o Layout) bool { return l.Partitions == o.Partitions && l.Count() == o.Count() }

// Contains reports whether partition p belongs to g.
func (g Group) Contains(p uint32) bool { return p >= g.First && p < g.End }

// EnsureLayout records the layout on first use and, once any group holds Raft state here,
// refuses any other: P decides which partition every identity hashes to and G which Raft log
// holds it, so neither can change. Until then another layout replaces the record (a node
// refused by a cluster of another layout before it replicated anything starts again with the
// right one). A directory that recorded only P (written before groups existed) has G = P.
func (s *Store) EnsureLayout(l Layout) error {
	if err := l.Validate(); err != nil {
		return err
	}
	have, ok, err := s.RecordedLayout()
	if err != nil {
		return err
	}
	if ok && (have.Partitions != l.Partitions || have.Groups != l.Count()) {
		held, err := s.hasRaftState(max(have.Partitions, l.Partitions))
		if err != nil {
			return err
		}
		if held {
			return &LayoutMismatchError{Recorded: have, Requested: Layout{l.Partitions, l.Count()}}
		}
		ok = false
	}
	if !ok {
		b := s.db.NewBatch()
		defer b.Close()
		_ = b.Set(nodeKey(nodeParts), binary.BigEndian.AppendUint32(nil, uint32(l.Partitions)), nil)
		_ = b.Set(nodeKey(nodeGroups), binary.BigEndian.AppendUint32(nil, uint32(l.Count())), nil)
		return b.Commit(pebble.Sync)
	}
	return nil
}

// hasRaftState reports whether a group whose first partition is among the first n holds
// Raft state: a log entry, or a term above zero (hashicorp/raft stores term 0 on a node that
// has only ever waited to be added), as raft.HasExistingState would count it.
func (s *Store) hasRaftState(n int) (bool, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixPartition}, UpperBound: []byte{prefixPartition + 1}})
	if err != nil {
		return false, err
	}
	defer it.Close()
	for p := range uint32(n) {
		logs := append(partitionPrefix(p, sectionRaft), raftLog)
		if it.SeekGE(logs) && bytes.HasPrefix(it.Key(), logs) {
			return true, nil
		}
		term, err := s.StableStore(p).GetUint64([]byte("CurrentTerm"))
		if err != nil && !errors.Is(err, errNotFound) {
			return false, err
		}
		if term > 0 {
			return true, nil
		}
	}
	return false, it.Error()
}

// RecordedLayout is the layout EnsureLayout recorded (Groups always set); ok is false in a
// directory that has none yet.
func (s *Store) RecordedLayout() (l Layout, ok bool, err error) {
	if l.Partitions, err = s.readCount(nodeParts); err != nil || l.Partitions == 0 {
		return Layout{}, false, err
	}
	if l.Groups, err = s.readCount(nodeGroups); err != nil {
		return Layout{}, false, err
	}
	if l.Groups == 0 {
		l.Groups = l.Partitions
	}
	return l, true, nil
}

// readCount reads a node count record; 0 when absent.
func (s *Store) readCount(name []byte) (int, error) {
	v, closer, err := s.db.Get(nodeKey(name))
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("read %s: %w", name, err)
	}
	defer closer.Close()
	if len(v) != 4 {
		return 0, fmt.Errorf("corrupt %s record %x", name, v)
	}
	return int(binary.BigEndian.Uint32(v)), nil
}

// LayoutMismatchError is returned when a data directory was bootstrapped with another layout.
type LayoutMismatchError struct{ Recorded, Requested Layout }

func (e *LayoutMismatchError) Error() string {
	r, q := e.Recorded, e.Requested
	if r.Partitions != q.Partitions {
		return "data directory was bootstrapped with --partitions=" + strconv.Itoa(r.Partitions) +
			" but --partitions=" + strconv.Itoa(q.Partitions) + " was given; P is fixed for the life of the cluster"
	}
	return "data directory was bootstrapped with --raft-groups=" + strconv.Itoa(r.Groups) +
		" but --raft-groups=" + strconv.Itoa(q.Groups) + " was given; the number of Raft groups is fixed for the life of the cluster"
}
