package actors

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"time"
)

// Effects: I/O with the world outside the cluster (an RPC call, an upload), requested by a
// handler and run by the runtime after commit, off the mailbox, with the result handed back to
// the same activation as a message of its own.
//
// A handler never does I/O in its turn: it records its intent in its own storage (an outbox
// record, the kind's business) and requests an effect. The effect starts only once every
// write the requesting message made or read has committed — the output gate, applied to side
// effects — so the outside world never sees an intent the cluster could still forget. If that
// commit fails, the effect never starts. Results belong to the activation that requested the
// effect: once it stops (leadership lost, failed commit, restart, shutdown) the effects it
// still runs are cancelled and their results dropped; it never passivates while it has any. A new activation learns what was in
// flight only from storage, in Activate.

// EffectFunc is the work of an effect. It runs on its own goroutine, never on the actor's
// mailbox, and must not use the Context of the message that requested it (that Context is
// dead by then). ctx is cancelled when the activation that requested the effect stops; the
// function should then return promptly, since its result will be dropped anyway. ctx has no
// deadline: the function bounds its own I/O, since while it runs it holds a slot (see
// Options.MaxEffects) and keeps its activation from passivating.
type EffectFunc func(ctx context.Context) ([]byte, error)

// EffectResult is the outcome of an effect, handed to the EffectHandler of the activation that
// requested it.
type EffectResult struct {
	// Name is the name the effect was requested under. It is the handler's only way to tell
	// which of its effects finished: name effects after what they act on (an outbox key).
	Name string
	// Output and Err are what the effect function returned. A panic in the function is
	// reported as an error.
	Output []byte
	Err    error
}

// EffectHandler is implemented by handlers that request effects.
type EffectHandler interface {
	// HandleEffect runs the result of an effect this activation requested, as a message like
	// any other: one at a time with the others, reading and writing storage (its writes are
	// committed like a request's, and effects it requests start after that commit).
	//
	// Nobody waits for an answer, so any error — an *Error too — discards its writes and its
	// effects, and since the result is then lost, the activation restarts: it refuses new
	// messages (as not applied), lets its earlier writes commit, and retires, so that the
	// next activation's Activate reconciles from storage. HandleEffect should therefore deal
	// with r.Err itself (record it, retry, give up) and fail only when it cannot process the
	// result at all.
	HandleEffect(ctx *Context, r EffectResult) error
}

// Effect asks the runtime to run fn once this message's writes, and any uncommitted writes it
// read, have committed; its result comes back to this activation's HandleEffect. If the
// message fails (its writes are discarded) or its commit fails, fn never runs. Each request
// runs fn at most once, but the activation may stop before or while it runs: the next
// activation must reconcile from its storage (see Activator), so across activations one
// intent may reach the outside world more than once. name identifies the effect to
// HandleEffect. Effect fails when the handler does not implement EffectHandler.
func (c *Context) Effect(name string, fn EffectFunc) error {
	if fn == nil {
		return fmt.Errorf("actor %s/%s: effect %q has no function", c.act.kind.Name, c.act.id, name)
	}
	if _, ok := c.act.handler.(EffectHandler); !ok {
		return fmt.Errorf("actor %s/%s: effect %q requested, but kind %s does not implement EffectHandler",
			c.act.kind.Name, c.act.id, name, c.act.kind.Name)
	}
	c.effects = append(c.effects, &effect{name: name, fn: fn})
	return nil
}

// effect is one requested effect.
type effect struct {
	name string
	fn   EffectFunc
}

// effectDone carries an effect's result to the activation whose effect set ran it.
type effectDone struct {
	set    *effectSet
	result EffectResult
}

// effectSet follows the effects of one activation from the message that requested them until
// their results have been handled. The activation's mailbox, commit callbacks (on the
// proposer's or read gate's goroutine) and the effects' goroutines all use it: mu guards
// every field.
//
// An effect is counted in unfinished from its message's staging until its result has been
// handled or dropped, so an activation with effects in flight is never idle and never
// passivates. Once its message's commit succeeds it is queued; at most MaxEffectsPerActor
// workers of the set take effects from the queue, in order, each holding one of the runtime's
// MaxEffects slots (its kind's reserve first, see effectReserve) while its effect runs; the
// result is sent to the activation's own process
// (a PID is never reused, so it cannot reach another activation) tagged with the set.
//
// close (the activation stops) cancels every effect's context, drops the queue, and makes
// every later result be dropped: no result outlives the activation that asked for it.
type effectSet struct {
	act *activation

	mu         sync.Mutex
	ctx        context.Context // of every effect of the set; made with the first one
	cancel     context.CancelFunc
	closed     bool
	unfinished int       // staged, and neither handled nor dropped yet
	queue      []*effect // committed, waiting for a worker
	workers    int       // goroutines taking from queue: at most MaxEffectsPerActor
	transit    int       // results sent to the mailbox and not yet taken
}

// gate wraps the reply of a message that requested fx: when the message's commit (or read
// gate) succeeds, fx are queued to start; when it fails, they are dropped unstarted. Called
// on the mailbox, before the message's reply can be released.
func (s *effectSet) gate(fx []*effect, reply func(error)) func(error) {
	s.mu.Lock()
	s.unfinished += len(fx)
	s.mu.Unlock()
	return func(err error) {
		if err == nil {
			s.enqueue(fx)
		} else {
			s.mu.Lock()
			s.unfinished -= len(fx)
			s.mu.Unlock()
		}
		reply(err)
	}
}

// enqueue queues committed effects and starts workers for them.
func (s *effectSet) enqueue(fx []*effect) {
	rt, met := s.act.rt, s.act.kind.effects
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.act.part.currentEpoch() != s.act.gate.epoch {
		// The activation stopped, or is about to (its partition is led by another epoch):
		// the next one reconciles from storage.
		s.unfinished -= len(fx)
		return
	}
	if s.ctx == nil {
		s.ctx, s.cancel = context.WithCancel(context.Background())
	}
	s.queue = append(s.queue, fx...)
	met.waiting.Add(float64(len(fx)))
	// Workers never idle: each runs an effect or is about to take the next. One per queued
	// effect, up to the bound, may start a few that find the queue empty and exit at once.
	bound := rt.opts.MaxEffectsPerActor
	if k := s.act.kind.MaxEffects; k > 0 {
		bound = k
	}
	for n := min(bound-s.workers, len(s.queue)); n > 0; n-- {
		s.workers++
		rt.effectWorkers.Add(1) // before the set closes, so before Close waits (see Runtime.Close)
		go s.work(s.ctx)
	}
}

// work runs queued effects one after another until the queue is empty or the set closed. It
// takes a slot of the runtime before it takes an effect, so that the effects of one activation
// start in the order they were queued.
func (s *effectSet) work(ctx context.Context) {
	rt, met := s.act.rt, s.act.kind.effects
	defer rt.effectWorkers.Done()
	for {
		slot := s.slot(ctx)
		if slot == nil { // the set closed: close dropped the queue
			s.mu.Lock()
			s.workers--
			s.mu.Unlock()
			return
		}
		s.mu.Lock()
		if s.closed || len(s.queue) == 0 {
			s.workers--
			s.mu.Unlock()
			<-slot
			return
		}
		e := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		s.mu.Unlock()

		met.waiting.Dec()
		met.started.Inc()
		met.running.Inc()
		begin := time.Now()
		out, err := s.call(ctx, e)
		met.running.Dec()
		met.duration.Observe(time.Since(begin).Seconds())
		<-slot
		s.deliver(EffectResult{Name: e.name, Output: out, Err: err})
	}
}

// slot waits for a slot to run an effect in and returns the channel it holds a token of, to
// give it back to; nil when ctx is done first. A slot of the kind's reserve is taken first, so
// that the shared pool stays free for the kinds whose reserve is full (see effectReserve).
func (s *effectSet) slot(ctx context.Context) chan struct{} {
	own, shared := s.act.kind.effectSlots, s.act.rt.effectSlots // own is nil without reserves
	select {
	case own <- struct{}{}:
		return own
	default:
	}
	select {
	case own <- struct{}{}:
		return own
	case shared <- struct{}{}:
		return shared
	case <-ctx.Done():
		return nil
	}
}

// call runs the effect function, turning a panic into an error: an effect runs on a goroutine
// of its own, where a panic would take the node down.
func (s *effectSet) call(ctx context.Context, e *effect) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			a := s.act
			a.rt.logger.Error("actor effect panicked", "kind", a.kind.Name, "id", a.id, "effect", e.name,
				"panic", r, "stack", string(debug.Stack()))
			out, err = nil, fmt.Errorf("effect %q of actor %s/%s panicked: %v", e.name, a.kind.Name, a.id, r)
		}
	}()
	return e.fn(ctx)
}

// deliver sends a result to the activation, or drops it if the activation has stopped.
func (s *effectSet) deliver(r EffectResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.act.kind.effects.dropped.Inc()
		return
	}
	// Sent under mu, so that close, which counts the results in transit, sees this one.
	s.transit++
	// act.self was set on the mailbox before the message that requested the effect ran.
	s.act.rt.system.Root.Send(s.act.self, &effectDone{set: s, result: r})
}

// take accounts, on the mailbox, for a result that arrived. It reports false when the set was
// closed meanwhile: close counted the result dropped.
func (s *effectSet) take() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.transit--
	s.unfinished--
	return true
}

// idle reports whether no effect is in flight: none awaits its commit, a slot, its end or
// the handling of its result.
func (s *effectSet) idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unfinished == 0
}

// close cancels the running effects and drops the queued ones and every result to come.
func (s *effectSet) close() {
	met := s.act.kind.effects
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	if s.cancel != nil {
		s.cancel()
	}
	met.waiting.Sub(float64(len(s.queue)))
	s.queue = nil
	met.dropped.Add(float64(s.transit))
	s.transit = 0
}

// handleEffect runs a result on the activation whose effect set ran it, unless the activation
// may no longer run messages (it lost its epoch, or retires or restarts): then the result is
// dropped, and the next activation reconciles from storage.
func (a *activation) handleEffect(m *effectDone) {
	// A result belongs to the set that ran it; a closed set has counted it dropped.
	if m.set != &a.effects || !m.set.take() {
		return
	}
	met := a.kind.effects
	if err := a.usable(); err != nil {
		met.dropped.Inc()
		return
	}
	if m.result.Err != nil {
		met.failed.Inc()
	} else {
		met.ok.Inc()
	}
	h := a.handler.(EffectHandler) // Context.Effect requires it
	ctx := a.newContext()
	_, err := a.invoke(func() ([]byte, error) { return nil, h.HandleEffect(ctx, m.result) })
	if err != nil {
		ctx.rollback()
		a.rt.logger.Error("effect handler failed; the actor restarts", "kind", a.kind.Name, "id", a.id,
			"effect", m.result.Name, "error", err)
		a.restartAfter(fmt.Errorf("its effect handler failed on %q: %w", m.result.Name, err))
		return
	}
	a.stageUnanswered(ctx)
}
