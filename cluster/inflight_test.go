package cluster

import (
	"slices"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// TestInflight checks that lost takes exactly the futures still pending on an address, once.
func TestInflight(t *testing.T) {
	var f inflight
	a1, a2, b1 := actor.NewPID("a", "1"), actor.NewPID("a", "2"), actor.NewPID("b", "1")
	f.add("a", a1)
	f.add("a", a2)
	f.add("b", b1)
	f.remove("a", a1) // answered before the connection broke
	if got := f.lost("a"); !slices.Equal(got, []*actor.PID{a2}) {
		t.Fatalf("lost(a) = %v, want [a2]", got)
	}
	if got := f.lost("a"); len(got) != 0 {
		t.Fatalf("lost(a) again = %v, want none", got)
	}
	f.remove("a", a2) // its forward returns after being failed: nothing left behind
	if got := f.lost("b"); !slices.Equal(got, []*actor.PID{b1}) {
		t.Fatalf("lost(b) = %v, want [b1]", got)
	}
	if len(f.byAddr) != 0 {
		t.Fatalf("entries left: %v", f.byAddr)
	}
}
