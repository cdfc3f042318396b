package actors

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/shardkeeper/shardkeeper/persistence"
)

// Replicator is the runtime's seam to consensus: the replicated log of each Raft group,
// which holds the commands of the group's partitions (persistence.Layout). The cluster
// package provides it over hashicorp/raft; MemReplicator is its in-memory twin.
//
// All methods are safe for concurrent use.
type Replicator interface {
	// Propose appends an encoded persistence.Command to group g's log. The future resolves
	// once the entry is applied to this node's state, or with an error when it cannot be
	// (for instance leadership was lost); on error the entry may still apply later.
	Propose(g uint32, cmd []byte) Future
	// Barrier returns once every entry of group g committed before the call is applied
	// locally.
	Barrier(g uint32, timeout time.Duration) error
	// LastTime is the greatest command time applied in group g (Unix ms).
	LastTime(g uint32) int64
	// VerifyLeader resolves without error only if this node still leads group g at some
	// point after the call (a quorum acknowledged it).
	VerifyLeader(g uint32) Future
}

// Future is the outcome of a proposal. Error blocks until it is known. It is an alias so that
// implementations in other packages need not import this one.
type Future = interface{ Error() error }

// MemReplicator applies proposals directly to the groups' FSMs on a real Store, in order,
// without Raft. It is for tests of the runtime; FailProposals injects commit failures, Split
// splits a group.
type MemReplicator struct {
	mu    sync.Mutex
	store *persistence.Store
	fsms  map[uint32]*persistence.FSM
	index map[uint32]uint64
	fail  func(g uint32) error
}

// NewMemReplicator returns a replicator over the groups of layout, on store.
func NewMemReplicator(store *persistence.Store, layout persistence.Layout) (*MemReplicator, error) {
	m := &MemReplicator{store: store, fsms: map[uint32]*persistence.FSM{}, index: map[uint32]uint64{}}
	for g := range uint32(layout.Count()) {
		if err := m.add(layout.Group(g)); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *MemReplicator) add(g persistence.Group) error {
	f, err := m.store.FSM(g)
	if err != nil {
		return err
	}
	m.fsms[g.ID], m.index[g.ID] = f, f.AppliedIndex()
	return nil
}

// Split applies a split of group g at partition at, as its log would, and starts the group
// it creates. It returns every group's range after it (for Runtime.Regroup).
func (m *MemReplicator) Split(g, at uint32) ([]persistence.Group, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	id, err := m.store.NextSplitID(at)
	if err != nil {
		return nil, err
	}
	f := m.fsms[g]
	end := f.Group().End
	m.index[g]++
	entry := persistence.EncodeSplit(nil, f.LastTime(), persistence.Split{At: at, Child: id})
	if err, ok := f.ApplyBatch([]*raft.Log{{Index: m.index[g], Type: raft.LogCommand, Data: entry}})[0].(error); ok {
		return nil, err
	}
	if err := m.add(persistence.Group{ID: id, First: at, End: end}); err != nil {
		return nil, err
	}
	var spans []persistence.Group
	for _, f := range m.fsms {
		spans = append(spans, f.Group())
	}
	return spans, nil
}

// Merge applies a merge of group r into group l, as their logs would: each records a
// one-voter configuration, r freezes, l takes it in. It returns every group's range after it
// (for Runtime.Regroup). A merge the FSMs refuse leaves r frozen.
func (m *MemReplicator) Merge(l, r uint32) ([]persistence.Group, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	servers := []raft.Server{{Suffrage: raft.Voter, ID: "mem", Address: "mem"}}
	config := raft.EncodeConfiguration(raft.Configuration{Servers: servers})
	apply := func(g uint32, typ raft.LogType, data []byte) (uint64, error) {
		m.index[g]++
		if err, ok := m.fsms[g].ApplyBatch([]*raft.Log{{Index: m.index[g], Type: typ, Data: data}})[0].(error); ok {
			return 0, err
		}
		return m.index[g], nil
	}
	var configs [2]uint64
	for i, g := range []uint32{l, r} {
		var err error
		if configs[i], err = apply(g, raft.LogConfiguration, config); err != nil {
			return nil, err
		}
	}
	lf, rf := m.fsms[l], m.fsms[r]
	t := max(lf.LastTime(), rf.LastTime())
	at, err := apply(r, raft.LogCommand, persistence.EncodeFreeze(nil, t, persistence.Freeze{L: l, ConfigIndex: configs[1], Servers: servers}))
	if err != nil {
		return nil, err
	}
	lf.OnMerge(func(persistence.Group, uint64) error { return nil }) // r applied all here
	merge := persistence.Merge{L: l, R: rf.Group(), At: at, ConfigIndex: configs[0], Servers: servers}
	if _, err := apply(l, raft.LogCommand, persistence.EncodeMerge(nil, t, merge)); err != nil {
		return nil, err
	}
	delete(m.fsms, r)
	delete(m.index, r)
	var spans []persistence.Group
	for _, f := range m.fsms {
		spans = append(spans, f.Group())
	}
	return spans, nil
}

// FailProposals makes every later proposal to a group fail with the error fn returns (nil
// lets it through). Pass nil to stop injecting.
func (m *MemReplicator) FailProposals(fn func(g uint32) error) {
	m.mu.Lock()
	m.fail = fn
	m.mu.Unlock()
}

type doneFuture struct{ err error }

func (f doneFuture) Error() error { return f.err }

// Propose implements Replicator.
func (m *MemReplicator) Propose(g uint32, cmd []byte) Future {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		if err := m.fail(g); err != nil {
			return doneFuture{err}
		}
	}
	f, ok := m.fsms[g]
	if !ok {
		return doneFuture{NotApplied("group %d has no replica here", g)} // merged away
	}
	m.index[g]++
	resp := f.ApplyBatch([]*raft.Log{{Index: m.index[g], Type: raft.LogCommand, Data: cmd}})
	if err, ok := resp[0].(error); ok {
		return doneFuture{fmt.Errorf("apply: %w", err)}
	}
	return doneFuture{}
}

// Barrier implements Replicator; proposals apply synchronously, so there is nothing to wait for.
func (m *MemReplicator) Barrier(uint32, time.Duration) error { return nil }

// LastTime implements Replicator (0 for a group merged away).
func (m *MemReplicator) LastTime(g uint32) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f, ok := m.fsms[g]; ok {
		return f.LastTime()
	}
	return 0
}

// VerifyLeader implements Replicator: the in-memory log has no rivals.
func (m *MemReplicator) VerifyLeader(uint32) Future { return doneFuture{} }
