package actors

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// partition is the runtime's state for one partition on this node: whether this node leads
// it, the registry of its live activations, its alarm scheduler and its clock.
//
// Invariant: activations exist only while ready, i.e. while this node leads the partition
// and a Barrier issued after it became leader has returned, so every committed entry is
// applied and storage reads are current. Every change of readiness bumps epoch; an
// activation created under one epoch refuses work under any other.
type partition struct {
	id uint32
	rt *Runtime

	epoch atomic.Uint64
	clock atomic.Int64 // last time handed out, Unix ms

	mu      sync.Mutex
	gen     uint64 // counts leadership notifications, to drop stale barrier results
	ready   bool
	readyCh chan struct{} // closed iff ready; one handed out while not ready closes on readiness or deposition
	// deposed: Raft last reported that this node does not lead the partition's group. Calls
	// are then refused at once (NotApplied: nothing ran, the router may send them elsewhere),
	// not held until a readiness that may never come. Before any report, and between gaining
	// the leadership and readiness, calls wait.
	deposed bool
	acts    map[actKey]*actRef
	sched   *scheduler

	grp *group // the Raft group whose log holds this partition
}

type actKey struct{ kind, id string }

func newPartition(rt *Runtime, id uint32) *partition {
	return &partition{id: id, rt: rt, readyCh: make(chan struct{}), acts: map[actKey]*actRef{}}
}

func (p *partition) currentEpoch() uint64 { return p.epoch.Load() }

// now returns the partition clock: the wall clock, but never less than a time already handed
// out or committed, so expiry decisions never see time run backwards across failover.
func (p *partition) now(clock func() time.Time) int64 {
	t := clock().UnixMilli()
	for {
		last := p.clock.Load()
		if t <= last {
			return last
		}
		if p.clock.CompareAndSwap(last, t) {
			return t
		}
	}
}

// deliver sends msg to the activation of (kind, id), creating it if needed. When the
// partition is not ready here it sends nothing: it fails with NotApplied if this node was
// deposed, and otherwise returns a channel closed on readiness or on deposition.
func (p *partition) deliver(kind *kindEntry, id string, msg any) (wait <-chan struct{}, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.ready {
		if p.deposed {
			return nil, NotApplied("partition %d is not led by this node", p.id)
		}
		return p.readyCh, nil
	}
	key := actKey{kind.Name, id}
	ref := p.acts[key]
	if ref == nil {
		ref = &actRef{}
		a := &activation{
			rt: p.rt, part: p, kind: kind, id: id, ref: ref, epoch: p.currentEpoch(),
			handler:    kind.New(id),
			dataPrefix: actorPrefix(secData, kind.Name, id),
			overlay:    map[string]*overlayEntry{},
		}
		a.effects.act = a
		p.rt.live.Add(1) // Done when the actor has stopped
		ref.pid = p.rt.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return a }, actor.WithDispatcher(p.rt.dispatcher)))
		p.acts[key] = ref
	}
	ref.queued.Add(1)
	kind.mailbox.Inc()
	p.rt.system.Root.Send(ref.pid, msg)
	return nil, nil
}

// forget removes a retiring activation from the registry, so new messages go to a new one.
func (p *partition) forget(a *activation) {
	p.mu.Lock()
	if p.acts[actKey{a.kind.Name, a.id}] == a.ref {
		delete(p.acts, actKey{a.kind.Name, a.id})
	}
	p.mu.Unlock()
}

// forgetIfIdle removes the activation if nothing is queued for it. Senders enqueue under
// p.mu, so once this returns true no message can reach the activation any more.
func (p *partition) forgetIfIdle(a *activation) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := actKey{a.kind.Name, a.id}
	if p.acts[key] != a.ref {
		return true
	}
	if a.ref.queued.Load() != 0 {
		return false
	}
	delete(p.acts, key)
	return true
}

// alarmSet tells the scheduler that an alarm was committed.
func (p *partition) alarmSet() {
	p.mu.Lock()
	s := p.sched
	p.mu.Unlock()
	if s != nil {
		s.wake()
	}
}

// setLeader records a leadership change reported by the replicator.
func (p *partition) setLeader(leader bool) {
	p.mu.Lock()
	p.gen++
	gen := p.gen
	p.deposed = !leader
	if leader {
		p.mu.Unlock()
		go p.becomeReady(gen)
		return
	}
	if !p.ready {
		// Wake the calls waiting for a readiness that will not come: they are refused now.
		close(p.readyCh)
		p.readyCh = make(chan struct{})
	}
	acts, sched := p.unready()
	p.mu.Unlock()
	p.stopAll(acts, sched)
}

// unready leaves the ready state; p.mu is held.
func (p *partition) unready() (map[actKey]*actRef, *scheduler) {
	acts, sched := p.acts, p.sched
	if p.ready {
		p.ready = false
		p.epoch.Add(1)
		p.readyCh = make(chan struct{})
	}
	p.acts, p.sched = map[actKey]*actRef{}, nil
	return acts, sched
}

func (p *partition) stopAll(acts map[actKey]*actRef, sched *scheduler) {
	for _, ref := range acts {
		p.rt.system.Root.Send(ref.pid, &retire{reason: Unavailable("partition %d lost its leader on this node", p.id)})
	}
	if sched != nil {
		sched.close()
	}
}

// becomeReady waits until every committed entry is applied, then opens the partition.
func (p *partition) becomeReady(gen uint64) {
	// Commands of the previous leadership still in flight must resolve first, so that the
	// Barrier below orders after them.
	p.grp.proposer.waitResolved()
	for attempt := 0; ; attempt++ {
		err := p.rt.repl.Barrier(p.grp.span.ID, p.rt.opts.RequestTimeout)
		p.mu.Lock()
		if p.gen != gen {
			p.mu.Unlock()
			return // leadership changed meanwhile; a newer notification decides
		}
		if err == nil {
			if t := p.rt.repl.LastTime(p.grp.span.ID); t > p.clock.Load() {
				p.clock.Store(t)
			}
			p.ready = true
			p.epoch.Add(1)
			close(p.readyCh)
			p.sched = newScheduler(p.rt, p)
			go p.sched.run()
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		p.rt.logger.Warn("barrier after becoming leader failed", "partition", p.id, "attempt", attempt, "error", err)
		time.Sleep(min(time.Duration(attempt+1)*50*time.Millisecond, time.Second))
	}
}

// close retires everything for shutdown.
func (p *partition) close() {
	p.mu.Lock()
	p.gen++
	acts, sched := p.unready()
	p.mu.Unlock()
	p.stopAll(acts, sched)
}
