package actors

import (
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/shardkeeper/shardkeeper/persistence"
)

// activation is the protoactor actor hosting one Handler. Its mailbox gives one message at a
// time; everything below runs on that single goroutine at a time and needs no locks.
//
// Write path (the output gate): a message's writes go into the overlay (visible to later
// messages at once) and into the pending batch together with the message's reply, which is
// held. At most one batch is in flight in Raft; the pending batch is proposed when the
// previous one has committed and the mailbox is empty, so under load many messages share one
// batch, and the partition's proposer merges the batches of many actors into one Raft
// command. When a command commits, its held replies are released at once by the commit
// callback, and the activation takes up the outcome at its next message (or at commitDone,
// whichever comes first); when it fails, every held reply fails, the overlay and the Handler
// are discarded and the activation retires.
//
// Effects requested by a message ride with its reply: they start when it would be released
// (see effects.go). The first message of an activation is the Handler's Activate, if any.
type activation struct {
	rt      *Runtime
	part    *partition
	kind    *kindEntry
	id      string
	ref     *actRef
	self    *actor.PID // this activation's process, set at Started, before any message
	handler Handler

	dataPrefix []byte
	gate       writeGate // the write path's decisions; the methods below carry them out

	effects effectSet

	// Passivation: idle is armed while the activation lives and sends it idleCheck; the
	// check passivates it when no message came for IdleTimeout (active is the last one's
	// time), or arms idle again. Our own timer rather than protoactor's receive timeout,
	// whose timer goroutine races with the mailbox on the actor context.
	idle   *time.Timer
	active time.Time
}

// idleCheck is sent by the activation's idle timer.
type idleCheck struct{}

// actRef is the partition registry's handle on an activation.
type actRef struct {
	pid *actor.PID
	// queued counts messages sent to the actor and not yet handled. Senders increment it
	// under the partition lock, so an actor that sees 0 under that lock has an empty mailbox.
	queued atomic.Int64
}

type overlayEntry struct {
	value   []byte
	deleted bool
	seq     uint64
	// batch is the batch that carries this write and pos its place in batch.ops: a later
	// write of the key in the same batch replaces it there.
	batch *batch
	pos   int
}

type batch struct {
	ops       []persistence.Op
	seqs      []uint64
	messages  int
	time      int64
	setsAlarm bool // writes an alarm index entry: the scheduler must look once it commits
	proposed  time.Time

	// held are the replies waiting for this batch's commit. Once the batch is proposed, the
	// commit callback (on the proposer's goroutine) releases them at once, while the
	// activation may still add replies of read-only messages: from then on mu guards them.
	mu       sync.Mutex
	held     []func(error)
	released bool
	// finished is set, after err, when the commit outcome is known, so the activation takes
	// it up at its next message instead of after everything queued before commitDone.
	finished atomic.Bool
	err      error
}

// hold adds a reply that must wait for b's commit. It reports false when b has already
// committed and released its replies: the reply may go at once.
func (b *batch) hold(reply func(error)) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.released {
		return false
	}
	b.held = append(b.held, reply)
	return true
}

// release answers every held reply with err; only the first call answers anything.
func (b *batch) release(err error) {
	b.mu.Lock()
	held := b.held
	b.held, b.released = nil, true
	b.mu.Unlock()
	for _, r := range held {
		r(err)
	}
}

// envelope carries a request and the channel that receives its reply (buffered: one reply
// never blocks).
type envelope struct {
	req      Request
	deadline time.Time
	reply    chan result
}

type result struct {
	body []byte
	err  error
}

func (e *envelope) done(body []byte, err error) { e.reply <- result{body, err} }

// alarmFire asks the activation to run a due alarm found in the index.
type alarmFire struct {
	entry indexEntry
	done  func(error)
}

type commitDone struct {
	b   *batch
	err error
}

// retire is sent (as an ordinary message, so it is handled after everything queued before
// it) when the partition stops being led here.
type retire struct{ reason error }

func (a *activation) Receive(c actor.Context) {
	if _, ok := c.Message().(idleCheck); !ok {
		a.active = time.Now()
	}
	switch m := c.Message().(type) {
	case *actor.Started:
		a.self = c.Self()
		a.rt.metrics.active.WithLabelValues(a.kind.Name).Inc()
		a.rt.metrics.activations.WithLabelValues(a.kind.Name).Inc()
		self, root := a.self, a.rt.system.Root
		a.idle = time.AfterFunc(a.rt.opts.IdleTimeout, func() { root.Send(self, idleCheck{}) })
		a.activate(c)
	case *envelope:
		a.dequeued()
		a.takeCommit(c)
		a.handleRequest(m)
		a.settle(c)
	case *alarmFire:
		a.dequeued()
		a.takeCommit(c)
		a.handleAlarm(m)
		a.settle(c)
	case *effectDone:
		a.takeCommit(c)
		a.handleEffect(m)
		a.settle(c)
	case *commitDone:
		a.committed(c, m)
	case *retire:
		a.fail(c, m.reason)
	case stopSelf:
		c.Stop(c.Self())
	case idleCheck:
		if wait := a.rt.opts.IdleTimeout - time.Since(a.active); wait > 0 {
			a.idle.Reset(wait)
		} else {
			a.maybePassivate(c)
		}
	case *actor.Stopped:
		if a.idle != nil {
			a.idle.Stop()
		}
		a.effects.close()
		if d, ok := a.handler.(Deactivator); ok {
			a.invoke(func() ([]byte, error) { d.Deactivate(); return nil, nil })
		}
		a.rt.metrics.active.WithLabelValues(a.kind.Name).Dec()
		a.rt.live.Done()
	}
}

func (a *activation) dequeued() {
	a.ref.queued.Add(-1)
	a.kind.mailbox.Dec()
}

// usable reports why the activation may not run a message, or nil.
func (a *activation) usable() error {
	return a.gate.usable(a.part.currentEpoch(), a.kind.Name, a.id, a.part.id)
}

func (a *activation) newContext() *Context {
	return &Context{act: a, now: a.part.now(a.rt.opts.Clock)}
}

func (a *activation) handleRequest(m *envelope) {
	if err := a.usable(); err != nil {
		m.done(nil, err)
		return
	}
	if !a.rt.opts.Clock().Before(m.deadline) {
		// Nobody waits for the answer any more; not running it keeps the outcome certain.
		m.done(nil, Unavailable("request deadline passed while queued"))
		return
	}
	ctx := a.newContext()
	reply, err := a.invoke(func() ([]byte, error) { return a.handler.Receive(ctx, m.req) })
	var outcome *Error
	if err != nil && !errors.As(err, &outcome) {
		ctx.rollback()
	}
	a.stage(ctx, func(cerr error) {
		if cerr != nil {
			m.done(nil, cerr)
			return
		}
		m.done(reply, err)
	})
}

// activate runs the Handler's Activate, if it has one, before any other message.
func (a *activation) activate(c actor.Context) {
	h, ok := a.handler.(Activator)
	if !ok || a.usable() != nil {
		return // an activation of a past epoch runs nothing; what is queued to it is refused
	}
	ctx := a.newContext()
	if _, err := a.invoke(func() ([]byte, error) { return nil, h.Activate(ctx) }); err != nil {
		ctx.rollback()
		a.rt.logger.Error("actor activation failed", "kind", a.kind.Name, "id", a.id, "error", err)
		a.restartAfter(fmt.Errorf("activation failed: %w", err))
	} else {
		a.stageUnanswered(ctx)
	}
	a.settle(c)
}

// restartAfter marks the activation for restart (see writeGate.restart).
func (a *activation) restartAfter(cause error) { a.gate.restartAfter(a.kind.Name, a.id, cause) }

// settle ends every message: it proposes the pending batch when due, and retires an
// activation marked for restart once nothing it wrote awaits a commit. Retiring earlier could
// let the next activation read state that a batch still in flight is about to change.
func (a *activation) settle(c actor.Context) {
	a.maybePropose(c)
	if a.gate.dueRestart() {
		a.fail(c, a.gate.restart)
	}
}

// invoke runs handler code, turning a panic into an error so that one bad message cannot
// take the activation (or the node) down with uncommitted state half applied.
func (a *activation) invoke(fn func() ([]byte, error)) (reply []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			a.rt.logger.Error("actor handler panicked", "kind", a.kind.Name, "id", a.id,
				"panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("actor %s/%s: handler panicked: %v", a.kind.Name, a.id, r)
		}
	}()
	return fn()
}

// stage moves a finished message's writes into the pending batch and holds its reply until
// every write the reply may depend on has committed. The effects the message requested start
// when the reply is released without error, and never otherwise.
func (a *activation) stage(ctx *Context, reply func(error)) {
	if len(ctx.effects) > 0 {
		reply = a.effects.gate(ctx.effects, reply)
	}
	if a.gate.stage(ctx.writes, ctx.now, reply) == needsLeader {
		a.part.grp.Load().reads.wait(reply)
	}
}

// stageUnanswered stages the writes and effects of a message nobody waits for (Activate,
// HandleEffect). One that wrote and requested nothing needs no gate.
func (a *activation) stageUnanswered(ctx *Context) {
	if len(ctx.writes) > 0 || len(ctx.effects) > 0 {
		a.stage(ctx, func(error) {})
	}
}

// maybePropose sends the pending batch to Raft when nothing is in flight and either no more
// messages are queued or the batch is full (or the activation restarts: the queued messages
// will be refused, so the batch cannot grow).
func (a *activation) maybePropose(c actor.Context) {
	b := a.gate.next(a.ref.queued.Load() > 0, a.rt.opts.MaxBatchMessages)
	if b == nil {
		return
	}
	b.proposed = time.Now()
	self, root := c.Self(), a.rt.system.Root
	a.part.grp.Load().proposer.submit(a.part, b, a.gate.epoch, func(err error) {
		b.err = err
		b.finished.Store(true)
		if err == nil {
			b.release(nil)
		}
		root.Send(self, &commitDone{b: b, err: err})
	})
}

// takeCommit handles the in-flight batch's commit outcome if it is already known (see
// batch.finished); its commitDone, arriving later, is then ignored.
func (a *activation) takeCommit(c actor.Context) {
	if b := a.gate.inflight; b != nil && b.finished.Load() {
		a.committed(c, &commitDone{b: b, err: b.err})
	}
}

func (a *activation) committed(c actor.Context, m *commitDone) {
	current, failure := a.gate.committed(m.b, m.err)
	switch {
	case !current:
		return
	case failure != nil:
		a.fail(c, failure)
		return
	}
	a.rt.metrics.commitLatency.Observe(time.Since(m.b.proposed).Seconds())
	if m.b.setsAlarm {
		a.part.alarmSet()
	}
	a.settle(c)
}

// fail fails every held reply — those of the pending batch, never proposed, as not applied —
// drops all uncommitted state, cancels the effects (their results will be dropped) and
// retires the activation: it leaves the registry (the next message creates a fresh one that
// reads committed state) and answers anything still queued with err.
func (a *activation) fail(c actor.Context, err error) {
	a.effects.close()
	first := a.gate.retire()
	if first {
		a.part.forget(a) // before any reply is released (writeGate.retire)
	}
	a.gate.failAll(err)
	if first {
		c.Send(c.Self(), stopSelf{})
	}
}

// stopSelf is queued behind everything sent before the activation left the registry.
type stopSelf struct{}

func (a *activation) maybePassivate(c actor.Context) {
	if a.gate.idle() && a.effects.idle() && a.part.forgetIfIdle(a) {
		a.gate.retire()
		a.rt.metrics.passivations.WithLabelValues(a.kind.Name).Inc()
		c.Stop(c.Self())
		return
	}
	a.idle.Reset(a.rt.opts.IdleTimeout)
}
