package cluster

import (
	"encoding/json"
	"io"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/persistence"
)

func newTestDirectory(h *fakeRaft, m *fakeMembers) *Directory {
	return NewDirectory(DirectoryConfig{Host: h, Members: m, Replicas: 3, RefreshInterval: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
}

// A node that does not replicate a partition learns its leader and replicas from the leader's
// gossip, and forgets the leader when that member is gone.
func TestDirectoryServesPartitionsNotReplicatedHere(t *testing.T) {
	// d replicates nothing; partition 0 is led by a on a, b, c.
	h := &fakeRaft{self: "d@1", parts: []GroupInfo{{ID: 0}}}
	m := &fakeMembers{members: alive("a@1", "b@1", "c@1", "d@1")}
	d := newTestDirectory(h, m)
	if l := d.Leader(0); l != "" {
		t.Fatalf("leader before any gossip = %q", l)
	}
	rec := record{G: 0, Term: 3, Leader: "a@1", Voters: []string{"a@1", "b@1", "c@1"}, Applied: 40, LastIndex: 41,
		Lag: map[string]uint64{"a@1": 0, "b@1": 0, "c@1": 7}}
	b, _ := json.Marshal(rec)
	d.Receive(b)
	if l := d.Leader(0); l != "a@1" {
		t.Fatalf("leader = %q, want a@1", l)
	}
	want := PartitionStatus{ID: 0, Leader: "a", Replicas: []string{"a", "b", "c"}, Voters: []string{"a", "b", "c"},
		NonVoters: []string{}, AppliedIndex: 40, Lag: map[string]uint64{"a": 0, "b": 0, "c": 7}}
	if st := d.Status()[0]; !reflect.DeepEqual(st, want) {
		t.Fatalf("status = %+v\nwant     %+v", st, want)
	}

	// An older term's record does not replace it; a newer one does.
	old := rec
	old.Term, old.Leader = 2, "b@1"
	b, _ = json.Marshal(old)
	d.Receive(b)
	if l := d.Leader(0); l != "a@1" {
		t.Fatalf("after an older record, leader = %q, want a@1", l)
	}
	newer := rec
	newer.Term, newer.Leader = 4, "c@1"
	d.MergeState(mustJSON([]record{newer}))
	if l := d.Leader(0); l != "c@1" {
		t.Fatalf("after a newer record, leader = %q, want c@1", l)
	}

	// The leader fails: no leader is known (rather than a dead one), and with a voter gone
	// the partition is under-replicated.
	m.members[2].State = StateFailed
	if l := d.Leader(0); l != "" {
		t.Fatalf("leader of a failed member still reported: %q", l)
	}
	st := d.Status()[0]
	if st.Leader != "" {
		t.Fatalf("status leader = %q, want none", st.Leader)
	}
	rec.Term = 5
	d.Receive(mustJSON(rec))
	if st := d.Status()[0]; st.Leader != "a" || !st.UnderReplicated {
		t.Fatalf("status = %+v, want leader a, under-replicated (c failed)", st)
	}
}

// With several partitions per Raft group, each partition is its group: its leader, replicas
// and applied index, by its own id with its group named; leadership changes reach the
// router once per partition of the group.
func TestDirectoryPartitionsOfGroups(t *testing.T) {
	h := &fakeRaft{self: "b@1", layout: persistence.Layout{Partitions: 5, Groups: 2}, parts: []GroupInfo{
		{ID: 0, Replica: true, Leader: "a@1", Term: 3, Applied: 8, Servers: voters("a@1", "b@1")},
		{ID: 1, Replica: true, Leader: "b@1", Term: 4, Applied: 9, Servers: voters("a@1", "b@1")},
	}}
	m := &fakeMembers{members: alive("a@1", "b@1")}
	d := newTestDirectory(h, m)
	if d.Partitions() != 5 {
		t.Fatalf("Partitions = %d, want 5", d.Partitions())
	}
	// Group 0 holds partitions 0 and 1 (⌊1·5/2⌋ = 2), group 1 holds 2, 3 and 4.
	wantGroup := []uint32{0, 0, 1, 1, 1}
	st := d.Status()
	if len(st) != 5 {
		t.Fatalf("%d partitions in the status, want 5", len(st))
	}
	for p, s := range st {
		g := wantGroup[p]
		leader, applied := map[uint32]string{0: "a", 1: "b"}[g], map[uint32]uint64{0: 8, 1: 9}[g]
		if s.ID != uint32(p) || s.Group != g || s.Leader != leader || s.AppliedIndex != applied || len(s.Voters) != 2 {
			t.Errorf("partition %d: %+v, want group %d led by %s at %d", p, s, g, leader, applied)
		}
		if d.Leader(uint32(p)) != leader+"@1" || d.IsLeader(uint32(p)) != (g == 1) {
			t.Errorf("partition %d: Leader %q IsLeader %v", p, d.Leader(uint32(p)), d.IsLeader(uint32(p)))
		}
	}
	var seen []uint32
	d.WatchLeaders(func(p uint32, leader string) {
		if leader != "a@1" {
			t.Errorf("partition %d: leader %q passed on, want a@1", p, leader)
		}
		seen = append(seen, p)
	})
	h.watch(1, "a@1")
	if !reflect.DeepEqual(seen, []uint32{2, 3, 4}) {
		t.Errorf("a change of group 1's leader reached partitions %v, want 2 3 4", seen)
	}
}

// A replica's own Raft instance comes first.
func TestDirectoryPrefersLocalRaft(t *testing.T) {
	h := &fakeRaft{self: "b@1", parts: []GroupInfo{{ID: 0, Replica: true, Leader: "a@1", Term: 7, Applied: 9,
		Servers: voters("a@1", "b@1", "c@1")}}}
	m := &fakeMembers{members: alive("a@1", "b@1", "c@1")}
	d := newTestDirectory(h, m)
	d.Receive(mustJSON(record{G: 0, Term: 6, Leader: "c@1", Voters: []string{"c@1"}}))
	if l := d.Leader(0); l != "a@1" {
		t.Fatalf("leader = %q, want a@1 (local raft)", l)
	}
	if st := d.Status()[0]; st.Leader != "a" || st.AppliedIndex != 9 || st.UnderReplicated || len(st.Voters) != 3 {
		t.Fatalf("status = %+v", st)
	}
}

// A leader gossips its record when it changes, and unchanged only every RefreshInterval.
func TestDirectoryPublishes(t *testing.T) {
	h := &fakeRaft{self: "a@1", parts: []GroupInfo{
		{ID: 0, Replica: true, Leader: "a@1", Term: 2, LastIndex: 10, Servers: voters("a@1", "b@1")},
		{ID: 1, Replica: true, Leader: "b@1", Term: 2, Servers: voters("a@1", "b@1")},
	}}
	m := &fakeMembers{members: alive("a@1", "b@1")}
	d := newTestDirectory(h, m)
	t0 := time.Unix(1000, 0)
	d.publish(t0)
	got := m.takeBroadcasts()
	if len(got) != 1 || got["group/0"] == nil {
		t.Fatalf("broadcasts = %v, want only group/0", keys(got))
	}
	var rec record
	if err := json.Unmarshal(got["group/0"], &rec); err != nil || rec.Leader != "a@1" || rec.Term != 2 {
		t.Fatalf("record %s: %v", got["group/0"], err)
	}
	h.set(0, func(in *GroupInfo) { in.LastIndex = 11 }) // a write: not worth a broadcast
	d.publish(t0.Add(time.Second))
	if got := m.takeBroadcasts(); len(got) != 0 {
		t.Fatalf("unchanged record re-sent early: %v", keys(got))
	}
	h.set(0, func(in *GroupInfo) { in.Servers = voters("a@1", "b@1", "c@1") })
	d.publish(t0.Add(2 * time.Second))
	if got := m.takeBroadcasts(); len(got) != 1 {
		t.Fatalf("changed replicas not sent: %v", keys(got))
	}
	d.publish(t0.Add(8 * time.Second))
	if got := m.takeBroadcasts(); len(got) != 1 {
		t.Fatalf("no refresh after the interval: %v", keys(got))
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A record of a group that took another in by a merge (a higher generation over its range)
// drops the other's record for good: a late copy of it is not taken again, and the partitions
// map to the merged group.
func TestDirectoryDropsMergedGroups(t *testing.T) {
	h := &fakeRaft{self: "c@1", layout: persistence.Layout{Partitions: 8, Groups: 2}}
	m := &fakeMembers{members: alive("a@1", "b@1", "c@1")}
	d := newTestDirectory(h, m)
	right := persistence.SplitID(4, 1)
	l := record{G: 0, First: 0, End: 4, Gen: 1, Term: 2, Leader: "a@1", Voters: []string{"a@1", "b@1"}, LastIndex: 10}
	r := record{G: right, First: 4, End: 8, Gen: 1, Term: 2, Leader: "b@1", Voters: []string{"a@1", "b@1"}, LastIndex: 10}
	d.Receive(mustJSON(l))
	d.Receive(mustJSON(r))
	if got := d.KnownGroups(); len(got) != 2 || d.Group(6) != right {
		t.Fatalf("before the merge: %+v, partition 6 in %#x", got, d.Group(6))
	}
	before := d.Routes().Epoch
	merged := l
	merged.End, merged.Gen, merged.LastIndex = 8, 2, 12
	d.Receive(mustJSON(merged))
	if after := d.Routes().Epoch; after <= before {
		t.Fatalf("routes epoch %d after the merge, %d before: it must grow", after, before)
	}
	r.LastIndex = 11 // a late copy, newer than the one known
	d.Receive(mustJSON(r))
	want := []persistence.Group{{ID: 0, First: 0, End: 8}}
	if got := d.KnownGroups(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the merge: %+v, want %+v", got, want)
	}
	for _, in := range d.Leaderships() {
		if in.ID == right {
			t.Fatalf("the merged group is still among the leaderships: %+v", in)
		}
	}
	if st := d.Status()[6]; st.Group != 0 || st.Leader != "a" {
		t.Fatalf("partition 6 after the merge: %+v", st)
	}
}

// The routes' epoch grows with every split this node learns of, whichever record arrives
// first, and never falls.
func TestRoutesEpochGrows(t *testing.T) {
	h := &fakeRaft{self: "c@1", layout: persistence.Layout{Partitions: 8, Groups: 1}}
	m := &fakeMembers{members: alive("a@1", "b@1", "c@1")}
	d := newTestDirectory(h, m)
	whole := record{G: 0, First: 0, End: 8, Gen: 2, Term: 2, Leader: "a@1", Voters: []string{"a@1"}, LastIndex: 10}
	parent := whole
	parent.End, parent.Gen, parent.LastIndex = 2, 3, 11
	child := record{G: persistence.SplitID(2, 1), First: 2, End: 8, Gen: 3, Term: 1, Leader: "a@1", Voters: []string{"a@1"}, LastIndex: 2}
	var last uint64
	for i, rec := range []record{whole, parent, child} {
		d.Receive(mustJSON(rec))
		if e := d.Routes().Epoch; e <= last {
			t.Fatalf("record %d: epoch %d after %d, want it to grow", i, e, last)
		} else {
			last = e
		}
	}
}
