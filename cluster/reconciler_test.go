package cluster

import (
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/persistence"
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
	m := &fakeMembers{members: layoutOf(h, append(alive("a@1", "b@1"), Member{NodeMeta: testMeta("c@1"), State: StateFailed}))}
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
	m := &fakeMembers{members: layoutOf(h, alive("a@1", "b@1"))}
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
	m := &fakeMembers{members: layoutOf(h, append(alive("a@1"), Member{NodeMeta: testMeta("b@1"), State: StateSuspect}))}
	r := NewReconciler(ReconcilerConfig{Host: h, Members: m, Replicas: 2, DeadGrace: time.Minute,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	r.Pass(time.Unix(1000, 0))
	if len(h.changes) != 0 {
		t.Fatalf("changes = %q, want none (b is suspect)", h.changes)
	}
}

// A member of another layout is no member for placement: it gets no replica and no
// leadership, and a replica it holds is removed as if gossip did not know it.
func TestReconcilerIgnoresOtherLayouts(t *testing.T) {
	h := &fakeRaft{self: "a@1", parts: []GroupInfo{
		{ID: 0, Replica: true, Leader: "a@1", Servers: voters("a@1", "b@1")},
		{ID: 1, Replica: true, Leader: "a@1", Servers: voters("a@1", "b@1", "c@1")},
	}}
	members := layoutOf(h, alive("a@1", "b@1", "c@1"))
	members[2].Groups = 1 // c runs the same partitions in one group
	m := &fakeMembers{members: members}
	r := NewReconciler(ReconcilerConfig{Host: h, Members: m, Replicas: 3, DeadGrace: 30 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t0 := time.Unix(1000, 0)
	r.Pass(t0)
	r.Pass(t0.Add(31 * time.Second))
	var aboutC []string
	for _, c := range h.changes {
		if strings.Contains(c, "c@1") {
			aboutC = append(aboutC, c)
		}
	}
	if want := []string{"1 remove c@1: unknown to gossip"}; !reflect.DeepEqual(aboutC, want) {
		t.Fatalf("changes about c = %q, want only %q (c is not added to group 0, not handed leadership)", aboutC, want)
	}
}

// layoutOf gives members h's layout.
func layoutOf(h *fakeRaft, members []Member) []Member {
	for i := range members {
		members[i].Partitions, members[i].Groups = h.Layout().Partitions, h.Layout().Groups
	}
	return members
}

// ledByA is n partitions on a and b, all led by a.
func ledByA(n int) []GroupInfo {
	var parts []GroupInfo
	for p := range uint32(n) {
		parts = append(parts, GroupInfo{ID: p, Replica: true, Leader: "a@1", Servers: voters("a@1", "b@1")})
	}
	return parts
}

// On more nodes than replicas a node holds only some of the groups: the leadership shares
// are of the cluster's groups. Here a leads two of four groups on four nodes, d leads none
// and votes in none of a's; b, which votes in a's groups, hands its own group to d (and a
// can then hand one to b). Counted from the three groups b holds, the floor would be 0 and
// nothing would move.
func TestReconcilerBalancesOnTheClustersGroups(t *testing.T) {
	groups := []GroupInfo{
		{ID: 0, First: 0, End: 1, Replica: true, Leader: "a@1", Servers: voters("a@1", "b@1", "c@1")},
		{ID: 1, First: 1, End: 2, Replica: true, Leader: "a@1", Servers: voters("a@1", "b@1", "c@1")},
		{ID: 2, First: 2, End: 3, Replica: true, Leader: "b@1", Servers: voters("b@1", "c@1", "d@1")},
		{ID: 3, First: 3, End: 4, Leader: "c@1", Servers: voters("c@1", "a@1", "d@1")},
	}
	h := &fakeRaft{self: "b@1", layout: persistence.Layout{Partitions: 3, Groups: 3}, parts: groups[:3]}
	members := layoutOf(h, alive("a@1", "b@1", "c@1", "d@1"))
	for i, n := range []int{2, 1, 1, 0} {
		members[i].Leading = n
	}
	r := NewReconciler(ReconcilerConfig{Host: h, Members: &fakeMembers{members: members}, Groups: &fakeGroups{groups: groups},
		Replicas: 3, DeadGrace: time.Minute, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	r.Pass(time.Unix(1000, 0))
	want := "2 transfer-leadership d@1: a node leads more than its share of 1 and can hand one to this node, whose voter d@1 leads 0, fewer than 1"
	if !slices.Contains(h.changes, want) {
		t.Fatalf("changes = %q, want %q", h.changes, want)
	}
}
