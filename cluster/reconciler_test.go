package cluster

import (
	"io"
	"log/slog"
	"reflect"
	"testing"
	"time"
)

// A pass applies Decide to each partition led here (and only those) and at most one
// balancing transfer; a server unknown to gossip keeps the time it was first missed.
func TestReconcilerPass(t *testing.T) {
	h := &fakeRaft{self: "a@1", parts: []GroupInfo{
		// Led here, c failed long ago: removed.
		{ID: 0, Replica: true, Leader: "a@1", Servers: voters("a@1", "b@1", "c@1")},
		// Led by b: not this node's business.
		{ID: 1, Replica: true, Leader: "b@1", Servers: voters("a@1", "b@1", "c@1")},
		// Led here, x unknown to gossip: removed only after the grace from when first missed.
		{ID: 2, Replica: true, Leader: "a@1", Servers: voters("a@1", "b@1", "x@1")},
	}}
	m := &fakeMembers{members: append(alive("a@1", "b@1"), Member{NodeMeta: testMeta("c@1"), State: StateFailed})}
	r := NewReconciler(ReconcilerConfig{Host: h, Members: m, Replicas: 3, DeadGrace: 30 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t0 := time.Unix(1000, 0)
	r.Pass(t0)
	if want := []string{"0 remove c@1: member failed"}; !reflect.DeepEqual(h.changes, want) {
		t.Fatalf("changes = %q, want %q", h.changes, want)
	}
	h.changes = nil
	r.Pass(t0.Add(20 * time.Second))
	if len(h.changes) != 1 || h.changes[0] != "0 remove c@1: member failed" {
		t.Fatalf("changes 20s later = %q (x must wait for the grace)", h.changes)
	}
	h.changes = nil
	r.Pass(t0.Add(31 * time.Second))
	if len(h.changes) != 2 || h.changes[1] != "2 remove x@1: unknown to gossip" {
		t.Fatalf("changes after the grace = %q", h.changes)
	}
}

// A node leading more than its share hands one partition over per pass.
func TestReconcilerBalances(t *testing.T) {
	h := &fakeRaft{self: "a@1", parts: ledByA(4)}
	m := &fakeMembers{members: alive("a@1", "b@1")}
	r := NewReconciler(ReconcilerConfig{Host: h, Members: m, Replicas: 2, DeadGrace: time.Minute,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	r.Pass(time.Unix(1000, 0))
	if len(h.changes) != 1 || h.changes[0] != "0 transfer-leadership b@1: this node leads 4, more than its share of 2" {
		t.Fatalf("changes = %q", h.changes)
	}
}

// No leadership is handed to a suspect member: it may be gone, and the transfer would time out.
func TestReconcilerBalancesOnlyToAliveMembers(t *testing.T) {
	h := &fakeRaft{self: "a@1", parts: ledByA(4)}
	m := &fakeMembers{members: append(alive("a@1"), Member{NodeMeta: testMeta("b@1"), State: StateSuspect})}
	r := NewReconciler(ReconcilerConfig{Host: h, Members: m, Replicas: 2, DeadGrace: time.Minute,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	r.Pass(time.Unix(1000, 0))
	if len(h.changes) != 0 {
		t.Fatalf("changes = %q, want none (b is suspect)", h.changes)
	}
}

// ledByA is n partitions on a and b, all led by a.
func ledByA(n int) []GroupInfo {
	var parts []GroupInfo
	for p := range uint32(n) {
		parts = append(parts, GroupInfo{ID: p, Replica: true, Leader: "a@1", Servers: voters("a@1", "b@1")})
	}
	return parts
}
