package persistence

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"strings"
	"testing"
)

// groupOf opens the FSM of a group of several partitions.
func groupOf(t testing.TB, s *Store, g Group) *FSM {
	t.Helper()
	f, err := s.FSM(g)
	if err != nil {
		t.Fatalf("FSM(%+v): %v", g, err)
	}
	return f
}

func opIn(p uint32, op Op) Op { op.Partition = p; return op }

// TestGroupFSM: one group's FSM applies each op to the partition it names, keeps one applied
// index for all of them, refuses a whole command naming a partition outside the group, and
// applies a version 1 command's ops to the group's first partition.
func TestGroupFSM(t *testing.T) {
	dir := t.TempDir()
	s, closeS := openStore(t, dir)
	g := Group{ID: 1, First: 3, End: 6}
	f := groupOf(t, s, g)
	apply(t, f, groupCmdLog(1, 100, opIn(3, put("k", "three")), opIn(4, put("k", "four")), opIn(5, put("k", "five"))))
	for i, bad := range []uint32{2, 6, 0} {
		resp := f.Apply(groupCmdLog(uint64(i)+10, 200, opIn(4, put("k", "lost")), opIn(bad, put("k", "outside"))))
		if err, ok := resp.(error); !ok || !errors.Is(err, ErrBadCommand) || !strings.Contains(err.Error(), "outside the group") {
			t.Fatalf("command naming partition %d: response %v, want an error naming the group's range", bad, resp)
		}
	}
	apply(t, f, cmdLog(20, 300, put("old", "v1"), opIn(5, del("k"))))
	check := func(s *Store) {
		t.Helper()
		wantValue(t, s, 4, "k", "four")
		wantMissing(t, s, 3, "outside")
		for _, p := range []uint32{2, 6, 0} {
			wantMissing(t, s, p, "k")
		}
		// The version 1 command's ops went to 3 (its "partition 5" is not in the format).
		wantValue(t, s, 3, "old", "v1")
		wantMissing(t, s, 3, "k")
		wantValue(t, s, 5, "k", "five")
		f := groupOf(t, s, g)
		if f.AppliedIndex() != 20 || f.LastTime() != 300 {
			t.Fatalf("applied %d, time %d; want 20, 300", f.AppliedIndex(), f.LastTime())
		}
	}
	check(s)
	closeS()
	s, _ = openStore(t, dir)
	check(s)
	if _, err := s.FSM(Group{ID: 9, First: 4, End: 4}); err == nil {
		t.Fatal("FSM of an empty group: no error")
	}
}

// TestGroupSnapshotRestore: a group's snapshot carries every one of its partitions, and
// restoring it on another replica replaces exactly them: not the partitions around the group
// nor the group's Raft log. The state hashes of the two replicas then agree, partition by
// partition.
func TestGroupSnapshotRestore(t *testing.T) {
	g := Group{ID: 1, First: 3, End: 6}
	a, b := newStore(t), newStore(t)
	fa, fb := groupOf(t, a, g), groupOf(t, b, g)
	apply(t, fa, groupCmdLog(7, 70, opIn(3, put("x", "a3")), opIn(4, put("x", "a4")), opIn(5, put("y", "a5"))))
	// b holds older state of the group, a neighbour of each side and a Raft log.
	apply(t, fb, groupCmdLog(2, 20, opIn(3, put("x", "b3")), opIn(4, put("stale", "b4"))))
	for _, p := range []uint32{2, 6} {
		apply(t, newFSM(t, b, p), cmdLog(1, 1, put("x", "neighbour")))
	}
	if err := b.LogStore(g.First).StoreLogs(testLogs(1, 3)); err != nil {
		t.Fatal(err)
	}

	data := snapshotBytes(t, fa)
	if err := restore(fb, data); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	wantValue(t, b, 3, "x", "a3")
	wantValue(t, b, 4, "x", "a4")
	wantValue(t, b, 5, "y", "a5")
	wantMissing(t, b, 4, "stale")
	wantValue(t, b, 2, "x", "neighbour")
	wantValue(t, b, 6, "x", "neighbour")
	if last, err := b.LogStore(g.First).LastIndex(); err != nil || last != 3 {
		t.Fatalf("group's log after restore: last index %d (%v), want 3", last, err)
	}
	if fb.AppliedIndex() != 7 || fb.LastTime() != 70 {
		t.Fatalf("restored applied %d time %d, want 7 70", fb.AppliedIndex(), fb.LastTime())
	}
	ia, ha, err := fa.StateHashes()
	if err != nil {
		t.Fatal(err)
	}
	ib, hb, err := fb.StateHashes()
	if err != nil {
		t.Fatal(err)
	}
	if ia != 7 || ib != 7 || len(ha) != 3 || len(hb) != 3 {
		t.Fatalf("state hashes at %d and %d, %d and %d of them; want 7 and 3", ia, ib, len(ha), len(hb))
	}
	for i := range ha {
		if ha[i] != hb[i] {
			t.Errorf("partition %d: hashes differ after restore", g.First+uint32(i))
		}
	}
	// A write changes its partition's hash and the first's (which holds the applied index),
	// not the others'.
	apply(t, fb, groupCmdLog(8, 80, opIn(4, put("x", "changed"))))
	_, hc, _ := fb.StateHashes()
	if hc[0] == hb[0] || hc[1] == hb[1] || hc[2] != hb[2] {
		t.Errorf("a write in partition 4 changed hashes %v %v %v, want true true false", hc[0] != hb[0], hc[1] != hb[1], hc[2] != hb[2])
	}

	// Another group's snapshot is refused, and leaves the state as it was.
	other := groupOf(t, a, Group{ID: 0, First: 0, End: 3})
	apply(t, other, groupCmdLog(1, 1, opIn(1, put("x", "other"))))
	if err := restore(fb, snapshotBytes(t, other)); err == nil || !strings.Contains(err.Error(), "outside the group") {
		t.Fatalf("restoring group 0's snapshot into group 1: %v, want a refusal", err)
	}
	wantValue(t, b, 4, "x", "changed")
}

// TestSnapshotVersion1: a group of one partition writes version 1 streams (keys relative to
// the partition), as nodes that predate groups do, and they restore into that partition,
// the group's first; groups of several partitions write version 2.
func TestSnapshotVersion1(t *testing.T) {
	var buf bytes.Buffer
	buf.WriteString(snapshotMagicV1)
	var frame []byte
	for _, kv := range [][2]string{
		{"m" + string(metaApplied), string(binary.BigEndian.AppendUint64(nil, 9))},
		{"m" + string(metaTime), string(binary.BigEndian.AppendUint64(nil, 90))},
		{"skey", "old"},
	} {
		frame = AppendComponent(AppendComponent(frame[:0], []byte(kv[0])), []byte(kv[1]))
		buf.Write(frame)
	}
	buf.WriteByte(0)
	buf.Write(binary.BigEndian.AppendUint32(nil, crc32.Checksum(buf.Bytes(), crcTable)))

	s := newStore(t)
	f := newFSM(t, s, 7)
	if err := restore(f, buf.Bytes()); err != nil {
		t.Fatalf("Restore of a version 1 stream: %v", err)
	}
	wantValue(t, s, 7, "key", "old")
	if f.AppliedIndex() != 9 || f.LastTime() != 90 {
		t.Fatalf("applied %d time %d, want 9 90", f.AppliedIndex(), f.LastTime())
	}
	// Written again, it is the same stream.
	again := snapshotBytes(t, f)
	if !bytes.Equal(again, buf.Bytes()) {
		t.Fatalf("snapshot of a group of one partition written as %q, want the version 1 stream %q", again, buf.Bytes())
	}
	if g := groupOf(t, s, Group{ID: 1, First: 7, End: 9}); !bytes.HasPrefix(snapshotBytes(t, g), []byte(snapshotMagic)) {
		t.Fatal("a group of two partitions did not write a version 2 stream")
	}
	s2 := newStore(t)
	if err := restore(newFSM(t, s2, 7), again); err != nil {
		t.Fatal(err)
	}
	wantValue(t, s2, 7, "key", "old")
}
