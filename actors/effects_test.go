package actors_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/actors/actortest"
	"github.com/shardkeeper/shardkeeper/test/await"
)

// quiet is how long a test watches for something that must not happen.
const quiet = 100 * time.Millisecond

// never fails t if cond holds at any time during d.
func never(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if cond() {
			t.Fatalf("%s", what)
		}
	}
}

func gated(t *testing.T, o actors.Options, kinds ...actors.Kind) (*actortest.Harness, *actortest.Gated) {
	var g *actortest.Gated
	h := actortest.New(t, actortest.Options{Runtime: o, Wrap: func(m *actors.MemReplicator) actors.Replicator {
		g = actortest.NewGated(m)
		return g
	}}, kinds...)
	return h, g
}

// callAsync sends one message and returns where its error will be.
func callAsync(h *actortest.Harness, id, method, body string) <-chan error {
	errc := make(chan error, 1)
	go func() {
		_, err := h.Call(outboxKind, id, method, []byte(body))
		errc <- err
	}()
	return errc
}

// An effect starts only once the writes of its message have committed, and an effect
// requested by a message that wrote nothing but read uncommitted writes waits for them too.
// Then its result is handled and the handler's writes commit.
func TestEffectStartsOnlyAfterCommit(t *testing.T) {
	l := newLab()
	h, g := gated(t, actors.Options{RequestTimeout: 30 * time.Second}, outbox(l))

	sent := callAsync(h, "a", "send", "e1")
	<-g.Proposed // the batch carrying the record "pending" is in flight
	l.await(t, "send e1")
	read := callAsync(h, "a", "effect-only", "e2") // reads nothing, but after e1's uncommitted writes
	l.await(t, "effect-only e2")
	never(t, quiet, "an effect started before its commit", func() bool {
		return len(l.startsOf("e1")) > 0 || len(l.startsOf("e2")) > 0
	})
	if n := effectMetric(h, "shardkeeper_effects_started_total", nil); n != 0 {
		t.Fatalf("%v effects started before the commit", n)
	}
	g.Release <- nil
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	pump(t, g)
	l.awaitStarts(t, "e1", 1)
	l.awaitStarts(t, "e2", 1)
	awaitRecord(t, h, "a", "e1", "done:ok")
	awaitRecord(t, h, "a", "e2", "done:ok")
}

// A failed commit never starts the effects of its messages, nor does a message that fails (its
// writes are rolled back), nor a read-only message on a node that cannot confirm it leads.
func TestEffectNeverStartsWithoutCommit(t *testing.T) {
	l := newLab()
	h, g := gated(t, actors.Options{RequestTimeout: 30 * time.Second}, outbox(l))

	sent := callAsync(h, "a", "send", "lost")
	<-g.Proposed
	g.Release <- errInjected
	if err := <-sent; !errors.Is(err, actors.ErrUnavailable) {
		t.Fatalf("send with a failed commit: %v, want ErrUnavailable", err)
	}
	pump(t, g)
	if _, err := h.Call(outboxKind, "a", "send-then-fail", []byte("rolled-back")); err == nil {
		t.Fatal("send-then-fail succeeded")
	}
	// A later effect of the same actor does run, so the earlier ones had every chance.
	h.MustCall(outboxKind, "a", "send", []byte("kept"))
	awaitRecord(t, h, "a", "kept", "done:ok")
	never(t, quiet, "an effect without a commit started", func() bool {
		return len(l.startsOf("lost")) > 0 || len(l.startsOf("rolled-back")) > 0
	})
	if r := record(h, "a", "lost") + record(h, "a", "rolled-back"); r != "" {
		t.Fatalf("records of failed messages: %q", r)
	}
	if n := effectMetric(h, "shardkeeper_effects_started_total", nil); n != 1 {
		t.Fatalf("%v effects started, want 1", n)
	}

	// Effects of read-only messages wait for the read gate: a deposed leader starts none.
	d := newLab()
	deposed := actortest.New(t, actortest.Options{Wrap: func(m *actors.MemReplicator) actors.Replicator {
		return deposedReplicator{m}
	}}, outbox(d))
	if _, err := deposed.Call(outboxKind, "b", "effect-only", []byte("unverified")); !errors.Is(err, actors.ErrUnavailable) {
		t.Fatalf("effect-only on a deposed leader: %v, want ErrUnavailable", err)
	}
	deposed.MustCall(outboxKind, "b", "send", []byte("committed")) // a commit proves leadership
	awaitRecord(t, deposed, "b", "committed", "done:ok")
	never(t, quiet, "an effect started without verified leadership", func() bool {
		return len(d.startsOf("unverified")) > 0
	})
}

// The result of an effect goes to the activation that requested it; the handler's writes
// commit; it may request further effects; errors and panics of effect functions arrive as
// errors; the metrics count it all.
func TestEffectResultReachesItsActivation(t *testing.T) {
	l := newLab()
	l.then["first"] = "second"
	h := actortest.New(t, actortest.Options{}, outbox(l))

	if v := string(h.MustCall(outboxKind, "a", "send", []byte("first"))); v != "queued" {
		t.Fatalf("send = %q", v)
	}
	awaitRecord(t, h, "a", "first", "done:ok")
	awaitRecord(t, h, "a", "second", "done:ok") // requested by HandleEffect of "first"
	for _, name := range []string{"first", "second"} {
		starts, handled := l.startsOf(name), l.handlings(name)
		if len(starts) != 1 || len(handled) != 1 || handled[0].instance != starts[0] ||
			handled[0].result.Name != name || string(handled[0].result.Output) != "ok" || handled[0].result.Err != nil {
			t.Fatalf("%s: started by activations %v, handled %+v", name, starts, handled)
		}
	}

	fail := l.hold("fails")
	h.MustCall(outboxKind, "a", "send", []byte("fails"))
	l.awaitStarts(t, "fails", 1)
	fail <- outcome{err: errors.New("the service said no")}
	awaitRecord(t, h, "a", "fails", "failed:the service said no")

	if n := h.Metric("shardkeeper_actor_activations_total", "", map[string]string{"kind": outboxKind}); n != 1 {
		t.Fatalf("%v activations, want 1", n)
	}

	await.True(t, 10*time.Second, "effect metrics", func() bool {
		return finished(h, "ok") == 2 && finished(h, "error") == 1
	})
	if s, d, r, w := effectMetric(h, "shardkeeper_effects_started_total", nil), finished(h, "dropped"),
		effectMetric(h, "shardkeeper_effects_running", nil), effectMetric(h, "shardkeeper_effects_waiting", nil); s != 3 || d != 0 || r != 0 || w != 0 {
		t.Fatalf("started %v dropped %v running %v waiting %v, want 3 0 0 0", s, d, r, w)
	}
	if n := effectMetric(h, "shardkeeper_effect_duration_seconds", nil); n != 3 {
		t.Fatalf("%v effect durations observed, want 3", n)
	}
}

// A panic in an effect function is its error, not a crash of the node.
func TestEffectPanicIsAnError(t *testing.T) {
	l := newLab()
	k := actors.Kind{Name: outboxKind, New: func(id string) actors.Handler {
		return &panickyHandler{outboxHandler{lab: l, id: id, instance: l.instances.Add(1)}}
	}}
	h := actortest.New(t, actortest.Options{}, k)
	h.MustCall(outboxKind, "p", "send", []byte("boom"))
	await.True(t, 10*time.Second, "the panic's result", func() bool { return len(l.handlings("boom")) == 1 })
	if r := l.handlings("boom")[0].result; r.Err == nil || !strings.Contains(r.Err.Error(), "panicked: effect panic for the test") {
		t.Fatalf("result of a panicking effect: %+v", r)
	}
}

// panickyHandler's effects panic.
type panickyHandler struct{ outboxHandler }

func (p *panickyHandler) Receive(ctx *actors.Context, req actors.Request) ([]byte, error) {
	ctx.Put(outKey(string(req.Body)), []byte("pending"))
	return nil, ctx.Effect(string(req.Body), func(context.Context) ([]byte, error) { panic("effect panic for the test") })
}

// A handler that cannot receive results cannot request effects.
func TestEffectNeedsAnEffectHandler(t *testing.T) {
	k := actors.Kind{Name: "plain", New: func(string) actors.Handler { return plainHandler{} }}
	h := actortest.New(t, actortest.Options{}, k)
	if _, err := h.Call("plain", "x", "go", nil); err == nil || !strings.Contains(err.Error(), "EffectHandler") {
		t.Fatalf("effect of a handler without HandleEffect: %v", err)
	}
}

type plainHandler struct{}

func (plainHandler) Receive(ctx *actors.Context, _ actors.Request) ([]byte, error) {
	return nil, ctx.Effect("x", func(context.Context) ([]byte, error) { return nil, nil })
}

// While an effect is blocked, the actor's mailbox goes on: reads, writes, other effects.
func TestMailboxServesWhileEffectBlocked(t *testing.T) {
	l := newLab()
	h := actortest.New(t, actortest.Options{}, outbox(l))
	slow := l.hold("slow")
	h.MustCall(outboxKind, "a", "send", []byte("slow"))
	l.awaitStarts(t, "slow", 1)
	for i := range 20 {
		name := fmt.Sprint("quick", i)
		h.MustCall(outboxKind, "a", "send", []byte(name))
		if v := string(h.MustCall(outboxKind, "a", "get", []byte("slow"))); v != "pending" {
			t.Fatalf("slow = %q while its effect runs", v)
		}
		awaitRecord(t, h, "a", name, "done:ok")
	}
	slow <- outcome{out: "late"}
	awaitRecord(t, h, "a", "slow", "done:late")
}

// Leadership lost while an effect runs: its context is cancelled and its result, arriving
// after a new activation started, is dropped. The new activation's Activate sees the record
// still pending in storage, sends again, and handles the new result.
func TestFailoverDropsResultAndActivateReconciles(t *testing.T) {
	l := newLab()
	l.stubborn = true // the old effect returns only when released, after the new activation started
	h := actortest.New(t, actortest.Options{}, outbox(l))
	old := l.hold("tx")
	h.MustCall(outboxKind, "a", "send", []byte("tx"))
	l.awaitStarts(t, "tx", 1)
	again := l.hold("tx")

	h.Failover()
	await.True(t, 10*time.Second, "the old effect's cancellation", func() bool { return l.cancellations("tx") == 1 })
	// The first message of the new activation runs after Activate: it sees the reconciliation.
	if v := string(h.MustCall(outboxKind, "a", "reconciled", nil)); v != "tx" {
		t.Fatalf("reconciled = %q, want tx", v)
	}
	l.awaitStarts(t, "tx", 2)
	starts := l.startsOf("tx")
	if starts[0] == starts[1] {
		t.Fatalf("both sends by activation %d", starts[0])
	}
	if pending, ok := l.activation(starts[1]); !ok || len(pending) != 1 || pending[0] != "tx" {
		t.Fatalf("Activate of the new activation found %v", pending)
	}

	old <- outcome{out: "from the old activation"}
	await.True(t, 10*time.Second, "the old result dropped", func() bool { return finished(h, "dropped") == 1 })
	if hs := l.handlings("tx"); len(hs) != 0 {
		t.Fatalf("the old activation's result was handled: %+v", hs)
	}
	again <- outcome{out: "new"}
	awaitRecord(t, h, "a", "tx", "done:new")
	if hs := l.handlings("tx"); len(hs) != 1 || hs[0].instance != starts[1] {
		t.Fatalf("handled %+v, want once by activation %d", hs, starts[1])
	}
}

// A restart (runtime closed and started again on the same store) cancels the running effect,
// and Close waits until the effect function has returned; the new runtime's activation
// reconciles from the outbox.
func TestRestartReconcilesFromOutbox(t *testing.T) {
	l := newLab()
	l.stubborn = true // the effect returns only when released, however cancelled
	h := actortest.New(t, actortest.Options{}, outbox(l))
	held := l.hold("tx")
	h.MustCall(outboxKind, "a", "send", []byte("tx"))
	l.awaitStarts(t, "tx", 1)

	closed := make(chan struct{})
	go func() { h.Runtime.Close(); close(closed) }()
	await.True(t, 10*time.Second, "the effect's cancellation", func() bool { return l.cancellations("tx") == 1 })
	never(t, quiet, "Close returned while an effect function ran", func() bool {
		select {
		case <-closed:
			return true
		default:
			return false
		}
	})
	held <- outcome{out: "too late"}
	<-closed
	if running, _, _ := l.concurrency(); running != 0 {
		t.Fatalf("%d effect functions still running after Close", running)
	}

	h.Restart(outbox(l))
	// The first message of the new activation runs after Activate: it sees the reconciliation.
	if v := string(h.MustCall(outboxKind, "a", "reconciled", nil)); v != "tx" {
		t.Fatalf("reconciled = %q after restart, want tx", v)
	}
	awaitRecord(t, h, "a", "tx", "done:ok")
	if hs := l.handlings("tx"); len(hs) != 1 || hs[0].instance != l.startsOf("tx")[1] {
		t.Fatalf("handled %+v; starts %v", hs, l.startsOf("tx"))
	}
}

// An alarm handler may request effects; they start after the firing's commit.
func TestAlarmRequestsEffect(t *testing.T) {
	l := newLab()
	h := actortest.New(t, actortest.Options{}, outbox(l))
	h.MustCall(outboxKind, "a", "alarm", []byte("wake"))
	awaitRecord(t, h, "a", "wake", "done:ok")
	if s := h.State(outboxKind, "a"); len(s.Alarms) != 0 {
		t.Fatalf("alarms left: %+v", s.Alarms)
	}
	if starts, hs := l.startsOf("wake"), l.handlings("wake"); len(starts) != 1 || len(hs) != 1 || hs[0].instance != starts[0] {
		t.Fatalf("starts %v handled %+v", starts, hs)
	}
}

// At most MaxEffectsPerActor effects of one activation and MaxEffects of the runtime run at
// once; the others wait, in order, without holding up the mailbox, and start as slots free.
func TestEffectConcurrencyBounds(t *testing.T) {
	l := newLab()
	h := actortest.New(t, actortest.Options{Runtime: actors.Options{MaxEffects: 3, MaxEffectsPerActor: 2}}, outbox(l))
	gates := map[string]chan<- outcome{}
	send := func(id string, names ...string) {
		for _, n := range names {
			gates[n] = l.hold(n)
			h.MustCall(outboxKind, id, "send", []byte(n))
		}
	}
	startedOf := func(names ...string) (n int) {
		for _, name := range names {
			n += len(l.startsOf(name))
		}
		return n
	}
	as, bs := []string{"a1", "a2", "a3", "a4"}, []string{"b1", "b2"}
	all := append(append([]string(nil), as...), bs...)

	send("a", as...)
	l.awaitStarts(t, "a1", 1)
	l.awaitStarts(t, "a2", 1) // in order
	never(t, quiet, "a third effect of one actor started", func() bool { return startedOf(as...) > 2 })
	if v := string(h.MustCall(outboxKind, "a", "get", []byte("a4"))); v != "pending" {
		t.Fatalf("a4 = %q", v) // the mailbox is not held up
	}

	send("b", bs...)
	l.awaitStarts(t, "b1", 1)
	never(t, quiet, "a fourth effect of the runtime started", func() bool { return startedOf(all...) > 3 })
	if r, w := effectMetric(h, "shardkeeper_effects_running", nil), effectMetric(h, "shardkeeper_effects_waiting", nil); r != 3 || w != 3 {
		t.Fatalf("running %v waiting %v, want 3 and 3", r, w)
	}

	// Each release of a running effect frees a slot for exactly one waiting effect.
	released := map[string]bool{}
	for len(released) < len(all) {
		next := ""
		for _, n := range all {
			if !released[n] && len(l.startsOf(n)) > 0 {
				next = n
				break
			}
		}
		before := startedOf(all...)
		gates[next] <- outcome{out: next}
		released[next] = true
		awaitRecord(t, h, idOf(next), next, "done:"+next)
		if before < len(all) {
			await.True(t, 10*time.Second, "a waiting effect to start", func() bool { return startedOf(all...) == before+1 })
		}
		if n := startedOf(all...); n > before+1 {
			t.Fatalf("%d effects started after one finished, from %d", n, before)
		}
	}
	total, maxTotal, maxActor := l.concurrency()
	if total != 0 || maxTotal != 3 || maxActor["a"] != 2 || maxActor["b"] != 2 {
		t.Fatalf("concurrency: now %d, at most %d overall and %v per actor; want 0, 3, 2 each", total, maxTotal, maxActor)
	}
	if r, w := effectMetric(h, "shardkeeper_effects_running", nil), effectMetric(h, "shardkeeper_effects_waiting", nil); r != 0 || w != 0 {
		t.Fatalf("running %v waiting %v at the end", r, w)
	}
	// The effects of one actor are taken up in the order of their requests (the first two
	// were taken at once by its two workers).
	order := l.startOrder("a")
	sort.Strings(order[:2])
	if o := strings.Join(order, ","); o != "a1,a2,a3,a4" {
		t.Fatalf("effects of a started in the order %s", o)
	}
}

func idOf(name string) string { return name[:1] }

// An activation with an effect in flight is not idle: it passivates only once the result has
// been handled (by itself) and committed.
func TestPassivationWaitsForEffects(t *testing.T) {
	l := newLab()
	idle := 20 * time.Millisecond
	h := actortest.New(t, actortest.Options{Runtime: actors.Options{IdleTimeout: idle}}, outbox(l))
	passivations := func() float64 {
		return h.Metric("shardkeeper_actor_passivations_total", "", map[string]string{"kind": outboxKind})
	}
	slow := l.hold("slow")
	h.MustCall(outboxKind, "a", "send", []byte("slow"))
	l.awaitStarts(t, "slow", 1)
	never(t, 10*idle, "an activation with an effect in flight passivated", func() bool { return passivations() > 0 })
	slow <- outcome{out: "done"}
	await.True(t, 10*time.Second, "passivation after the result", func() bool { return passivations() == 1 })
	if r := record(h, "a", "slow"); r != "done:done" {
		t.Fatalf("slow = %q", r)
	}
	if hs := l.handlings("slow"); len(hs) != 1 || hs[0].instance != l.startsOf("slow")[0] || finished(h, "dropped") != 0 {
		t.Fatalf("handled %+v", hs)
	}
}

// A failing HandleEffect loses the result, so the activation restarts: the next one's
// Activate finds the record still pending and sends again.
func TestEffectHandlerFailureRestarts(t *testing.T) {
	l := newLab()
	l.failHandle["tx"] = true
	h := actortest.New(t, actortest.Options{}, outbox(l))
	h.MustCall(outboxKind, "a", "send", []byte("tx"))
	await.True(t, 10*time.Second, "the failed handling", func() bool { return len(l.handlings("tx")) == 1 })
	if r := record(h, "a", "tx"); r != "pending" {
		t.Fatalf("tx = %q after its handler failed, want pending (its writes discarded)", r)
	}
	// Messages reach the restarting activation, which refuses them as not applied, until it
	// retired; the next one starts a new activation.
	await.True(t, 10*time.Second, "a new activation", func() bool {
		_, err := h.Call(outboxKind, "a", "get", []byte("tx"))
		if err != nil && !errors.Is(err, actors.ErrNotApplied) {
			t.Fatalf("get while restarting: %v, want ErrNotApplied", err)
		}
		return err == nil
	})
	awaitRecord(t, h, "a", "tx", "done:ok")
	starts, hs := l.startsOf("tx"), l.handlings("tx")
	if len(starts) != 2 || len(hs) != 2 || hs[0].instance != starts[0] || hs[1].instance != starts[1] || starts[0] == starts[1] {
		t.Fatalf("starts %v handled %+v: want the second start and handling by a new activation", starts, hs)
	}
	if pending, _ := l.activation(starts[1]); len(pending) != 1 || pending[0] != "tx" {
		t.Fatalf("the new activation's Activate found %v", pending)
	}
}

// A failing Activate retires the activation at once: what was queued is not applied, and the
// next message tries a new activation.
func TestActivateFailureRetires(t *testing.T) {
	l := newLab()
	l.failActs = 1
	h := actortest.New(t, actortest.Options{}, outbox(l))
	if _, err := h.Call(outboxKind, "a", "send", []byte("tx")); !errors.Is(err, actors.ErrNotApplied) {
		t.Fatalf("send to an activation that failed to activate: %v, want ErrNotApplied", err)
	}
	if r := record(h, "a", "tx"); r != "" || len(l.startsOf("tx")) != 0 {
		t.Fatalf("a refused send left %q and %d starts", r, len(l.startsOf("tx")))
	}
	h.MustCall(outboxKind, "a", "send", []byte("tx"))
	awaitRecord(t, h, "a", "tx", "done:ok")
	if n := h.Metric("shardkeeper_actor_activations_total", "", map[string]string{"kind": outboxKind}); n != 2 {
		t.Fatalf("%v activations, want 2", n)
	}
}

// The pattern for failover without traffic: a kind keeps an alarm while an effect is in flight.
// After failover nobody calls the actor, but the alarm's firing activates it, and Activate
// reconciles before the alarm handler runs.
func TestAlarmActivatesReconciliationAfterFailover(t *testing.T) {
	l := newLab()
	clock := actortest.NewClock(time.Now().Add(time.Hour))
	h := actortest.New(t, actortest.Options{Runtime: actors.Options{Clock: clock.Now}}, outbox(l))
	old := l.hold("tx")
	h.MustCall(outboxKind, "a", "send-watched", []byte("tx"))
	l.awaitStarts(t, "tx", 1)
	h.Failover()
	await.True(t, 10*time.Second, "the old effect's cancellation", func() bool { return l.cancellations("tx") == 1 })
	old <- outcome{}
	clock.Advance(2 * time.Minute) // the watch alarm is due
	h.Wake(outboxKind, "a")
	l.awaitStarts(t, "tx", 2)
	awaitRecord(t, h, "a", "tx", "done:ok")
	starts := l.startsOf("tx")
	if pending, _ := l.activation(starts[1]); len(pending) != 1 || pending[0] != "tx" {
		t.Fatalf("Activate found %v", pending)
	}
	await.True(t, 10*time.Second, "the watch alarm to fire", func() bool {
		return len(h.State(outboxKind, "a").Alarms) == 0
	})
}

// An activation restarting after a failed HandleEffect drains: it refuses new messages and
// drops the results arriving meanwhile, lets its write in flight commit, then retires. The
// next activation reconciles both lost results from storage.
func TestRestartingActivationDropsResults(t *testing.T) {
	l := newLab()
	l.failHandle["x"] = true
	h, g := gated(t, actors.Options{RequestTimeout: 30 * time.Second}, outbox(l))
	commit := func(method, name string) {
		errc := callAsync(h, "a", method, name)
		<-g.Proposed
		g.Release <- nil
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	x, y := l.hold("x"), l.hold("y")
	commit("send", "x")
	commit("send", "y")
	l.awaitStarts(t, "x", 1)
	l.awaitStarts(t, "y", 1)
	noted := callAsync(h, "a", "note", "w")
	<-g.Proposed // w's write is in flight: the activation cannot retire before it resolves

	x <- outcome{out: "x"}
	await.True(t, 10*time.Second, "x's failed handling", func() bool { return len(l.handlings("x")) == 1 })
	y <- outcome{out: "y"}
	await.True(t, 10*time.Second, "y's result dropped", func() bool { return finished(h, "dropped") == 1 })
	if hs := l.handlings("y"); len(hs) != 0 {
		t.Fatalf("a restarting activation handled %+v", hs)
	}
	if _, err := h.Call(outboxKind, "a", "get", []byte("x")); !errors.Is(err, actors.ErrNotApplied) {
		t.Fatalf("get while restarting: %v, want ErrNotApplied", err)
	}

	g.Release <- nil
	if err := <-noted; err != nil {
		t.Fatalf("the write in flight when the activation began to restart: %v", err)
	}
	pump(t, g)
	await.True(t, 10*time.Second, "a new activation", func() bool {
		_, err := h.Call(outboxKind, "a", "get", []byte("w"))
		return err == nil
	})
	if v := string(h.MustCall(outboxKind, "a", "reconciled", nil)); v != "x,y" {
		t.Fatalf("reconciled = %q, want x,y", v)
	}
	awaitRecord(t, h, "a", "x", "done:ok")
	awaitRecord(t, h, "a", "y", "done:ok")
	if r := record(h, "a", "w"); r != "noted" {
		t.Fatalf("w = %q", r)
	}
}

// Each kind has a reserve of the node's effect slots: a kind flooding effects takes the shared
// pool and its own reserve, never another kind's, which can still start effects at once;
// past its own reserve, with the pool taken, the other kind waits too.
func TestEffectSlotsReservedPerKind(t *testing.T) {
	l := newLab()
	flood := outbox(l)
	flood.Name = "flood"
	// 24 slots over three kinds (flood, outbox and the harness's own): a reserve of 2 each
	// (24 / (4 × 3)), 18 shared; one kind runs at most 20.
	const maxEffects, reserve, perKind = 24, 2, 20
	h := actortest.New(t, actortest.Options{Runtime: actors.Options{MaxEffects: maxEffects, MaxEffectsPerActor: 100}}, flood, outbox(l))
	running := func(kind string) float64 {
		return effectMetric(h, "shardkeeper_effects_running", map[string]string{"kind": kind})
	}
	var gates []chan<- outcome
	var floods []string
	for i := range perKind + 10 {
		name := fmt.Sprintf("f%02d", i)
		floods = append(floods, name)
		gates = append(gates, l.hold(name))
		h.MustCall("flood", "f", "send", []byte(name))
	}
	await.True(t, 10*time.Second, "the flood to take its share", func() bool { return running("flood") == perKind })
	never(t, quiet, "the flood took more than the pool and its reserve", func() bool { return running("flood") > perKind })
	if w := effectMetric(h, "shardkeeper_effects_waiting", map[string]string{"kind": "flood"}); w != 10 {
		t.Fatalf("%v effects of the flood waiting, want 10", w)
	}

	// The other kind starts its reserve's worth at once, beside the flood.
	o1, o2, o3 := l.hold("o1"), l.hold("o2"), l.hold("o3")
	h.MustCall(outboxKind, "o", "send", []byte("o1"))
	h.MustCall(outboxKind, "o", "send", []byte("o2"))
	l.awaitStarts(t, "o1", 1)
	l.awaitStarts(t, "o2", 1)
	// Its third waits: its reserve is in use and the flood holds the pool.
	h.MustCall(outboxKind, "o", "send", []byte("o3"))
	never(t, quiet, "an effect started past its reserve with the pool taken", func() bool { return len(l.startsOf("o3")) > 0 })
	if _, maxTotal, _ := l.concurrency(); maxTotal != perKind+reserve {
		t.Fatalf("at most %d effects ran at once, want %d", maxTotal, perKind+reserve)
	}
	// One of its own ending gives its slot to it, not to the flood.
	o1 <- outcome{out: "o1"}
	awaitRecord(t, h, "o", "o1", "done:o1")
	l.awaitStarts(t, "o3", 1)
	if r := running("flood"); r != perKind {
		t.Fatalf("the flood runs %v effects, want %d", r, perKind)
	}

	o2 <- outcome{out: "o2"}
	o3 <- outcome{out: "o3"}
	for _, g := range gates {
		g <- outcome{out: "ok"}
	}
	await.True(t, 10*time.Second, "every effect to end", func() bool {
		for _, n := range floods {
			if len(l.startsOf(n)) == 0 {
				return false
			}
		}
		total, _, _ := l.concurrency()
		return total == 0
	})
	if _, maxTotal, _ := l.concurrency(); maxTotal > maxEffects {
		t.Fatalf("%d effects ran at once, more than the %d slots", maxTotal, maxEffects)
	}
}
