package persistence

import (
	"errors"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
)

var splitServers = []raft.Server{
	{Suffrage: raft.Voter, ID: "n1@a", Address: "127.0.0.1:7001#n1@a"},
	{Suffrage: raft.Nonvoter, ID: "n2@b", Address: "127.0.0.1:7002#n2@b"},
}

func splitLog(index uint64, t int64, at, child uint32) *raft.Log {
	return &raft.Log{Index: index, Term: 3, Type: raft.LogCommand,
		Data: EncodeSplit(nil, t, Split{At: at, Child: child, Servers: splitServers})}
}

// A split cuts the group's range where it says, in the same batch as the commands around
// it: the commands before it may write the partitions it moves, those after it may not
// (ErrMoved, nothing of them applied). The child starts with the parent's state of its
// partitions, applied index 1, the parent's clock and its birth configuration, and the node
// lists it among its groups, also after a restart.
func TestSplitApply(t *testing.T) {
	dir := t.TempDir()
	s, closeStore := openStore(t, dir)
	layout := Layout{Partitions: 8, Groups: 1}
	f := groupOf(t, s, layout.Group(0))
	var born []Group
	f.OnSplit(func(parent, c Group) {
		if parent != (Group{ID: 0, First: 0, End: c.First, Gen: 1}) {
			t.Errorf("OnSplit with parent %+v", parent)
		}
		born = append(born, c)
	})
	apply(t, f, groupCmdLog(1, 10, opIn(1, put("a", "1")), opIn(5, put("b", "5"))))
	child := SplitID(4, 1)
	resp := f.ApplyBatch([]*raft.Log{
		groupCmdLog(2, 20, opIn(6, put("c", "6"))),
		splitLog(3, 30, 4, child),
		groupCmdLog(4, 25, opIn(7, put("d", "7")), opIn(2, put("e", "2"))),
		groupCmdLog(5, 40, opIn(3, put("f", "3"))),
	})
	if resp[0] != nil || resp[1] != nil || resp[3] != nil {
		t.Fatalf("responses %v, want nil for entries 2, 3 and 5", resp)
	}
	if err, _ := resp[2].(error); !errors.Is(err, ErrMoved) {
		t.Fatalf("a command naming a moved partition after the split: %v, want ErrMoved", resp[2])
	}
	if g := f.Group(); g.End != 4 || f.AppliedIndex() != 5 || f.LastTime() != 40 {
		t.Fatalf("after the split: group %+v applied %d time %d, want [0, 4) 5 40", g, f.AppliedIndex(), f.LastTime())
	}
	want := Group{ID: child, First: 4, End: 8, Gen: 1}
	if len(born) != 1 || born[0] != want {
		t.Fatalf("OnSplit called with %+v, want %+v", born, want)
	}
	wantValue(t, s, 6, "c", "6")
	wantMissing(t, s, 7, "d")
	wantMissing(t, s, 2, "e")
	wantValue(t, s, 3, "f", "3")

	cf := groupOf(t, s, want)
	if cf.AppliedIndex() != BirthIndex || cf.LastTime() != 30 {
		t.Fatalf("child applied %d time %d, want %d and the parent's clock at the split (30)", cf.AppliedIndex(), cf.LastTime(), BirthIndex)
	}
	servers, ok, err := s.Birth(want)
	if err != nil || !ok || !slices.Equal(servers, splitServers) {
		t.Fatalf("Birth = %v %v %v, want %v", servers, ok, err, splitServers)
	}
	if _, ok, _ := s.Birth(layout.Group(0)); ok {
		t.Fatal("the layout's group has a birth record")
	}
	if id, err := s.NextSplitID(4); err != nil || id != SplitID(4, 2) {
		t.Fatalf("NextSplitID(4) = %#x %v, want %#x", id, err, SplitID(4, 2))
	}
	if id, err := s.NextSplitID(2); err != nil || id != SplitID(2, 1) {
		t.Fatalf("NextSplitID(2) = %#x %v, want %#x", id, err, SplitID(2, 1))
	}
	// The child's state hash covers the moved partitions with the child's metadata; the
	// parent's no longer covers them.
	if _, sums, err := cf.StateHashes(); err != nil || len(sums) != 4 {
		t.Fatalf("child's state hashes: %d (%v), want 4", len(sums), err)
	}
	if _, sums, err := f.StateHashes(); err != nil || len(sums) != 4 {
		t.Fatalf("parent's state hashes: %d (%v), want 4", len(sums), err)
	}

	// An FSM opened with a range known from elsewhere (gossip, the layout) takes the one
	// its own metadata records.
	if g := groupOf(t, s, layout.Group(0)).Group(); g.End != 4 {
		t.Fatalf("the parent opened with the layout's range: %+v, want its recorded [0, 4)", g)
	}
	if g := groupOf(t, s, Group{ID: child, First: 4, End: 6}).Group(); g.End != 8 {
		t.Fatalf("the child opened with a gossiped range: %+v, want its recorded [4, 8)", g)
	}

	closeStore()
	s, _ = openStore(t, dir)
	groups, err := s.Groups(layout)
	if err != nil || !slices.Equal(groups, []Group{{ID: 0, First: 0, End: 4, Gen: 1}, want}) {
		t.Fatalf("Groups after a restart = %+v %v, want [0, 4) and %+v", groups, err, want)
	}
}

// A split that does not fit the group is refused on every replica alike: the range stays,
// nothing is written, the entry still counts as applied.
func TestSplitRefused(t *testing.T) {
	s := newStore(t)
	f := groupOf(t, s, Group{ID: 0, First: 2, End: 6})
	for i, tt := range []struct{ at, child uint32 }{
		{2, SplitID(2, 1)}, // at the first partition: the parent would be empty
		{6, SplitID(6, 1)}, // at the end
		{9, SplitID(9, 1)}, // outside
		{4, SplitID(5, 1)}, // an id of another partition
		{4, 4},             // an id of a layout's group
	} {
		resp := f.ApplyBatch([]*raft.Log{splitLog(uint64(i+1), 1, tt.at, tt.child)})
		if err, _ := resp[0].(error); !errors.Is(err, ErrSplitRefused) {
			t.Errorf("split at %d as %#x: %v, want ErrSplitRefused", tt.at, tt.child, resp[0])
		}
	}
	if g := f.Group(); g.End != 6 || f.AppliedIndex() != 5 {
		t.Fatalf("after refused splits: %+v applied %d, want [2, 6) applied 5", g, f.AppliedIndex())
	}
	if groups, _ := s.Groups(Layout{Partitions: 8, Groups: 1}); len(groups) != 1 {
		t.Fatalf("refused splits recorded groups: %+v", groups)
	}
	bad := splitLog(9, 1, 4, SplitID(4, 1))
	bad.Data = bad.Data[:len(bad.Data)-1]
	if err, _ := f.ApplyBatch([]*raft.Log{bad})[0].(error); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("truncated split: %v, want ErrBadCommand", err)
	}
}

// A snapshot taken after a split carries the smaller range. A replica that has not applied
// the split takes that range on restore and replaces only it: the moved partitions keep
// what they held (their new group replaces them). A snapshot of a larger range than the
// replica's is refused.
func TestSplitSnapshot(t *testing.T) {
	a, b := newStore(t), newStore(t)
	g := Group{ID: 0, First: 0, End: 8}
	fa, fb := groupOf(t, a, g), groupOf(t, b, g)
	apply(t, fa, groupCmdLog(1, 10, opIn(1, put("x", "a1")), opIn(5, put("x", "a5"))), splitLog(2, 20, 4, SplitID(4, 1)))
	apply(t, fb, groupCmdLog(1, 10, opIn(1, put("x", "old")), opIn(5, put("x", "b5"))))
	if err := restore(fb, snapshotBytes(t, fa)); err != nil {
		t.Fatal(err)
	}
	if got := fb.Group(); got.End != 4 || fb.AppliedIndex() != 2 {
		t.Fatalf("restored group %+v applied %d, want [0, 4) applied 2", got, fb.AppliedIndex())
	}
	wantValue(t, b, 1, "x", "a1")
	wantValue(t, b, 5, "x", "b5")

	small := newStore(t)
	fs := groupOf(t, small, Group{ID: 0, First: 0, End: 2})
	if err := restore(fs, snapshotBytes(t, fa)); err == nil {
		t.Fatal("a snapshot of [0, 4) restored into a group of [0, 2)")
	}
}

// Split entries round-trip, and a malformed one never panics.
func TestSplitEncoding(t *testing.T) {
	want := Split{At: 7, Child: SplitID(7, 3), Servers: splitServers}
	b := EncodeSplit(nil, -5, want)
	tm, got, err := decodeSplit(b[1:])
	if err != nil || tm != -5 || got.At != want.At || got.Child != want.Child || !slices.Equal(got.Servers, want.Servers) {
		t.Fatalf("decode = %d %+v %v, want -5 %+v", tm, got, err, want)
	}
	for i := 1; i < len(b); i++ {
		if _, _, err := decodeSplit(b[1:i]); err == nil {
			t.Fatalf("a split cut to %d bytes decoded", i)
		}
	}
	if _, err := DecodeCommand(b); err == nil {
		t.Fatal("a split decoded as a command")
	}
}

// A replica that lags behind a split while it already holds the split's child (it received
// the child's snapshot) leaves the child's partitions alone: the entries it applies skip
// their writes, the split leaves the child's state and metadata as they are, and a snapshot
// from before the split restores only the partitions the replica's group still holds.
func TestSplitLaggingReplica(t *testing.T) {
	s := newStore(t)
	child := Group{ID: SplitID(4, 1), First: 4, End: 8}
	if err := s.RecordGroup(child); err != nil {
		t.Fatal(err)
	}
	cf := groupOf(t, s, child)
	apply(t, cf, groupCmdLog(7, 70, opIn(5, put("x", "child's"))))
	f := groupOf(t, s, Group{ID: 0, First: 0, End: 8})
	f.SetOwner(func(p uint32) bool { return p < 4 })

	apply(t, f, groupCmdLog(1, 10, opIn(1, put("x", "1")), opIn(5, put("x", "stale"))))
	wantValue(t, s, 1, "x", "1")
	wantValue(t, s, 5, "x", "child's")

	// A snapshot from another replica, taken before the split, covers [0, 8).
	other := newStore(t)
	of := groupOf(t, other, Group{ID: 0, First: 0, End: 8})
	apply(t, of, groupCmdLog(1, 10, opIn(1, put("x", "1")), opIn(2, put("y", "2")), opIn(5, put("x", "stale"))))
	if err := restore(f, snapshotBytes(t, of)); err != nil {
		t.Fatal(err)
	}
	wantValue(t, s, 2, "y", "2")
	wantValue(t, s, 5, "x", "child's")

	// Lagging, it takes no snapshot: it would pass the child's newer state off as its own.
	if _, err := f.Snapshot(); err == nil {
		t.Fatal("a group lagging behind a split whose child is held here took a snapshot")
	}
	apply(t, f, splitLog(2, 20, 4, child.ID))
	if f.Group().End != 4 {
		t.Fatalf("after the split: %+v", f.Group())
	}
	if snap, err := f.Snapshot(); err != nil {
		t.Fatalf("snapshot after the split: %v", err)
	} else {
		snap.Release()
	}
	wantValue(t, s, 5, "x", "child's")
	if cf.AppliedIndex() != 7 {
		t.Fatalf("the child's applied index went from 7 to %d", cf.AppliedIndex())
	}
	if _, ok, _ := s.Birth(child); ok {
		t.Fatal("the split wrote a birth record over the child the replica held")
	}

	// Holding a partition past one another group holds, a restore is refused: it could
	// neither overwrite the other group's state nor leave its own stale.
	gap := newStore(t)
	gf := groupOf(t, gap, Group{ID: 0, First: 0, End: 8})
	gf.SetOwner(func(p uint32) bool { return p != 3 })
	if err := restore(gf, snapshotBytes(t, of)); err == nil {
		t.Fatal("a restore over another group's partition in the middle of the range succeeded")
	}
}
