package actortest

import (
	"sync"

	"github.com/shardkeeper/shardkeeper/actors"
)

// Gated is a replicator that holds every proposal until the test releases it, so that a test
// can observe the runtime while commits are in flight. Use it as Options.Wrap:
//
//	var g *actortest.Gated
//	h := actortest.New(t, actortest.Options{Wrap: func(m *actors.MemReplicator) actors.Replicator {
//		g = actortest.NewGated(m)
//		return g
//	}}, kinds...)
type Gated struct {
	*actors.MemReplicator
	// Proposed receives the Raft group of each proposal as it is made.
	Proposed chan uint32
	// Release takes one value per proposal, in order: nil commits it, an error fails it.
	Release chan error
}

// NewGated returns a gate in front of mem.
func NewGated(mem *actors.MemReplicator) *Gated {
	return &Gated{MemReplicator: mem, Proposed: make(chan uint32, 1024), Release: make(chan error)}
}

// Propose implements actors.Replicator.
func (g *Gated) Propose(grp uint32, cmd []byte) actors.Future {
	g.Proposed <- grp
	return &gatedFuture{g: g, grp: grp, cmd: cmd}
}

type gatedFuture struct {
	g    *Gated
	grp  uint32
	cmd  []byte
	once sync.Once
	err  error
}

func (f *gatedFuture) Error() error {
	f.once.Do(func() {
		if f.err = <-f.g.Release; f.err == nil {
			f.err = f.g.MemReplicator.Propose(f.grp, f.cmd).Error()
		}
	})
	return f.err
}
