package actors_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/actors/actortest"
	"github.com/shardkeeper/shardkeeper/persistence"
	"github.com/shardkeeper/shardkeeper/test/testkinds"
)

// bigGroup is one Raft group holding many partitions, as with thousands of partitions.
const bigGroup = 64

// barrierProbe counts the Barrier calls of each group and, while hold is set, holds each one
// until the test releases it.
type barrierProbe struct {
	*actors.MemReplicator
	hold     atomic.Bool
	entered  chan struct{} // told of each held call
	release  chan struct{} // a held call returns once it receives from here
	returned chan struct{} // told of each held call returning

	mu    sync.Mutex
	calls map[uint32]int
}

func (b *barrierProbe) Barrier(g uint32, timeout time.Duration) error {
	b.mu.Lock()
	b.calls[g]++
	b.mu.Unlock()
	if b.hold.Load() {
		b.entered <- struct{}{}
		<-b.release
		defer func() { b.returned <- struct{}{} }()
	}
	return b.MemReplicator.Barrier(g, timeout)
}

func (b *barrierProbe) count(g uint32) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls[g]
}

// newBigGroup starts a runtime of bigGroup partitions in one group, no leadership reported
// yet, over a barrierProbe.
func newBigGroup(t *testing.T) (*actors.Runtime, *barrierProbe) {
	t.Helper()
	store, err := persistence.Open(t.TempDir(), actortest.Logger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	mem, err := actors.NewMemReplicator(store, persistence.Layout{Partitions: bigGroup, Groups: 1})
	if err != nil {
		t.Fatal(err)
	}
	b := &barrierProbe{MemReplicator: mem, entered: make(chan struct{}, 8), release: make(chan struct{}),
		returned: make(chan struct{}, 8), calls: map[uint32]int{}}
	rt, err := actors.New(actors.Options{Store: store, Replicator: b, Partitions: bigGroup, Groups: 1,
		RequestTimeout: time.Minute, Logger: actortest.Logger()}, testkinds.Counter())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	t.Cleanup(func() { close(b.release) }) // runs first: no Barrier stays held
	return rt, b
}

// idsPerPartition returns a counter id of each partition of the runtime.
func idsPerPartition() []string {
	ids, found := make([]string, bigGroup), 0
	for i := 0; found < bigGroup; i++ {
		id := fmt.Sprintf("c%d", i)
		if p := actors.PartitionOf(testkinds.CounterKind, id, bigGroup); ids[p] == "" {
			ids[p] = id
			found++
		}
	}
	return ids
}

// Gaining the leadership of a group issues one Barrier, whatever the number of its partitions,
// and it readies all of them.
func TestOneBarrierPerLeadershipGain(t *testing.T) {
	rt, b := newBigGroup(t)
	rt.SetLeader(0, true)
	actortest.WaitReady(t, rt, bigGroup)
	if n := b.count(0); n != 1 {
		t.Fatalf("%d Barrier calls for one leadership gain of a group of %d partitions, want 1", n, bigGroup)
	}
	rt.SetLeader(0, false)
	rt.SetLeader(0, true)
	actortest.WaitReady(t, rt, bigGroup)
	if n := b.count(0); n != 2 {
		t.Fatalf("%d Barrier calls after a second gain, want 2", n)
	}
	for _, id := range idsPerPartition() {
		if v := string(actortest.MustCall(t, rt, testkinds.CounterKind, id, "incr", nil)); v != "1" {
			t.Fatalf("%s incr = %s, want 1", id, v)
		}
	}
}

// A loss reported while the group's Barrier is held wins: the waiting calls are refused, and
// when the Barrier then succeeds no partition opens; a later gain readies them all.
func TestLossDuringTheBarrierWins(t *testing.T) {
	rt, b := newBigGroup(t)
	ids := idsPerPartition()
	b.hold.Store(true)
	rt.SetLeader(0, true)
	<-b.entered
	waiting := make(chan error, 1)
	go func() {
		_, err := rt.Call(context.Background(), testkinds.CounterKind, ids[0], actors.Request{Method: "incr"})
		waiting <- err
	}()
	rt.SetLeader(0, false)
	if err := <-waiting; !errors.Is(err, actors.ErrNotApplied) {
		t.Fatalf("call waiting for readiness when the leadership was lost: %v, want ErrNotApplied", err)
	}
	b.release <- struct{}{}
	<-b.returned
	// A wrong opening would follow the Barrier's return at once; give it time to show.
	deadline := time.Now().Add(50 * time.Millisecond)
	for time.Now().Before(deadline) {
		for p := range uint32(bigGroup) {
			if rt.Ready(p) {
				t.Fatalf("partition %d ready after a Barrier of a leadership lost meanwhile", p)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, id := range ids {
		if _, err := rt.Call(context.Background(), testkinds.CounterKind, id, actors.Request{Method: "incr"}); !errors.Is(err, actors.ErrNotApplied) {
			t.Fatalf("call %s after the loss: %v, want ErrNotApplied", id, err)
		}
	}
	if n := b.count(0); n != 1 {
		t.Fatalf("%d Barrier calls, want 1", n)
	}

	b.hold.Store(false)
	rt.SetLeader(0, true)
	actortest.WaitReady(t, rt, bigGroup)
	if v := string(actortest.MustCall(t, rt, testkinds.CounterKind, ids[0], "incr", nil)); v != "1" {
		t.Fatalf("incr after regaining = %s, want 1 (the refused calls wrote nothing)", v)
	}
}

// A split moves partitions to the group it creates: they stop on this node at once and
// refuse calls (not applied: the router sends them where they are led) until the new group
// is led here and its Barrier passed; then they serve with the state they had. The
// partitions the old group keeps go on serving throughout.
func TestPartitionsMoveToTheSplitGroup(t *testing.T) {
	rt, b := newBigGroup(t)
	ids := idsPerPartition()
	rt.SetLeader(0, true)
	actortest.WaitReady(t, rt, bigGroup)
	for _, id := range ids {
		actortest.MustCall(t, rt, testkinds.CounterKind, id, "incr", nil)
	}
	const at = bigGroup / 2
	spans, err := b.Split(0, at)
	if err != nil {
		t.Fatal(err)
	}
	rt.Regroup(func() []persistence.Group { return spans })
	child := persistence.SplitID(at, 1)
	for p, id := range ids {
		_, err := rt.Call(context.Background(), testkinds.CounterKind, id, actors.Request{Method: "incr"})
		switch {
		case p < at && err != nil:
			t.Fatalf("partition %d, which stays, after the split: %v", p, err)
		case p >= at && !errors.Is(err, actors.ErrNotApplied):
			t.Fatalf("partition %d, which moved, before its new group is led here: %v, want ErrNotApplied", p, err)
		}
	}
	rt.SetLeader(child, true)
	actortest.WaitReady(t, rt, bigGroup)
	if n := b.count(child); n != 1 {
		t.Fatalf("%d Barrier calls of the new group, want 1", n)
	}
	for p, id := range ids {
		want := "2"
		if p < at {
			want = "3"
		}
		if v := string(actortest.MustCall(t, rt, testkinds.CounterKind, id, "incr", nil)); v != want {
			t.Fatalf("partition %d: incr = %s, want %s", p, v, want)
		}
	}
	// The groups lead apart: losing the old one leaves the moved partitions serving.
	rt.SetLeader(0, false)
	if _, err := rt.Call(context.Background(), testkinds.CounterKind, ids[0], actors.Request{Method: "incr"}); !errors.Is(err, actors.ErrNotApplied) {
		t.Fatalf("a partition of the old group after it lost the leadership: %v", err)
	}
	if v := string(actortest.MustCall(t, rt, testkinds.CounterKind, ids[at], "incr", nil)); v != "3" {
		t.Fatalf("a moved partition after the old group lost the leadership: incr = %s, want 3", v)
	}
}

// Regroup calls from several goroutines, with older and newer ranges, apply one after the
// other: the last call's ranges hold, every partition is in exactly one group, and a group
// led here opens each of its partitions once.
func TestConcurrentRegroups(t *testing.T) {
	rt, b := newBigGroup(t)
	rt.SetLeader(0, true)
	actortest.WaitReady(t, rt, bigGroup)
	const at = bigGroup / 2
	split, err := b.Split(0, at)
	if err != nil {
		t.Fatal(err)
	}
	before := []persistence.Group{{ID: 0, First: 0, End: bigGroup}}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 20 {
				if i%2 == 0 {
					rt.Regroup(func() []persistence.Group { return before })
				} else {
					rt.Regroup(func() []persistence.Group { return split })
				}
			}
		})
	}
	wg.Wait()
	rt.Regroup(func() []persistence.Group { return split })
	child := persistence.SplitID(at, 1)
	rt.SetLeader(child, true)
	actortest.WaitReady(t, rt, bigGroup)
	ids := idsPerPartition()
	for p, id := range ids {
		if v := string(actortest.MustCall(t, rt, testkinds.CounterKind, id, "incr", nil)); v != "1" {
			t.Fatalf("partition %d: incr = %s, want 1", p, v)
		}
	}
	rt.SetLeader(0, false)
	if _, err := rt.Call(context.Background(), testkinds.CounterKind, ids[at], actors.Request{Method: "incr"}); err != nil {
		t.Fatalf("a partition of the new group after the old one lost the leadership: %v", err)
	}
}

// A leadership gain reported after Close (the host shuts its Raft groups down after the
// runtime) opens nothing: no Barrier, no partition ready, for a group known before Close or
// one first named after it.
func TestLeadershipAfterCloseOpensNothing(t *testing.T) {
	rt, b := newBigGroup(t)
	b.hold.Store(true)
	rt.Close()
	rt.SetLeader(0, true)
	rt.SetLeader(persistence.SplitID(8, 1), true)
	select {
	case <-b.entered:
		t.Fatal("a Barrier ran for a leadership reported after Close")
	case <-time.After(time.Second):
	}
	for p := uint32(0); p < bigGroup; p++ {
		if rt.Ready(p) {
			t.Fatalf("partition %d ready after Close", p)
		}
	}
}

// A merge moves partitions to the group on their left, here one of a single partition: the
// writes made through it from then on land in the partitions they name, not in the group's
// first one (a command encoded for a group of one partition names none).
func TestPartitionsMoveToTheMergingGroup(t *testing.T) {
	store, err := persistence.Open(t.TempDir(), actortest.Logger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	layout := persistence.Layout{Partitions: bigGroup, Groups: bigGroup}
	mem, err := actors.NewMemReplicator(store, layout)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := actors.New(actors.Options{Store: store, Replicator: mem, Partitions: bigGroup, Groups: bigGroup,
		RequestTimeout: time.Minute, Logger: actortest.Logger()}, testkinds.Counter())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Close)
	for g := range uint32(bigGroup) {
		rt.SetLeader(g, true)
	}
	actortest.WaitReady(t, rt, bigGroup)
	ids := idsPerPartition()
	for _, id := range ids[:2] {
		actortest.MustCall(t, rt, testkinds.CounterKind, id, "incr", nil)
	}
	spans, err := mem.Merge(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	rt.Regroup(func() []persistence.Group { return spans })
	actortest.WaitReady(t, rt, bigGroup)
	for _, id := range ids[:2] {
		if v := string(actortest.MustCall(t, rt, testkinds.CounterKind, id, "incr", nil)); v != "2" {
			t.Fatalf("%s after the merge: incr = %s, want 2", id, v)
		}
	}
	// The activations reload from the store: what the merged group wrote is where it belongs.
	rt.SetLeader(0, false)
	rt.SetLeader(0, true)
	actortest.WaitReady(t, rt, bigGroup)
	for _, id := range ids[:2] {
		if v := string(actortest.MustCall(t, rt, testkinds.CounterKind, id, "incr", nil)); v != "3" {
			t.Fatalf("%s reloaded after the merge: incr = %s, want 3", id, v)
		}
	}
}
