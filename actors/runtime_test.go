package actors_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/test/await"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/actors/actortest"
	"github.com/shardkeeper/shardkeeper/test/testkinds"
)

// N concurrent increments from many goroutines on one actor give exactly N.
func TestConcurrentIncrementsOnOneActor(t *testing.T) {
	e := actortest.New(t, actortest.Options{}, testkinds.Counter())
	const goroutines, per = 64, 50
	var wg sync.WaitGroup
	seen := make([]map[int64]bool, goroutines)
	for g := range goroutines {
		seen[g] = map[int64]bool{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				v, _ := strconv.ParseInt(string(e.MustCall("counter", "hot", "incr", nil)), 10, 64)
				seen[g][v] = true
			}
		}()
	}
	wg.Wait()
	if got := string(e.MustCall("counter", "hot", "get", nil)); got != strconv.Itoa(goroutines*per) {
		t.Fatalf("counter = %s, want %d", got, goroutines*per)
	}
	// Every reply is a distinct value: increments were serialized, none lost or doubled.
	all := map[int64]bool{}
	for _, s := range seen {
		for v := range s {
			if all[v] {
				t.Fatalf("value %d returned twice", v)
			}
			all[v] = true
		}
	}
	if len(all) != goroutines*per {
		t.Fatalf("%d distinct replies, want %d", len(all), goroutines*per)
	}
	// And the writes are durable in storage, not just in the activation.
	v, ok, err := e.Store.Get(actors.PartitionOf("counter", "hot", actortest.Partitions), counterKey("hot"))
	if err != nil || !ok || string(v) != strconv.Itoa(goroutines*per) {
		t.Fatalf("stored counter = %q %v %v", v, ok, err)
	}
}

// counterKey is the relative state key of the counter's value (layout of actors/keys.go).
func counterKey(id string) []byte {
	k := []byte{'a', byte(len("counter"))}
	k = append(k, "counter"...)
	k = append(k, byte(len(id)))
	k = append(k, id...)
	return append(k, 'n')
}

// rendezvous is a kind whose "meet" waits until `parties` handlers (of any actors) are
// inside it at once. If activations were serialized across actors, it could never complete.
type rendezvous struct {
	mu      sync.Mutex
	arrived int
	all     chan struct{}
	parties int
	// inside counts concurrent handlers per actor, to prove one-at-a-time within an actor.
	inside sync.Map
}

func (r *rendezvous) kind() actors.Kind {
	return actors.Kind{Name: "meet", New: func(id string) actors.Handler { return rendezvousHandler{r, id} }}
}

type rendezvousHandler struct {
	r  *rendezvous
	id string
}

func (h rendezvousHandler) Receive(ctx *actors.Context, req actors.Request) ([]byte, error) {
	c, _ := h.r.inside.LoadOrStore(h.id, new(atomic.Int32))
	if n := c.(*atomic.Int32).Add(1); n != 1 {
		return nil, fmt.Errorf("%d handlers of actor %s ran at once", n, h.id)
	}
	defer c.(*atomic.Int32).Add(-1)
	if req.Method == "touch" {
		return nil, nil
	}
	h.r.mu.Lock()
	h.r.arrived++
	if h.r.arrived == h.r.parties {
		close(h.r.all)
	}
	h.r.mu.Unlock()
	select {
	case <-h.r.all:
		return []byte("met"), nil
	case <-time.After(20 * time.Second):
		return nil, errors.New("the other actors never ran concurrently with this one")
	}
}

// Messages to different actors run in parallel; messages to one actor never do.
func TestDifferentActorsRunInParallel(t *testing.T) {
	r := &rendezvous{all: make(chan struct{}), parties: 8}
	e := actortest.New(t, actortest.Options{Runtime: actors.Options{RequestTimeout: 30 * time.Second}}, r.kind())
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range r.parties {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.Runtime.Call(context.Background(), "meet", fmt.Sprintf("a%d", i), actors.Request{Method: "meet"}); err != nil {
				errs <- err
			}
		}()
	}
	// Meanwhile hammer one actor from many goroutines: its handler detects overlap.
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if _, err := e.Runtime.Call(context.Background(), "meet", "single", actors.Request{Method: "touch"}); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// Coalescing: messages that arrive while a commit is in flight share the next command. The
// first command is held until all 64 callers' messages have been handled, so at most one
// more command may carry the rest.
func TestWritesCoalesceIntoFewCommands(t *testing.T) {
	var g *actortest.Gated
	handled := make(chan struct{}, 64)
	e := actortest.New(t, actortest.Options{Wrap: func(m *actors.MemReplicator) actors.Replicator { g = actortest.NewGated(m); return g }},
		signalling(testkinds.Counter(), handled))
	const callers = 64
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.MustCall("counter", "c", "incr", nil)
		}()
	}
	<-g.Proposed // the first command, carrying whatever was handled before it went out
	for range callers {
		<-handled
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	g.Release <- nil
	select {
	case <-done: // the first command carried all 64
	case <-g.Proposed:
		g.Release <- nil
		select {
		case <-done:
		case <-g.Proposed:
			g.Release <- errInjected
			t.Fatal("a third command: messages handled while the first was in flight were not coalesced")
		}
	}
	commands := e.Metric("shardkeeper_commit_messages", "count", nil)
	messages := e.Metric("shardkeeper_commit_messages", "sum", nil)
	if messages != callers || commands > 2 {
		t.Fatalf("%v messages in %v commands, want %d in at most 2", messages, commands, callers)
	}
}

// The output gate: replies wait for their commit, later messages read uncommitted writes, and
// a failed commit fails every held reply and discards the uncommitted state.
func TestOutputGateAndFailedCommit(t *testing.T) {
	var g *actortest.Gated
	handled := make(chan struct{}, 16)
	e := actortest.New(t, actortest.Options{Runtime: actors.Options{RequestTimeout: 30 * time.Second}, Wrap: func(m *actors.MemReplicator) actors.Replicator { g = actortest.NewGated(m); return g }}, signalling(testkinds.Counter(), handled))

	// First increment: committed normally.
	done := make(chan string, 1)
	go func() { done <- string(e.MustCall("counter", "x", "incr", nil)) }()
	<-g.Proposed
	select {
	case v := <-done:
		t.Fatalf("reply %q released before its commit", v)
	default:
	}
	g.Release <- nil
	if v := <-done; v != "1" {
		t.Fatalf("first incr = %s", v)
	}
	<-handled

	// Second increment is in flight; a third reads its uncommitted value and is held behind it.
	type res struct {
		v   string
		err error
	}
	second, third := make(chan res, 1), make(chan res, 1)
	incr := func(results chan<- res) {
		b, err := e.Runtime.Call(context.Background(), "counter", "x", actors.Request{Method: "incr"})
		results <- res{string(b), err}
	}
	go incr(second)
	<-g.Proposed
	<-handled
	go incr(third)
	// The third message's writes form the next batch, proposed only after the second commits;
	// fail the second.
	<-handled
	g.Release <- errInjected
	// The second's outcome is unknown (its entry was proposed); the third's batch was never
	// proposed, so it certainly had no effect and may be sent again.
	if r := <-second; !errors.Is(r.err, actors.ErrUnavailable) || errors.Is(r.err, actors.ErrNotApplied) {
		t.Fatalf("reply of the failed commit: %q, %v; want ErrUnavailable, not ErrNotApplied", r.v, r.err)
	}
	if r := <-third; !errors.Is(r.err, actors.ErrNotApplied) || !errors.Is(r.err, actors.ErrUnavailable) {
		t.Fatalf("reply of the batch behind it: %q, %v; want ErrUnavailable and ErrNotApplied", r.v, r.err)
	}
	// The failed writes are gone: the next increment, sent once the failure is seen, reaches a
	// fresh activation that reads committed state (1).
	go func() { done <- string(e.MustCall("counter", "x", "incr", nil)) }()
	<-g.Proposed
	g.Release <- nil
	<-handled
	if v := <-done; v != "2" {
		t.Fatalf("after failed commit incr = %s, want 2 (uncommitted state must be discarded)", v)
	}
	if n := e.Metric("shardkeeper_actor_activations_total", "", nil); n != 2 {
		t.Fatalf("%v activations, want 2 (a failed commit retires the activation)", n)
	}
}

var errInjected = errors.New("injected commit failure")

// signalling wraps a kind so that each handled message is signalled on ch.
func signalling(k actors.Kind, ch chan<- struct{}) actors.Kind {
	inner := k.New
	k.New = func(id string) actors.Handler { return signaller{inner(id), ch} }
	return k
}

type signaller struct {
	actors.Handler
	ch chan<- struct{}
}

func (s signaller) Receive(ctx *actors.Context, req actors.Request) ([]byte, error) {
	defer func() { s.ch <- struct{}{} }()
	return s.Handler.Receive(ctx, req)
}

// A request whose commit cannot finish before its deadline fails with ErrUnavailable.
func TestDeadlineGivesUnavailable(t *testing.T) {
	var g *actortest.Gated
	e := actortest.New(t, actortest.Options{Wrap: func(m *actors.MemReplicator) actors.Replicator { g = actortest.NewGated(m); return g }},
		testkinds.Counter())
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := e.Runtime.Call(ctx, "counter", "slow", actors.Request{Method: "incr"})
		errc <- err
	}()
	<-g.Proposed
	if err := <-errc; !errors.Is(err, actors.ErrUnavailable) || errors.Is(err, actors.ErrNotApplied) {
		t.Fatalf("err = %v, want ErrUnavailable with an unknown outcome", err)
	}
	g.Release <- nil // the commit completes late; the state is still consistent
	if v := string(e.MustCall("counter", "slow", "get", nil)); v != "1" {
		t.Fatalf("get = %s", v)
	}
}

// heldBarrier holds every Barrier, once hold is set, until the test ends: a partition whose
// leadership was gained stays not ready.
type heldBarrier struct {
	*actors.MemReplicator
	hold    atomic.Bool
	release chan struct{}
}

func (h *heldBarrier) Barrier(g uint32, timeout time.Duration) error {
	if h.hold.Load() {
		<-h.release
	}
	return h.MemReplicator.Barrier(g, timeout)
}

// becomingLeader returns a harness whose partition of counter "n" has just been gained and
// waits for its Barrier, and a function that reports the partition lost.
func becomingLeader(t *testing.T, requestTimeout time.Duration) (*actortest.Harness, func()) {
	var hb *heldBarrier
	e := actortest.New(t, actortest.Options{
		Runtime: actors.Options{RequestTimeout: requestTimeout},
		Wrap: func(m *actors.MemReplicator) actors.Replicator {
			hb = &heldBarrier{MemReplicator: m, release: make(chan struct{})}
			return hb
		},
	}, testkinds.Counter())
	g := actortest.Layout.Of(actors.PartitionOf("counter", "n", actortest.Partitions))
	hb.hold.Store(true)
	t.Cleanup(func() { close(hb.release) })
	e.Runtime.SetLeader(g, false)
	e.Runtime.SetLeader(g, true)
	return e, func() { e.Runtime.SetLeader(g, false) }
}

// A partition led here but not ready until the deadline, the caller's or RequestTimeout,
// fails the call with ErrNotApplied: nothing ran, so it is safe to retry. A caller that gives
// up first gets ErrUnavailable alone.
func TestDeadlineWhileBecomingLeader(t *testing.T) {
	e, _ := becomingLeader(t, 50*time.Millisecond)
	call := func(ctx context.Context) error {
		_, err := e.Runtime.Call(ctx, "counter", "n", actors.Request{Method: "incr"})
		return err
	}
	if err := call(context.Background()); !errors.Is(err, actors.ErrNotApplied) {
		t.Fatalf("RequestTimeout passed: %v, want ErrNotApplied", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := call(ctx); !errors.Is(err, actors.ErrNotApplied) {
		t.Fatalf("the caller's deadline passed: %v, want ErrNotApplied", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if err := call(ctx); !errors.Is(err, actors.ErrUnavailable) || errors.Is(err, actors.ErrNotApplied) {
		t.Fatalf("the caller gave up: %v, want ErrUnavailable alone", err)
	}
}

// A node that Raft reports deposed refuses a call at once with ErrNotApplied, so the router
// sends it to the new leader, and so does a call that was waiting for the partition to become
// ready when the leadership was lost; neither waits for its deadline. (partition_test.go
// checks the wake-up itself without timing.)
func TestDeposedRefusesAtOnce(t *testing.T) {
	const timeout = time.Minute
	e, lose := becomingLeader(t, timeout)
	errc := make(chan error, 1)
	go func() {
		_, err := e.Runtime.Call(context.Background(), "counter", "n", actors.Request{Method: "incr"})
		errc <- err
	}()
	select {
	case err := <-errc:
		t.Fatalf("a call returned before the leadership was lost: %v", err)
	case <-time.After(50 * time.Millisecond): // it waits for readiness meanwhile
	}
	lose()
	select {
	case err := <-errc:
		if !errors.Is(err, actors.ErrNotApplied) {
			t.Fatalf("waiting call: %v, want ErrNotApplied", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting call was held after the leadership was lost")
	}
	start := time.Now()
	if _, err := e.Runtime.Call(context.Background(), "counter", "n", actors.Request{Method: "incr"}); !errors.Is(err, actors.ErrNotApplied) {
		t.Fatalf("call to the deposed node: %v, want ErrNotApplied", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the deposed node held the call for %v", d)
	}
}

// Handler errors roll back the message's writes; a panic is an error, not a crash.
func TestHandlerErrorRollsBack(t *testing.T) {
	k := actors.Kind{Name: "kv", New: func(string) actors.Handler { return kvHandler{} }}
	e := actortest.New(t, actortest.Options{}, k)
	e.MustCall("kv", "a", "put", []byte("k=1"))
	if _, err := e.Runtime.Call(context.Background(), "kv", "a", actors.Request{Method: "put-then-fail", Body: []byte("k=2")}); err == nil {
		t.Fatal("want the handler's error")
	}
	if _, err := e.Runtime.Call(context.Background(), "kv", "a", actors.Request{Method: "panic"}); err == nil {
		t.Fatal("want an error from a panicking handler")
	}
	if v := string(e.MustCall("kv", "a", "get", []byte("k"))); v != "1" {
		t.Fatalf("k = %q, want 1 (failed message's write must be discarded)", v)
	}
	// A domain outcome (*actors.Error) is the reply, and the message's writes commit.
	_, err := e.Runtime.Call(context.Background(), "kv", "a", actors.Request{Method: "put-then-reject", Body: []byte("k=3")})
	var outcome *actors.Error
	if !errors.As(err, &outcome) || outcome.Code != "rejected" {
		t.Fatalf("err = %v, want the *actors.Error", err)
	}
	if v := string(e.MustCall("kv", "a", "get", []byte("k"))); v != "3" {
		t.Fatalf("k = %q, want 3 (an *actors.Error keeps the message's writes)", v)
	}
}

// Leadership loss fails held replies and stops accepting work until leadership returns.
func TestLeadershipLoss(t *testing.T) {
	var g *actortest.Gated
	e := actortest.New(t, actortest.Options{Runtime: actors.Options{RequestTimeout: 300 * time.Millisecond}, Wrap: func(m *actors.MemReplicator) actors.Replicator { g = actortest.NewGated(m); return g }}, testkinds.Counter())
	grp := actortest.Layout.Of(actors.PartitionOf("counter", "l", actortest.Partitions))
	errc := make(chan error, 1)
	go func() {
		_, err := e.Runtime.Call(context.Background(), "counter", "l", actors.Request{Method: "incr"})
		errc <- err
	}()
	<-g.Proposed
	e.Runtime.SetLeader(grp, false)
	if err := <-errc; !errors.Is(err, actors.ErrUnavailable) || errors.Is(err, actors.ErrNotApplied) {
		t.Fatalf("held reply after leadership loss: %v, want ErrUnavailable with an unknown outcome", err)
	}
	go func() { g.Release <- errInjected }() // raft fails the entry too
	if _, err := e.Runtime.Call(context.Background(), "counter", "l", actors.Request{Method: "get"}); !errors.Is(err, actors.ErrUnavailable) {
		t.Fatalf("call while not leader: %v, want ErrUnavailable", err)
	}
	e.Runtime.SetLeader(grp, true)
	actortest.WaitReady(t, e.Runtime, actortest.Partitions)
	if v := string(e.MustCall("counter", "l", "get", nil)); v != "0" {
		t.Fatalf("get = %s, want 0", v)
	}
}

// A group's partitions share one proposer: a partition becoming ready again waits for the
// command in flight when leadership changed, even one that carries only another partition's
// writes, and not for commands taken after it.
func TestReadinessWaitsForTheGroupsCommandInFlight(t *testing.T) {
	var g *actortest.Gated
	e := actortest.New(t, actortest.Options{Runtime: actors.Options{RequestTimeout: 300 * time.Millisecond},
		Wrap: func(m *actors.MemReplicator) actors.Replicator { g = actortest.NewGated(m); return g }}, testkinds.Counter())
	// Two actors of group 0, in its two partitions.
	ids := map[uint32]string{}
	for i := 0; len(ids) < 2; i++ {
		id := fmt.Sprintf("c%d", i)
		if p := actors.PartitionOf("counter", id, actortest.Partitions); actortest.Layout.Of(p) == 0 {
			ids[p] = id
		}
	}
	first := actortest.Layout.Group(0).First
	x, y := first, first+1
	go func() { _, _ = e.Runtime.Call(context.Background(), "counter", ids[y], actors.Request{Method: "incr"}) }()
	if grp := <-g.Proposed; grp != 0 {
		t.Fatalf("proposed to group %d", grp)
	}
	// Leadership of group 0 drops and returns while y's command is held.
	e.Runtime.SetLeader(0, false)
	e.Runtime.SetLeader(0, true)
	time.Sleep(100 * time.Millisecond) // what a wrong readiness would need to open
	if e.Runtime.Ready(x) || e.Runtime.Ready(y) {
		t.Fatalf("partition %d ready %v, %d ready %v while the group's command of the earlier leadership is in flight",
			x, e.Runtime.Ready(x), y, e.Runtime.Ready(y))
	}
	g.Release <- errInjected
	actortest.WaitReady(t, e.Runtime, actortest.Partitions)
	// Commands keep flowing through both partitions afterwards.
	for _, id := range ids {
		go func() { g.Release <- nil }()
		if v := string(e.MustCall("counter", id, "incr", nil)); v != "1" {
			t.Fatalf("%s incr = %s, want 1 (the failed command wrote nothing)", id, v)
		}
		<-g.Proposed
	}
}

// Idle activations passivate, and the next message reloads state from storage.
func TestPassivation(t *testing.T) {
	e := actortest.New(t, actortest.Options{Runtime: actors.Options{IdleTimeout: 30 * time.Millisecond}}, testkinds.Counter())
	e.MustCall("counter", "p", "incr", nil)
	await.True(t, 5*time.Second, "passivation", func() bool {
		return e.Metric("shardkeeper_actor_passivations_total", "", nil) == 1
	})
	if a := e.Metric("shardkeeper_actors_active", "", nil); a != 0 {
		t.Fatalf("%v active after passivation", a)
	}
	if v := string(e.MustCall("counter", "p", "incr", nil)); v != "2" {
		t.Fatalf("incr after passivation = %s, want 2", v)
	}
	if n := e.Metric("shardkeeper_actor_activations_total", "", nil); n != 2 {
		t.Fatalf("%v activations, want 2", n)
	}
}

func TestUnknownKind(t *testing.T) {
	e := actortest.New(t, actortest.Options{}, testkinds.Counter())
	if _, err := e.Runtime.Call(context.Background(), "nope", "x", actors.Request{}); !errors.Is(err, actors.ErrUnknownKind) {
		t.Fatalf("err = %v", err)
	}
}

func TestKindValidation(t *testing.T) {
	for _, k := range []actors.Kind{
		{Name: "Bad", New: func(string) actors.Handler { return nil }},
		{Name: "", New: func(string) actors.Handler { return nil }},
		{Name: "ok"},
	} {
		if _, err := actors.New(actors.Options{Store: nil}, k); err == nil {
			t.Errorf("kind %+v accepted", k)
		}
	}
}

func decodeFirings(t *testing.T, s string) []testkinds.Firing {
	t.Helper()
	var fs []testkinds.Firing
	if err := json.Unmarshal([]byte(s), &fs); err != nil {
		t.Fatal(err)
	}
	return fs
}

// deposedReplicator commits (as a leader would) but cannot confirm leadership, like a node
// that was paused and replaced: it must not answer reads from its own state.
type deposedReplicator struct{ *actors.MemReplicator }

func (deposedReplicator) VerifyLeader(uint32) actors.Future {
	return failedFuture{errors.New("not the leader any more")}
}

type failedFuture struct{ err error }

func (f failedFuture) Error() error { return f.err }

// A reply that depends on no uncommitted write waits for a leadership check after it was
// produced; a deposed leader answers ErrUnavailable instead of possibly stale state.
func TestReadsRequireVerifiedLeadership(t *testing.T) {
	e := actortest.New(t, actortest.Options{Wrap: func(m *actors.MemReplicator) actors.Replicator { return deposedReplicator{m} }},
		testkinds.Counter())
	if v := string(e.MustCall("counter", "r", "incr", nil)); v != "1" { // a commit proves leadership
		t.Fatalf("incr = %s", v)
	}
	if _, err := e.Runtime.Call(context.Background(), "counter", "r", actors.Request{Method: "get"}); !errors.Is(err, actors.ErrUnavailable) {
		t.Fatalf("read on a node that cannot verify its leadership: %v, want ErrUnavailable", err)
	}
}

// deactivated is a kind whose activations count their Deactivate calls per id.
type deactivated struct {
	mu    sync.Mutex
	calls map[string]int
}

type deactivatedHandler struct {
	d  *deactivated
	id string
}

func (h *deactivatedHandler) Receive(*actors.Context, actors.Request) ([]byte, error) {
	return nil, nil
}

func (h *deactivatedHandler) Deactivate() {
	h.d.mu.Lock()
	h.d.calls[h.id]++
	h.d.mu.Unlock()
}

func (d *deactivated) count(id string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.calls[id]
}

// Deactivate runs once when an activation ends: passivated, or its partition no longer led.
func TestDeactivate(t *testing.T) {
	d := &deactivated{calls: map[string]int{}}
	kind := actors.Kind{Name: "deact", New: func(id string) actors.Handler { return &deactivatedHandler{d: d, id: id} }}
	e := actortest.New(t, actortest.Options{Runtime: actors.Options{IdleTimeout: 50 * time.Millisecond}}, kind)
	e.MustCall("deact", "idle", "x", nil)
	await.True(t, 5*time.Second, "deactivated after passivation", func() bool { return d.count("idle") == 1 })

	e2 := actortest.New(t, actortest.Options{}, kind)
	e2.MustCall("deact", "led", "x", nil)
	if n := d.count("led"); n != 0 {
		t.Fatalf("deactivated %d times while active", n)
	}
	e2.Runtime.SetLeader(actortest.Layout.Of(actors.PartitionOf("deact", "led", actortest.Partitions)), false)
	await.True(t, 5*time.Second, "deactivated after leadership loss", func() bool { return d.count("led") == 1 })
	if n := d.count("idle"); n != 1 {
		t.Fatalf("the passivated activation was deactivated %d times", n)
	}
}
