package actors_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/actors/actortest"
	"github.com/shardkeeper/shardkeeper/test/await"
)

// outboxKind is the name of the test kind with effects.
const outboxKind = "outbox"

// The outbox test kind records intents in its storage and runs them as effects, the way a kind
// talking to an outside service does. Every record is a key "out/<name>": "pending" while its
// effect is in flight, then "done:<output>" or "failed:<error>".
//
// Methods, the body being an effect name: "send" (writes the record pending and requests the
// effect), "send-then-fail" (the same, then fails: both are discarded), "effect-only" (requests
// the effect without writing), "alarm" (sets an alarm of that name, due now, whose firing does
// what "send" does), "send-watched" (what "send" does, and sets an alarm "watch/<name>" a
// minute later, which does nothing when it fires but activate the actor), "note" (writes the
// record "noted", without an effect), "get" (replies the record, or "<none>"), "reconciled" (replies what the
// activation's Activate found pending).
//
// Activate reconciles: it lists the records still pending, notes them under "reconciled"
// (only when there are any) and requests their effects again. HandleEffect writes the outcome
// and, when the lab says so, requests a follow-up effect or fails.
func outbox(l *lab) actors.Kind {
	return actors.Kind{Name: outboxKind, New: func(id string) actors.Handler {
		return &outboxHandler{lab: l, id: id, instance: l.instances.Add(1)}
	}}
}

type outboxHandler struct {
	lab      *lab
	id       string
	instance int64 // which activation this is, counted by the lab
}

var (
	outPrefix     = []byte("out/")
	keyReconciled = []byte("reconciled")
)

func outKey(name string) []byte { return append(append([]byte(nil), outPrefix...), name...) }

func (h *outboxHandler) Receive(ctx *actors.Context, req actors.Request) ([]byte, error) {
	defer h.lab.signal(req.Method + " " + string(req.Body))
	name := string(req.Body)
	switch req.Method {
	case "send", "send-then-fail":
		if err := h.send(ctx, name); err != nil {
			return nil, err
		}
		if req.Method == "send-then-fail" {
			return nil, errors.New("failing after requesting an effect")
		}
		return []byte("queued"), nil
	case "send-watched":
		if err := h.send(ctx, name); err != nil {
			return nil, err
		}
		return nil, ctx.SetAlarm("watch/"+name, ctx.Now().Add(time.Minute))
	case "note":
		ctx.Put(outKey(name), []byte("noted"))
		return nil, nil
	case "effect-only":
		return nil, ctx.Effect(name, h.lab.effect(h.id, name, h.instance))
	case "alarm":
		return nil, ctx.SetAlarm(name, ctx.Now())
	case "get":
		v, ok, err := ctx.Get(outKey(name))
		if !ok {
			return []byte("<none>"), err
		}
		return v, err
	case "reconciled":
		v, _, err := ctx.Get(keyReconciled)
		return v, err
	}
	return nil, fmt.Errorf("outbox: unknown method %q", req.Method)
}

func (h *outboxHandler) send(ctx *actors.Context, name string) error {
	ctx.Put(outKey(name), []byte("pending"))
	return ctx.Effect(name, h.lab.effect(h.id, name, h.instance))
}

func (h *outboxHandler) Alarm(ctx *actors.Context, a actors.Alarm) error {
	if strings.HasPrefix(a.Name, "watch/") {
		return nil // its firing activated the actor: Activate did the work
	}
	return h.send(ctx, a.Name)
}

func (h *outboxHandler) Activate(ctx *actors.Context) error {
	if h.lab.failActivation() {
		return errors.New("activation told to fail")
	}
	kvs, err := ctx.List(actors.ListOptions{Prefix: outPrefix})
	if err != nil {
		return err
	}
	var pending []string
	for _, kv := range kvs {
		if string(kv.Value) == "pending" {
			name := string(kv.Key[len(outPrefix):])
			pending = append(pending, name)
			// Re-send: the effects of the previous activation are gone with it.
			if err := ctx.Effect(name, h.lab.effect(h.id, name, h.instance)); err != nil {
				return err
			}
		}
	}
	h.lab.activated(h.instance, pending)
	if len(pending) > 0 {
		ctx.Put(keyReconciled, []byte(strings.Join(pending, ",")))
	}
	return nil
}

func (h *outboxHandler) HandleEffect(ctx *actors.Context, r actors.EffectResult) error {
	h.lab.handledBy(h.instance, r)
	if h.lab.failHandling(r.Name) {
		ctx.Put(outKey(r.Name), []byte("must not be written"))
		return errors.New("effect handler told to fail")
	}
	if r.Err != nil {
		ctx.Put(outKey(r.Name), []byte("failed:"+r.Err.Error()))
	} else {
		ctx.Put(outKey(r.Name), []byte("done:"+string(r.Output)))
	}
	if next := h.lab.followUp(r.Name); next != "" {
		return h.send(ctx, next)
	}
	return nil
}

// lab runs the outbox kind's effects for a test: an effect returns at once with output "ok"
// unless the test held its name, and then waits for the test to release it. The lab records
// which activation started and handled each effect, cancellations, and the concurrency seen.
type lab struct {
	instances atomic.Int64
	// stubborn effects ignore cancellation: they note it and keep waiting for their release.
	stubborn bool
	// received is signalled with "<method> <body>" each time the kind handled a request.
	received chan string

	mu          sync.Mutex
	gates       map[string][]chan outcome // per name, the gates of its next starts
	starts      map[string][]int64        // per name, the activation of each start
	order       map[string][]string       // per actor, the names of its effects in the order they started
	cancelled   map[string]int
	handled     map[string][]handling
	activations map[int64][]string // Activate's pending records, per activation
	failHandle  map[string]bool    // fail HandleEffect once for these names
	failActs    int                // fail this many Activate calls
	then        map[string]string  // HandleEffect of a name requests this effect
	running     map[string]int     // per actor
	total       int
	maxActor    map[string]int
	maxTotal    int
}

type outcome struct {
	out string
	err error
}

type handling struct {
	instance int64
	result   actors.EffectResult
}

func newLab() *lab {
	return &lab{received: make(chan string, 4096), gates: map[string][]chan outcome{},
		starts: map[string][]int64{}, order: map[string][]string{}, cancelled: map[string]int{}, handled: map[string][]handling{},
		activations: map[int64][]string{}, failHandle: map[string]bool{}, then: map[string]string{},
		running: map[string]int{}, maxActor: map[string]int{}}
}

// hold makes the next start of effect name wait for a value on the returned channel.
func (l *lab) hold(name string) chan<- outcome {
	g := make(chan outcome, 1)
	l.mu.Lock()
	l.gates[name] = append(l.gates[name], g)
	l.mu.Unlock()
	return g
}

func (l *lab) effect(actor, name string, instance int64) actors.EffectFunc {
	return func(ctx context.Context) ([]byte, error) {
		l.mu.Lock()
		l.starts[name] = append(l.starts[name], instance)
		l.order[actor] = append(l.order[actor], name)
		var gate chan outcome
		if gs := l.gates[name]; len(gs) > 0 {
			gate, l.gates[name] = gs[0], gs[1:]
		}
		l.running[actor]++
		l.total++
		l.maxActor[actor] = max(l.maxActor[actor], l.running[actor])
		l.maxTotal = max(l.maxTotal, l.total)
		l.mu.Unlock()
		defer func() {
			l.mu.Lock()
			l.running[actor]--
			l.total--
			l.mu.Unlock()
		}()
		if gate == nil {
			return []byte("ok"), nil
		}
		select {
		case o := <-gate:
			return []byte(o.out), o.err
		case <-ctx.Done():
			l.mu.Lock()
			l.cancelled[name]++
			l.mu.Unlock()
			if !l.stubborn {
				return nil, ctx.Err()
			}
			o := <-gate
			return []byte(o.out), o.err
		}
	}
}

func (l *lab) signal(what string) {
	select {
	case l.received <- what:
	default:
	}
}

// await waits until the kind handled the request "<method> <body>", skipping others.
func (l *lab) await(t *testing.T, what string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-l.received:
			if got == what {
				return
			}
		case <-timeout:
			t.Fatalf("timed out waiting for the kind to handle %q", what)
		}
	}
}

func (l *lab) startsOf(name string) []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int64(nil), l.starts[name]...)
}

func (l *lab) startOrder(actor string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.order[actor]...)
}

func (l *lab) cancellations(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cancelled[name]
}

func (l *lab) handlings(name string) []handling {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]handling(nil), l.handled[name]...)
}

func (l *lab) handledBy(instance int64, r actors.EffectResult) {
	l.mu.Lock()
	l.handled[r.Name] = append(l.handled[r.Name], handling{instance, r})
	l.mu.Unlock()
}

func (l *lab) activated(instance int64, pending []string) {
	l.mu.Lock()
	l.activations[instance] = pending
	l.mu.Unlock()
}

func (l *lab) activation(instance int64) ([]string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	p, ok := l.activations[instance]
	return p, ok
}

func (l *lab) failActivation() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failActs > 0 {
		l.failActs--
		return true
	}
	return false
}

func (l *lab) failHandling(name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	fail := l.failHandle[name]
	delete(l.failHandle, name)
	return fail
}

func (l *lab) followUp(name string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.then[name]
}

func (l *lab) concurrency() (total, maxTotal int, maxActor map[string]int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := map[string]int{}
	for k, v := range l.maxActor {
		m[k] = v
	}
	return l.total, l.maxTotal, m
}

// awaitStarts waits until effect name has started n times.
func (l *lab) awaitStarts(t *testing.T, name string, n int) {
	t.Helper()
	await.True(t, 10*time.Second, fmt.Sprintf("effect %s to start %d times", name, n), func() bool {
		return len(l.startsOf(name)) >= n
	})
}

// record reads the committed outbox record name of actor id ("" if absent).
func record(h *actortest.Harness, id, name string) string {
	v, _ := h.State(outboxKind, id).Get("out/" + name)
	return string(v)
}

// awaitRecord waits until the committed record name of actor id reads want.
func awaitRecord(t *testing.T, h *actortest.Harness, id, name, want string) {
	t.Helper()
	await.True(t, 10*time.Second, fmt.Sprintf("record %s of %s to read %q", name, id, want), func() bool {
		return record(h, id, name) == want
	})
}

// pump commits every proposal to a gated replicator from now on, until the test ends.
func pump(t *testing.T, g *actortest.Gated) {
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-g.Proposed:
				select {
				case g.Release <- nil:
				case <-stop:
					return
				}
			case <-stop:
				return
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
}

// effectMetric reads one of the runtime's effect metrics for the outbox kind.
func effectMetric(h *actortest.Harness, name string, labels map[string]string) float64 {
	l := map[string]string{"kind": outboxKind}
	for k, v := range labels {
		l[k] = v
	}
	field := ""
	if name == "shardkeeper_effect_duration_seconds" {
		field = "count"
	}
	return h.Metric(name, field, l)
}

func finished(h *actortest.Harness, outcome string) float64 {
	return effectMetric(h, "shardkeeper_effects_finished_total", map[string]string{"outcome": outcome})
}
