package cluster

import (
	"slices"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// TestInflight checks that lost takes exactly the futures still pending on an address, and
// movedAway those of a partition waiting on another node than its new leader, each once.
func TestInflight(t *testing.T) {
	var f inflight
	a1, a2, b1, b2, c1 := actor.NewPID("a", "1"), actor.NewPID("a", "2"), actor.NewPID("b", "1"), actor.NewPID("b", "2"), actor.NewPID("c", "1")
	f.add(a1, forwardTarget{addr: "a", serverID: "A", p: 1})
	f.add(a2, forwardTarget{addr: "a", serverID: "A", p: 1})
	f.add(b1, forwardTarget{addr: "b", serverID: "B", p: 1})
	f.add(b2, forwardTarget{addr: "b", serverID: "B", p: 2})
	f.add(c1, forwardTarget{addr: "c", serverID: "C", p: 1})
	f.remove(a1) // answered before the connection broke
	if got := f.lost("a"); !slices.Equal(got, []*actor.PID{a2}) {
		t.Fatalf("lost(a) = %v, want [a2]", got)
	}
	if got := f.lost("a"); len(got) != 0 {
		t.Fatalf("lost(a) again = %v, want none", got)
	}
	f.remove(a2) // its forward returns after being failed: nothing left behind
	// Partition 1 is led by C now: b1 waits on B in vain; c1 waits on the leader, b2 is of
	// another partition.
	if got := f.movedAway(1, "C"); !slices.Equal(got, []*actor.PID{b1}) {
		t.Fatalf("movedAway(1, C) = %v, want [b1]", got)
	}
	got := f.lost("b")
	got = append(got, f.lost("c")...)
	if !slices.Equal(got, []*actor.PID{b2, c1}) {
		t.Fatalf("lost(b), lost(c) = %v, want [b2 c1]", got)
	}
	if len(f.pending) != 0 {
		t.Fatalf("entries left: %v", f.pending)
	}
}
