package cluster

import (
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/persistence"
)

// fakeGroups is the directory's view for the reconciler: the groups, their leaders and
// their configurations, as given.
type fakeGroups struct{ groups []GroupInfo }

func (f *fakeGroups) KnownGroups() []persistence.Group {
	var out []persistence.Group
	for _, g := range f.groups {
		out = append(out, persistence.Group{ID: g.ID, First: g.First, End: g.End})
	}
	return out
}
func (f *fakeGroups) Leaderships() []GroupInfo { return f.groups }
func (f *fakeGroups) Configurations() []GroupConfig {
	var out []GroupConfig
	for _, g := range f.groups {
		out = append(out, GroupConfig{ID: g.ID, Servers: g.Servers})
	}
	return out
}

// span is group id over [first, end) on the given voters.
func span(id, first, end uint32, ids ...string) GroupInfo {
	return GroupInfo{ID: id, First: first, End: end, Servers: voters(ids...)}
}

func TestSteerMerge(t *testing.T) {
	for _, c := range []struct {
		name   string
		groups []GroupInfo
		nodes  int
		l, r   uint32
		ok     bool
	}{
		{"no merge due", []GroupInfo{span(0, 0, 2, "a", "b", "c"), span(1, 2, 4, "a", "b", "d")}, 2, 0, 0, false},
		{"steered whatever its voters, the same ones included", []GroupInfo{
			span(0, 0, 2, "a", "b", "c"), span(1, 2, 4, "a", "b", "c"), span(2, 4, 6, "a", "b", "d")}, 2, 0, 1, true},
		{"the smallest pair", []GroupInfo{
			span(0, 0, 4, "a", "b", "c"), span(1, 4, 6, "a", "b", "d"), span(2, 6, 7, "a", "c", "d"), span(3, 7, 8, "b", "c", "d")}, 2, 2, 3, true},
		{"the lowest among equals, whatever the order given", []GroupInfo{
			span(3, 6, 8, "b", "c", "d"), span(2, 4, 6, "a", "c", "d"), span(1, 2, 4, "a", "b", "d"), span(0, 0, 2, "a", "b", "c")}, 2, 0, 1, true},
		{"only adjacent groups pair", []GroupInfo{
			span(0, 0, 2, "a", "b", "c"), span(1, 3, 4, "a", "b", "d"), span(2, 4, 8, "a", "c", "d")}, 1, 1, 2, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, r, ok := SteerMerge(MergeSituation{Groups: c.groups, Nodes: c.nodes, PerNode: 1})
			if ok != c.ok || (ok && (l != c.l || r != c.r)) {
				t.Fatalf("SteerMerge = %d, %d, %v; want %d, %d, %v", l, r, ok, c.l, c.r, c.ok)
			}
		})
	}
}

// While a merge is due and no neighbours share their voters, the reconciler places the
// steered pair's right group on the left group's replicas: the leader of group 1 moves it
// towards group 0's desired set, not its own.
func TestReconcilerSteersTheMergePair(t *testing.T) {
	names := []string{"a@1", "b@1", "c@1", "d@1"}
	groups := []GroupInfo{
		span(0, 0, 2, "a@1", "b@1", "c@1"), span(1, 2, 4, "a@1", "b@1", "d@1"), span(2, 4, 6, "a@1", "c@1", "d@1"),
		span(3, 6, 8, "b@1", "c@1", "d@1"), span(4, 8, 10, "a@1", "b@1", "c@1"),
	}
	h := &fakeRaft{self: "a@1", layout: persistence.Layout{Partitions: 10, Groups: 5}}
	for _, g := range groups {
		g.Replica, g.Leader, g.LastIndex = true, "b@1", 10
		if g.ID == 1 {
			g.Leader = "a@1"
		}
		h.parts = append(h.parts, g)
	}
	members := layoutOf(h, alive(names...))
	var metas []NodeMeta
	for i := range members {
		members[i].Merges = true
		metas = append(metas, members[i].NodeMeta)
	}
	ids := []uint32{0, 1, 2, 3, 4}
	want := Placement(ids, metas, 3)
	if slices.EqualFunc(want[0], want[1], func(a, b NodeMeta) bool { return a.ID == b.ID }) {
		t.Fatal("degenerate setup: groups 0 and 1 are placed alike without steering")
	}
	inZero := func(server string) bool {
		return slices.ContainsFunc(want[0], func(n NodeMeta) bool { return n.ServerID == server })
	}
	r := NewReconciler(ReconcilerConfig{Host: h, Members: &fakeMembers{members: members}, Groups: &fakeGroups{groups: h.parts},
		Replicas: 3, DeadGrace: time.Minute, GroupsPerNode: 1, MergeDelay: time.Minute,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t0 := time.Unix(1000, 0)
	r.Pass(t0) // no whole MergeDelay seen yet: placement as usual
	h.changes = nil
	r.Pass(t0.Add(61 * time.Second))
	var moves []string
	for _, c := range h.changes {
		if strings.HasPrefix(c, "1 ") {
			moves = append(moves, c)
		}
	}
	if len(moves) != 1 {
		t.Fatalf("changes of group 1 = %q, want one step towards group 0's replicas %v", moves, want[0])
	}
	server := strings.Fields(moves[0])[2]
	server = strings.TrimSuffix(server, ":")
	switch {
	case strings.HasPrefix(moves[0], "1 add-nonvoter ") && !inZero(server):
		t.Fatalf("group 1 adds %s, not among group 0's replicas %v", server, want[0])
	case strings.HasPrefix(moves[0], "1 remove ") && inZero(server):
		t.Fatalf("group 1 removes %s, one of group 0's replicas %v", server, want[0])
	}
}
