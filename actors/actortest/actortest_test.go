package actortest_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/actors/actortest"
	"github.com/shardkeeper/shardkeeper/test/await"
	"github.com/shardkeeper/shardkeeper/test/testkinds"
)

func setAlarm(t *testing.T, h *actortest.Harness, id, name string, at time.Time) {
	t.Helper()
	b, _ := json.Marshal(testkinds.SetAlarm{Name: name, At: at.UnixMilli()})
	h.MustCall(testkinds.CounterKind, id, "set-alarm", b)
}

// State reads back exactly what a handler wrote and the alarms it set, and nothing of other
// actors of the partition.
func TestState(t *testing.T) {
	clock := actortest.NewClock(time.Now().Add(time.Hour))
	h := actortest.New(t, actortest.Options{Runtime: actors.Options{Clock: clock.Now}}, testkinds.Counter())
	h.MustCall(testkinds.CounterKind, "a", "incr", nil)
	h.MustCall(testkinds.CounterKind, "a", "incr", nil)
	at := clock.Now().Add(time.Minute)
	setAlarm(t, h, "a", "later", at)
	h.MustCall(testkinds.CounterKind, "b", "incr", nil) // another actor, maybe of the same partition

	s := h.State(testkinds.CounterKind, "a")
	if v, ok := s.Get("n"); !ok || string(v) != "2" || len(s.Data) != 1 {
		t.Fatalf("data %q, want n=2 only", s.Data)
	}
	want := actortest.StoredAlarm{Due: at.UnixMilli(), Scheduled: at.UnixMilli()}
	if len(s.Alarms) != 1 || s.Alarms["later"] != want || len(s.Parked) != 0 || s.Keys() != 2 {
		t.Fatalf("alarms %+v parked %+v, want later=%+v", s.Alarms, s.Parked, want)
	}
	if s := h.State(testkinds.CounterKind, "never"); s.Keys() != 0 {
		t.Fatalf("an actor that never ran holds %d keys", s.Keys())
	}
}

// After the fake clock jumps past an alarm, the sleeping scheduler fires it once woken, and
// waking leaves no key behind.
func TestWake(t *testing.T) {
	clock := actortest.NewClock(time.Now().Add(time.Hour))
	h := actortest.New(t, actortest.Options{Runtime: actors.Options{Clock: clock.Now}}, testkinds.Counter())
	setAlarm(t, h, "w", "soon", clock.Now().Add(time.Minute))
	before := h.KeyCount(testkinds.CounterKind, "w")
	clock.Advance(2 * time.Minute)
	h.Wake(testkinds.CounterKind, "w")
	await.True(t, 10*time.Second, "the alarm to fire", func() bool {
		return len(h.State(testkinds.CounterKind, "w").Alarms) == 0
	})
	// Fired: the alarm's two keys went, the firing record came.
	if got := h.KeyCount(testkinds.CounterKind, "w"); got != before-1 {
		t.Fatalf("%d keys after the firing, want %d", got, before-1)
	}
	if n := h.Metric("shardkeeper_alarms_fired_total", "", map[string]string{"kind": testkinds.CounterKind}); n != 1 {
		t.Fatalf("fired %v times", n)
	}
}

// A gated commit holds its reply until released; a failed one fails it.
func TestGated(t *testing.T) {
	var g *actortest.Gated
	h := actortest.New(t, actortest.Options{Wrap: func(m *actors.MemReplicator) actors.Replicator {
		g = actortest.NewGated(m)
		return g
	}}, testkinds.Counter())
	done := make(chan error, 1)
	go func() { _, err := h.Call(testkinds.CounterKind, "g", "incr", nil); done <- err }()
	if grp := <-g.Proposed; grp != actortest.Layout.Of(h.Partition(testkinds.CounterKind, "g")) {
		t.Fatalf("proposed to group %d", grp)
	}
	select {
	case err := <-done:
		t.Fatalf("reply before the commit: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	g.Release <- errors.New("refused")
	if err := <-done; !errors.Is(err, actors.ErrUnavailable) {
		t.Fatalf("reply of a failed commit: %v", err)
	}
	if s := h.State(testkinds.CounterKind, "g"); s.Keys() != 0 {
		t.Fatalf("a failed commit stored %+v", s)
	}
}

func TestClock(t *testing.T) {
	c := actortest.NewClock(time.UnixMilli(1000))
	c.Advance(time.Second)
	if c.NowMS() != 2000 {
		t.Fatalf("after Advance: %d", c.NowMS())
	}
	if err := c.Sleep(context.Background(), 3*time.Second); err != nil || c.NowMS() != 5000 {
		t.Fatalf("Sleep: %v, now %d", err, c.NowMS())
	}
	c.SetMS(100)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Sleep(ctx, time.Second); err == nil || c.NowMS() != 100 {
		t.Fatalf("Sleep on a done context: %v, now %d", err, c.NowMS())
	}
	if w := c.Waits(); len(w) != 1 || w[0] != 3*time.Second {
		t.Fatalf("waits %v", w)
	}
}

// A restart keeps the store and starts fresh metrics; failover keeps serving.
func TestRestartAndFailover(t *testing.T) {
	h := actortest.New(t, actortest.Options{}, testkinds.Counter())
	h.MustCall(testkinds.CounterKind, "r", "incr", nil)
	if n := h.Metric("shardkeeper_actor_activations_total", "", nil); n != 1 {
		t.Fatalf("%v activations", n)
	}
	h.Restart(testkinds.Counter())
	if n := h.Metric("shardkeeper_actor_activations_total", "", nil); n != 0 {
		t.Fatalf("%v activations on fresh metrics", n)
	}
	h.Failover()
	if v := h.MustCall(testkinds.CounterKind, "r", "incr", nil); string(v) != "2" {
		t.Fatalf("incr after restart and failover = %s, want 2", v)
	}
	var out json.RawMessage
	if err := h.CallJSON(testkinds.CounterKind, "r", "get", nil, &out); err != nil || string(out) != "2" {
		t.Fatalf("CallJSON get = %s, %v", out, err)
	}
}
