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
// activation created under one epoch refuses work under any other. Leadership is the
// group's: readiness and deposed change only under grp.mu (group.setLeader, group.open,
// group.close), so all partitions of a group follow the same notification.
type partition struct {
	id uint32
	rt *Runtime

	epoch atomic.Uint64
	clock atomic.Int64 // last time handed out, Unix ms

	mu      sync.Mutex
	ready   bool
	readyCh chan struct{} // closed iff ready; one handed out while not ready closes on readiness or deposition
	// deposed: Raft last reported that this node does not lead the partition's group. Calls
	// are then refused at once (NotApplied: nothing ran, the router may send them elsewhere),
	// not held until a readiness that may never come. Before any report, and between gaining
	// the leadership and readiness, calls wait.
	deposed bool
	acts    map[actKey]*actRef
	sched   *scheduler

	// grp is the Raft group whose log holds this partition here; a split moves it to
	// another (Runtime.Regroup).
	grp atomic.Pointer[group]
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
			rt: p.rt, part: p, kind: kind, id: id, ref: ref,
			handler:    kind.New(id),
			dataPrefix: actorPrefix(secData, kind.Name, id),
			gate:       newWriteGate(p.currentEpoch()),
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

// setLeader applies a leadership notification of the group (grp.mu is held). The partition
// leaves the ready state either way: after a gain it waits for the group's Barrier
// (group.becomeReady), after a loss it refuses calls, those already waiting included.
func (p *partition) setLeader(leader bool) {
	p.mu.Lock()
	p.deposed = !leader
	if !leader && !p.ready {
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

// open makes the partition ready once the group's Barrier for the current gain has returned
// (grp.mu is held, and the partition is not ready: the gain unreadied it, and each gain opens
// at most once). lastTime is the group's greatest applied command time, below which the
// clock must not hand out times.
func (p *partition) open(lastTime int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ready {
		return // opened once for this gain already
	}
	if lastTime > p.clock.Load() {
		p.clock.Store(lastTime)
	}
	p.ready = true
	p.epoch.Add(1)
	close(p.readyCh)
	p.sched = newScheduler(p.rt, p)
	go p.sched.run()
}

// close retires everything for shutdown (grp.mu is held).
func (p *partition) close() {
	p.mu.Lock()
	acts, sched := p.unready()
	p.mu.Unlock()
	p.stopAll(acts, sched)
}
