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
// without Raft. It is for tests of the runtime; FailProposals injects commit failures.
type MemReplicator struct {
	mu    sync.Mutex
	fsms  []*persistence.FSM
	index []uint64
	fail  func(g uint32) error
}

// NewMemReplicator returns a replicator over the groups of layout, on store.
func NewMemReplicator(store *persistence.Store, layout persistence.Layout) (*MemReplicator, error) {
	n := layout.Count()
	m := &MemReplicator{fsms: make([]*persistence.FSM, n), index: make([]uint64, n)}
	for g := range n {
		f, err := store.FSM(layout.Group(uint32(g)))
		if err != nil {
			return nil, err
		}
		m.fsms[g], m.index[g] = f, f.AppliedIndex()
	}
	return m, nil
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
	m.index[g]++
	resp := m.fsms[g].ApplyBatch([]*raft.Log{{Index: m.index[g], Type: raft.LogCommand, Data: cmd}})
	if err, ok := resp[0].(error); ok {
		return doneFuture{fmt.Errorf("apply: %w", err)}
	}
	return doneFuture{}
}

// Barrier implements Replicator; proposals apply synchronously, so there is nothing to wait for.
func (m *MemReplicator) Barrier(uint32, time.Duration) error { return nil }

// LastTime implements Replicator.
func (m *MemReplicator) LastTime(g uint32) int64 { return m.fsms[g].LastTime() }

// VerifyLeader implements Replicator: the in-memory log has no rivals.
func (m *MemReplicator) VerifyLeader(uint32) Future { return doneFuture{} }
