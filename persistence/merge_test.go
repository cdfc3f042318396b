package persistence

import (
	"errors"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
)

var mergeVoters = []raft.Server{
	{Suffrage: raft.Voter, ID: "n1@a", Address: "127.0.0.1:7001#n1@a"},
	{Suffrage: raft.Voter, ID: "n2@b", Address: "127.0.0.1:7002#n2@b"},
}

func configLog(index uint64, servers []raft.Server) *raft.Log {
	return &raft.Log{Index: index, Term: 1, Type: raft.LogConfiguration,
		Data: raft.EncodeConfiguration(raft.Configuration{Servers: servers})}
}

// freezeLog freezes the right group of mergePair for a merge into group 0, at its
// configuration entry 1.
func freezeLog(index uint64, servers []raft.Server) *raft.Log {
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand,
		Data: EncodeFreeze(nil, 50, Freeze{L: 0, ConfigIndex: 1, Servers: servers})}
}

// mergeLog is a merge into group 0, at its configuration entry 1 unless m names another.
func mergeLog(index uint64, m Merge) *raft.Log {
	if m.ConfigIndex == 0 {
		m.ConfigIndex = 1
	}
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: EncodeMerge(nil, 60, m)}
}

func entryLog(index uint64, data []byte) *raft.Log {
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}
}

// mergePair opens the two groups of an 8-partition, 2-group layout on s, each with a
// configuration entry of mergeVoters and a write in each partition range.
func mergePair(t *testing.T, s *Store) (l, r *FSM) {
	t.Helper()
	layout := Layout{Partitions: 8, Groups: 2}
	l, r = groupOf(t, s, layout.Group(0)), groupOf(t, s, layout.Group(1))
	apply(t, l, configLog(1, mergeVoters), groupCmdLog(2, 10, opIn(1, put("k", "l1"))))
	apply(t, r, configLog(1, mergeVoters), groupCmdLog(2, 10, opIn(5, put("k", "r5"))))
	return l, r
}

// A freeze stops a group's writes and splits; a merge in the left group's log, once the
// host has stopped the right one at its freeze, extends the left group's range over it,
// raises its generation, drops the right group from the node for good and keeps its state.
// Entries after the merge in the same batch write the partitions taken in.
func TestMergeApply(t *testing.T) {
	dir := t.TempDir()
	s, closeStore := openStore(t, dir)
	l, r := mergePair(t, s)
	apply(t, r, freezeLog(3, mergeVoters))
	if r.Frozen() != 3 {
		t.Fatalf("Frozen = %d, want 3", r.Frozen())
	}
	resp := r.ApplyBatch([]*raft.Log{
		groupCmdLog(4, 20, opIn(5, put("k", "late"))),
		splitLog(5, 20, 6, SplitID(6, 1)),
	})
	if err, _ := resp[0].(error); !errors.Is(err, ErrFrozen) || !errors.Is(err, ErrMoved) {
		t.Fatalf("a write to a frozen group: %v, want ErrFrozen (an ErrMoved)", resp[0])
	}
	if err, _ := resp[1].(error); !errors.Is(err, ErrSplitRefused) {
		t.Fatalf("a split of a frozen group: %v, want ErrSplitRefused", resp[1])
	}
	wantValue(t, s, 5, "k", "r5")

	var hooked []Group
	l.OnMerge(func(g Group, at uint64) error {
		if at != 3 {
			t.Errorf("OnMerge at %d, want 3", at)
		}
		hooked = append(hooked, g)
		return nil
	})
	var merged [][2]Group
	l.OnMerged(func(lg, rg Group) { merged = append(merged, [2]Group{lg, rg}) })
	rg := r.Group()
	m := Merge{R: rg, At: 3, Servers: mergeVoters}
	resp = l.ApplyBatch([]*raft.Log{
		groupCmdLog(3, 30, opIn(6, put("k", "early"))),
		mergeLog(4, m),
		groupCmdLog(5, 40, opIn(6, put("k", "l6")), opIn(2, put("k", "l2"))),
		mergeLog(6, m),
		entryLog(7, EncodeAbort(nil, 0, rg.ID, 3)),
	})
	if err, _ := resp[0].(error); !errors.Is(err, ErrMoved) {
		t.Fatalf("a write to the right group's partition before the merge: %v, want ErrMoved", resp[0])
	}
	if resp[1] != nil || resp[2] != nil {
		t.Fatalf("merge and the write after it: %v %v, want nil", resp[1], resp[2])
	}
	for i, why := range map[int]string{3: "a second merge of one freeze", 4: "an abort after the merge"} {
		if err, _ := resp[i].(error); !errors.Is(err, ErrMergeRefused) {
			t.Fatalf("%s: %v, want ErrMergeRefused", why, resp[i])
		}
	}
	want := Group{ID: 0, First: 0, End: 8, Gen: 1}
	if g := l.Group(); g != want || l.AppliedIndex() != 7 || l.LastTime() != 60 {
		t.Fatalf("after the merge: %+v applied %d time %d, want %+v 7 60", g, l.AppliedIndex(), l.LastTime(), want)
	}
	if len(hooked) != 1 || hooked[0] != rg || len(merged) != 1 || merged[0] != [2]Group{want, rg} {
		t.Fatalf("OnMerge %v, OnMerged %v; want once each with %+v", hooked, merged, rg)
	}
	wantValue(t, s, 5, "k", "r5")
	wantValue(t, s, 6, "k", "l6")
	wantValue(t, s, 2, "k", "l2")

	closeStore()
	s, _ = openStore(t, dir)
	if gone, err := s.Gone(rg.ID); err != nil || !gone {
		t.Fatalf("Gone(%d) = %v %v, want true", rg.ID, gone, err)
	}
	groups, err := s.Groups(Layout{Partitions: 8, Groups: 2})
	if err != nil || !slices.Equal(groups, []Group{want}) {
		t.Fatalf("Groups after a restart = %+v %v, want only %+v", groups, err, want)
	}
	if got := groupOf(t, s, Layout{Partitions: 8, Groups: 2}.Group(0)).Group(); got != want {
		t.Fatalf("the left group reopened as %+v, want %+v", got, want)
	}
	if _, ok, _ := s.metaU32(4, metaApplied); ok {
		t.Fatal("the right group's metadata survived the merge")
	}
	if last, err := s.LogStore(4).LastIndex(); err != nil || last != 0 {
		t.Fatalf("the right group's log survived the merge: last index %d %v", last, err)
	}
}

// Freezes and merges that do not fit are refused, the same on every replica, and write
// nothing; an abort decides a merge did not happen, after which the right group unfreezes.
func TestMergeRefused(t *testing.T) {
	s := newStore(t)
	l, r := mergePair(t, s)
	other := []raft.Server{mergeVoters[0], {Suffrage: raft.Voter, ID: "n3@c", Address: "x#n3@c"}}
	withNonvoter := append(slices.Clone(mergeVoters), raft.Server{Suffrage: raft.Nonvoter, ID: "n3@c", Address: "x#n3@c"})
	refused := func(f *FSM, why string, e *raft.Log) {
		t.Helper()
		if err, _ := f.Apply(e).(error); !errors.Is(err, ErrMergeRefused) {
			t.Fatalf("%s: %v, want ErrMergeRefused", why, err)
		}
	}
	refused(r, "a freeze naming other voters", freezeLog(3, other))
	refused(r, "a freeze naming a non-voter", freezeLog(4, withNonvoter))
	refused(r, "an unfreeze of a group not frozen", entryLog(5, EncodeUnfreeze(nil, 4)))
	apply(t, r, freezeLog(6, mergeVoters))
	refused(r, "a second freeze", freezeLog(7, mergeVoters))
	l.OnMerge(func(Group, uint64) error { t.Fatal("OnMerge called for a refused merge"); return nil })
	rg := r.Group()
	refused(l, "a merge naming other voters", mergeLog(3, Merge{R: rg, At: 6, Servers: other}))
	refused(l, "a merge of a range not adjacent", mergeLog(4, Merge{R: Group{ID: rg.ID, First: 5, End: 8}, At: 6, Servers: mergeVoters}))
	refused(l, "an abort for another group", entryLog(5, EncodeAbort(nil, 9, rg.ID, 6)))
	apply(t, l, entryLog(6, EncodeAbort(nil, 0, rg.ID, 6)))
	refused(l, "a merge after its abort", mergeLog(7, Merge{R: rg, At: 6, Servers: mergeVoters}))
	if l.Decision(rg.ID, 6) != 'a' {
		t.Fatalf("Decision = %q, want the abort", l.Decision(rg.ID, 6))
	}
	if g := l.Group(); g.End != 4 || g.Gen != 0 {
		t.Fatalf("the left group after refused merges: %+v", g)
	}
	refused(r, "an unfreeze of another freeze", entryLog(8, EncodeUnfreeze(nil, 5)))
	apply(t, r, entryLog(9, EncodeUnfreeze(nil, 6)), groupCmdLog(10, 70, opIn(5, put("k", "again"))))
	wantValue(t, s, 5, "k", "again")
	apply(t, l, configLog(8, other))
	apply(t, r, freezeLog(11, mergeVoters))
	refused(l, "a merge after the left group's configuration changed", mergeLog(9, Merge{R: r.Group(), At: 11, Servers: mergeVoters}))
	refused(l, "a merge naming another configuration entry", mergeLog(10, Merge{R: r.Group(), At: 11, Servers: other}))
	apply(t, r, configLog(12, mergeVoters), entryLog(13, EncodeUnfreeze(nil, 11)))
	refused(r, "a freeze naming an older configuration entry", freezeLog(14, mergeVoters))
}

// A replica that lags behind a merge and receives a snapshot taken after it drops the
// groups it holds inside the larger range (OnAbsorb), then holds the whole range as the
// snapshot does.
func TestMergeSnapshotAbsorb(t *testing.T) {
	a, b := newStore(t), newStore(t)
	la, ra := mergePair(t, a)
	lb, rb := mergePair(t, b)
	apply(t, ra, freezeLog(3, mergeVoters))
	apply(t, rb, freezeLog(3, mergeVoters))
	la.OnMerge(func(Group, uint64) error { return nil })
	apply(t, la, mergeLog(3, Merge{R: ra.Group(), At: 3, Servers: mergeVoters}), groupCmdLog(4, 80, opIn(7, put("k", "l7"))))
	snap := snapshotBytes(t, la)

	if err := restore(lb, snap); err == nil {
		t.Fatal("a snapshot of a larger range restored without OnAbsorb")
	}
	var absorbed [][3]uint32
	lb.OnAbsorb(func(from, to, gen uint32) (func() error, error) {
		absorbed = append(absorbed, [3]uint32{from, to, gen})
		// What the host does: R stops holding its partitions here, and is dropped after.
		lb.SetOwner(func(uint32) bool { return true })
		return func() error { return b.Absorb([]Group{rb.Group()}) }, nil
	})
	lb.SetOwner(func(p uint32) bool { return p < 4 })
	if err := restore(lb, snap); err != nil {
		t.Fatal(err)
	}
	if len(absorbed) != 1 || absorbed[0] != [3]uint32{0, 8, 1} {
		t.Fatalf("OnAbsorb calls %v, want [0, 8) at generation 1", absorbed)
	}
	if last, err := b.LogStore(4).LastIndex(); err != nil || last != 0 {
		t.Fatalf("the absorbed group's log survived the restore: last index %d %v", last, err)
	}
	if got, want := lb.Group(), la.Group(); got != want || lb.AppliedIndex() != 4 {
		t.Fatalf("restored %+v applied %d, want %+v applied 4", got, lb.AppliedIndex(), want)
	}
	if gone, err := b.Gone(rb.Group().ID); err != nil || !gone {
		t.Fatalf("the absorbed group is not gone: %v %v", gone, err)
	}
	wantValue(t, b, 7, "k", "l7")
	wantValue(t, b, 5, "k", "r5")
	_, ha, _ := la.StateHashes()
	_, hb, _ := lb.StateHashes()
	if !slices.Equal(ha, hb) {
		t.Fatal("state hashes differ after the restore")
	}
}

// Freeze, merge and abort entries round-trip, and malformed ones never panic.
func TestMergeEncoding(t *testing.T) {
	m := Merge{L: 5, R: Group{ID: SplitID(9, 2), First: 9, End: 17, Gen: 4}, At: 1 << 40, ConfigIndex: 7, Servers: mergeVoters}
	b := EncodeMerge(nil, -3, m)
	tm, got, err := decodeMerge(b[1:])
	if err != nil || tm != -3 || got.L != m.L || got.R != m.R || got.At != m.At || got.ConfigIndex != m.ConfigIndex || !slices.Equal(got.Servers, m.Servers) {
		t.Fatalf("decode = %d %+v %v, want -3 %+v", tm, got, err, m)
	}
	for i := 1; i < len(b); i++ {
		if _, _, err := decodeMerge(b[1:i]); err == nil {
			t.Fatalf("a merge cut to %d bytes decoded", i)
		}
	}
	fb := EncodeFreeze(nil, 5, Freeze{L: 3, ConfigIndex: 9, Servers: mergeVoters})
	if tm, got, err := decodeFreeze(fb[1:]); err != nil || tm != 5 || got.L != 3 || got.ConfigIndex != 9 || !slices.Equal(got.Servers, mergeVoters) {
		t.Fatalf("decode freeze = %d %+v %v", tm, got, err)
	}
	for i := 1; i < len(fb); i++ {
		if _, _, err := decodeFreeze(fb[1:i]); err == nil {
			t.Fatalf("a freeze cut to %d bytes decoded", i)
		}
	}
	s := newStore(t)
	_, r := mergePair(t, s)
	for i, e := range [][]byte{fb[:len(fb)-1], EncodeAbort(nil, 0, 1, 2)[:3], append(EncodeUnfreeze(nil, 3), 0)} {
		if err, _ := r.Apply(entryLog(uint64(10+i), e)).(error); !errors.Is(err, ErrBadCommand) {
			t.Fatalf("malformed entry %d: %v, want ErrBadCommand", i, err)
		}
	}
}

// A merge that ends its batch is as durable as one followed by other entries: the batch
// before it and the merge's own are both committed.
func TestMergeLastInBatch(t *testing.T) {
	dir := t.TempDir()
	s, closeStore := openStore(t, dir)
	l, r := mergePair(t, s)
	apply(t, r, freezeLog(3, mergeVoters))
	l.OnMerge(func(Group, uint64) error { return nil })
	apply(t, l, groupCmdLog(3, 20, opIn(2, put("k", "before"))), mergeLog(4, Merge{R: r.Group(), At: 3, Servers: mergeVoters}))
	closeStore()
	s, _ = openStore(t, dir)
	f := groupOf(t, s, Layout{Partitions: 8, Groups: 2}.Group(0))
	if g := f.Group(); g.End != 8 || f.AppliedIndex() != 4 || f.MergedAt() != 4 {
		t.Fatalf("after a restart: %+v applied %d merged at %d, want [0, 8) 4 4", g, f.AppliedIndex(), f.MergedAt())
	}
	wantValue(t, s, 2, "k", "before")
}

// A snapshot of a merged range restored on a replica that holds a newer group inside it (a
// later split's child it received by snapshot) leaves that group's partitions alone, and
// tells OnAbsorb the snapshot's generation, so that only older groups are dropped.
func TestMergeSnapshotKeepsNewerGroup(t *testing.T) {
	a, b := newStore(t), newStore(t)
	la, ra := mergePair(t, a)
	lb, _ := mergePair(t, b)
	apply(t, ra, freezeLog(3, mergeVoters))
	la.OnMerge(func(Group, uint64) error { return nil })
	apply(t, la, mergeLog(3, Merge{R: ra.Group(), At: 3, Servers: mergeVoters}), groupCmdLog(4, 80, opIn(7, put("k", "old"))))
	snap := snapshotBytes(t, la)

	// b holds [6, 8) in a group of a later generation than the snapshot's, with newer state.
	if err := b.RecordGroup(Group{ID: SplitID(6, 1), First: 6, End: 8, Gen: 5}); err != nil {
		t.Fatal(err)
	}
	apply(t, groupOf(t, b, Group{ID: SplitID(6, 1), First: 6, End: 8, Gen: 5}), groupCmdLog(2, 90, opIn(7, put("k", "newer"))))
	var gens []uint32
	lb.OnAbsorb(func(from, to, gen uint32) (func() error, error) {
		gens = append(gens, gen)
		lb.SetOwner(func(p uint32) bool { return p < 6 }) // the right group dropped, the newer one held
		return nil, nil
	})
	if err := restore(lb, snap); err != nil {
		t.Fatal(err)
	}
	if len(gens) != 1 || gens[0] != 1 {
		t.Fatalf("OnAbsorb told generations %v, want [1]", gens)
	}
	wantValue(t, b, 7, "k", "newer")
	wantValue(t, b, 5, "k", "r5")
}
