package persistence

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// fillPartition applies a varied state to partition p through f, starting at index first.
func fillPartition(t *testing.T, f *FSM, first uint64, tag string) {
	t.Helper()
	apply(t, f,
		cmdLog(first, 1700000000123, put("a", tag+"1"), put("b", tag+"2"), put("\x00", ""), put("\xff\xff", tag+"\xff")),
		cmdLog(first+1, 1700000000456, put("big", strings.Repeat(tag, 300)), del("b")),
		cmdLog(first+2, 1700000000400, put("c/1", tag), put("c/2", tag)),
	)
}

// TestSnapshotRestore snapshots partition 3 of store A and restores it into an empty store B.
func TestSnapshotRestore(t *testing.T) {
	a := newStore(t)
	fa := newFSM(t, a, 3)
	fillPartition(t, fa, 10, "A")
	// Neighbouring partitions of A, which must not travel with the snapshot.
	fillPartition(t, newFSM(t, a, 2), 100, "two")
	fillPartition(t, newFSM(t, a, 4), 200, "four")
	data := snapshotBytes(t, fa)

	b := newStore(t)
	fb := newFSM(t, b, 3)
	if err := restore(fb, data); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if got, want := dumpFSM(t, b, fb), dumpFSM(t, a, fa); got != want {
		t.Fatalf("restored partition:\n%s\nwant:\n%s", got, want)
	}
	if fb.AppliedIndex() != 12 || fb.LastTime() != 1700000000456 {
		t.Fatalf("restored applied %d time %d, want 12 1700000000456", fb.AppliedIndex(), fb.LastTime())
	}
	for _, p := range []uint32{2, 4} {
		if got := dumpState(t, b, p); got != "" {
			t.Fatalf("restore wrote partition %d of B:\n%s", p, got)
		}
	}
	// The restored metadata is on disk, not just in memory.
	if g := newFSM(t, b, 3); g.AppliedIndex() != 12 || g.LastTime() != 1700000000456 {
		t.Fatalf("reloaded FSM: applied %d time %d", g.AppliedIndex(), g.LastTime())
	}
	// The restored FSM carries on from the snapshot's index.
	apply(t, fb, cmdLog(12, 1, put("a", "replayed")), cmdLog(13, 1, put("a", "next")))
	wantValue(t, b, 3, "a", "next")

	// The same snapshot restores into a different store's partition equally (keys are
	// relative), and snapshotting the restored partition yields the same bytes.
	c := newStore(t)
	fc := newFSM(t, c, 3)
	if err := restore(fc, data); err != nil {
		t.Fatal(err)
	}
	if again := snapshotBytes(t, fc); !bytes.Equal(again, data) {
		t.Fatalf("snapshot of a restored partition differs from the original snapshot")
	}
}

// TestSnapshotIsPointInTime checks that what happens to the partition between Snapshot and
// Persist is not in the persisted snapshot: raft persists it concurrently with later FSM
// operations. Those include applies, and a Restore (a follower persisting its own snapshot
// while it installs the leader's), whose excise a plain Pebble snapshot would see.
func TestSnapshotIsPointInTime(t *testing.T) {
	other := newFSM(t, newStore(t), 3)
	fillPartition(t, other, 50, "other")
	otherData := snapshotBytes(t, other)
	for _, tc := range []struct {
		name      string
		meanwhile func(t *testing.T, s *Store, f *FSM)
	}{
		{"apply", func(t *testing.T, s *Store, f *FSM) {
			apply(t, f, cmdLog(4, 1800000000000, put("later", "x"), del("a")))
		}},
		{"restore", func(t *testing.T, s *Store, f *FSM) {
			// The state in sstables (as it mostly is), not in the memtable, when the excise comes.
			if err := s.db.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := restore(f, otherData); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newStore(t)
			fa := newFSM(t, a, 3)
			fillPartition(t, fa, 1, "A")
			want := dumpFSM(t, a, fa)
			snap, err := fa.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			defer snap.Release()
			tc.meanwhile(t, a, fa)

			sink := &memSink{}
			if err := snap.Persist(sink); err != nil {
				t.Fatal(err)
			}
			fb := newFSM(t, newStore(t), 3)
			if err := restore(fb, sink.Bytes()); err != nil {
				t.Fatal(err)
			}
			if got := dumpFSM(t, fb.s, fb); got != want {
				t.Fatalf("persisted:\n%s\nwant the state at Snapshot time:\n%s", got, want)
			}
		})
	}
}

func TestSnapshotPersistSinkFailure(t *testing.T) {
	fa := newFSM(t, newStore(t), 3)
	fillPartition(t, fa, 1, "A")
	full := snapshotBytes(t, fa)
	for _, limit := range []int{1, 10, len(full) - 4, len(full) - 1} {
		snap, err := fa.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		sink := &memSink{failAfter: limit}
		err = snap.Persist(sink)
		snap.Release()
		if !errors.Is(err, errSinkFull) {
			t.Fatalf("Persist into a sink failing after %d bytes = %v, want errSinkFull", limit, err)
		}
		if !sink.cancelled || sink.closed {
			t.Fatalf("failed Persist: cancelled=%v closed=%v, want cancelled and not closed", sink.cancelled, sink.closed)
		}
	}
}

// TestRestoreReplacesState checks that keys present only in B before the restore are gone,
// including B's metadata, even when B was further ahead.
func TestRestoreReplacesState(t *testing.T) {
	fa := newFSM(t, newStore(t), 3)
	fillPartition(t, fa, 10, "A")
	data := snapshotBytes(t, fa)

	b := newStore(t)
	fb := newFSM(t, b, 3)
	apply(t, fb, cmdLog(500, 1900000000000, put("only-in-b", "x"), put("a", "B"), put("\xff\xff\xff", "B")))
	fillPartition(t, newFSM(t, b, 2), 1, "two")
	fillPartition(t, newFSM(t, b, 4), 1, "four")
	two, four := dumpState(t, b, 2), dumpState(t, b, 4)

	if err := restore(fb, data); err != nil {
		t.Fatal(err)
	}
	if got, want := dumpFSM(t, b, fb), dumpFSM(t, fa.s, fa); got != want {
		t.Fatalf("after restore:\n%s\nwant:\n%s", got, want)
	}
	wantMissing(t, b, 3, "only-in-b")
	if dumpState(t, b, 2) != two || dumpState(t, b, 4) != four {
		t.Fatal("restore of partition 3 changed partition 2 or 4")
	}

	// Restoring an empty partition's snapshot empties the partition.
	empty := snapshotBytes(t, newFSM(t, newStore(t), 3))
	if err := restore(fb, empty); err != nil {
		t.Fatal(err)
	}
	if got := dumpFSM(t, b, fb); got != "applied=0 time=0\n" {
		t.Fatalf("after restoring an empty snapshot:\n%s", got)
	}
}

// TestRestoreCorrupt flips each byte of a snapshot in turn, and truncates it at each length:
// Restore must fail and leave B's partition exactly as it was.
func TestRestoreCorrupt(t *testing.T) {
	fa := newFSM(t, newStore(t), 3)
	fillPartition(t, fa, 10, "A")
	data := snapshotBytes(t, fa)

	b := newStore(t)
	fb := newFSM(t, b, 3)
	apply(t, fb, cmdLog(7, 42, put("b-only", "1"), put("a", "B")))
	if err := b.LogStore(3).StoreLogs(testLogs(1, 7)); err != nil {
		t.Fatal(err)
	}
	before := dumpFSM(t, b, fb)
	check := func(what string) {
		t.Helper()
		if got := dumpFSM(t, b, fb); got != before {
			t.Fatalf("%s: failed restore changed B:\n%s\nwant:\n%s", what, got, before)
		}
		if g := newFSM(t, b, 3); g.AppliedIndex() != 7 || g.LastTime() != 42 {
			t.Fatalf("%s: stored metadata changed: applied %d time %d", what, g.AppliedIndex(), g.LastTime())
		}
	}

	for i := range data {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			bad := append([]byte(nil), data...)
			bad[i] ^= mask
			if err := restore(fb, bad); err == nil {
				t.Fatalf("Restore accepted the snapshot with byte %d of %d xor %#x", i, len(data), mask)
			}
			check(fmt.Sprintf("byte %d xor %#x", i, mask))
		}
	}
	for n := 0; n < len(data); n++ {
		if err := restore(fb, data[:n]); err == nil {
			t.Fatalf("Restore accepted the snapshot truncated to %d of %d bytes", n, len(data))
		}
		check(fmt.Sprintf("truncated to %d", n))
	}
	checkBounds(t, b.LogStore(3), 1, 7)

	// B is still usable and the intact snapshot still restores.
	if err := restore(fb, data); err != nil {
		t.Fatalf("intact snapshot after the corrupt ones: %v", err)
	}
	wantMissing(t, b, 3, "b-only")
}

// TestRestoreKeepsRaftState checks that Restore leaves the partition's Raft log and stable
// store alone: they are local to the replica, and raft relies on them across a restore
// (InstallSnapshot keeps the current term and vote, and log entries after the snapshot).
func TestRestoreKeepsRaftState(t *testing.T) {
	fa := newFSM(t, newStore(t), 3)
	fillPartition(t, fa, 10, "A")
	data := snapshotBytes(t, fa)

	b := newStore(t)
	logs := testLogs(1, 20)
	if err := b.LogStore(3).StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	st := b.StableStore(3)
	if err := st.SetUint64([]byte("CurrentTerm"), 9); err != nil {
		t.Fatal(err)
	}
	if err := st.Set([]byte("LastVoteCand"), []byte("n2")); err != nil {
		t.Fatal(err)
	}
	fb := newFSM(t, b, 3)
	apply(t, fb, cmdLog(1, 1, put("old", "x")))

	if err := restore(fb, data); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	checkBounds(t, b.LogStore(3), 1, 20)
	for _, want := range logs {
		var got raft.Log
		if err := b.LogStore(3).GetLog(want.Index, &got); err != nil {
			t.Fatalf("log %d after Restore: %v", want.Index, err)
		}
		checkLogEqual(t, &got, want)
	}
	if v, err := st.GetUint64([]byte("CurrentTerm")); err != nil || v != 9 {
		t.Fatalf("CurrentTerm after Restore = %d, %v; want 9", v, err)
	}
	if v, err := st.Get([]byte("LastVoteCand")); err != nil || string(v) != "n2" {
		t.Fatalf("LastVoteCand after Restore = %q, %v; want n2", v, err)
	}
}

// TestSnapshotExcludesRaftState checks that a snapshot of a partition that has a Raft log
// and stable store (every real one) carries only the state and metadata, and so restores
// on another replica without bringing the source replica's log or term along.
func TestSnapshotExcludesRaftState(t *testing.T) {
	a := newStore(t)
	if err := a.LogStore(3).StoreLogs(testLogs(1, 12)); err != nil {
		t.Fatal(err)
	}
	if err := a.StableStore(3).SetUint64([]byte("CurrentTerm"), 5); err != nil {
		t.Fatal(err)
	}
	fa := newFSM(t, a, 3)
	fillPartition(t, fa, 10, "A")
	data := snapshotBytes(t, fa)

	// A snapshot of the same state without any Raft keys around it.
	clean := newFSM(t, newStore(t), 3)
	fillPartition(t, clean, 10, "A")
	if want := snapshotBytes(t, clean); !bytes.Equal(data, want) {
		t.Errorf("snapshot of a partition with a Raft log is %d bytes, want the %d bytes of its state alone", len(data), len(want))
	}

	b := newStore(t)
	fb := newFSM(t, b, 3)
	if err := restore(fb, data); err != nil {
		t.Fatalf("Restore of a snapshot taken next to a Raft log: %v", err)
	}
	if got, want := dumpFSM(t, b, fb), dumpFSM(t, a, fa); got != want {
		t.Fatalf("restored:\n%s\nwant:\n%s", got, want)
	}
	checkBounds(t, b.LogStore(3), 0, 0)
	if _, err := b.StableStore(3).Get([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
		t.Fatalf("the source replica's CurrentTerm came along with the snapshot: %v", err)
	}
}

// TestRestoreLeavesNoFiles checks the sstable a restore stages beside the database: moved
// into the database by a successful restore, removed after a failed one, and, when a crash
// left one behind, removed when the store is next opened (it was never ingested, so the
// partition keeps its state).
func TestRestoreLeavesNoFiles(t *testing.T) {
	fa := newFSM(t, newStore(t), 3)
	fillPartition(t, fa, 10, "A")
	data := snapshotBytes(t, fa)

	dir := filepath.Join(t.TempDir(), "pebble")
	b, closeB := openStore(t, dir)
	fb := newFSM(t, b, 3)
	staged := func() []string {
		t.Helper()
		names, err := filepath.Glob(filepath.Join(restoreDir(dir), "*"))
		if err != nil {
			t.Fatal(err)
		}
		return names
	}
	if err := restore(fb, data); err != nil {
		t.Fatal(err)
	}
	if s := staged(); len(s) != 0 {
		t.Fatalf("after a restore: staged files %q", s)
	}
	if err := restore(fb, data[:len(data)-1]); err == nil {
		t.Fatal("truncated snapshot accepted")
	}
	if s := staged(); len(s) != 0 {
		t.Fatalf("after a failed restore: staged files %q", s)
	}
	// An empty snapshot writes an sstable with no keys, which ingestion skips.
	if err := restore(fb, snapshotBytes(t, newFSM(t, newStore(t), 3))); err != nil {
		t.Fatal(err)
	}
	if s := staged(); len(s) != 0 {
		t.Fatalf("after restoring an empty snapshot: staged files %q", s)
	}
	if err := restore(fb, data); err != nil {
		t.Fatal(err)
	}
	want := dumpFSM(t, b, fb)
	closeB()

	// A crash in the middle of a restore: a partial sstable is left in the staging directory.
	if err := os.WriteFile(filepath.Join(restoreDir(dir), "p0003.sst"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	b2, _ := openStore(t, dir)
	if s := staged(); len(s) != 0 {
		t.Fatalf("after reopening: staged files %q", s)
	}
	if got := dumpFSM(t, b2, newFSM(t, b2, 3)); got != want {
		t.Fatalf("after reopening:\n%s\nwant:\n%s", got, want)
	}
}

// TestRestoreLargePartition restores a partition larger than a Pebble memtable (100,000 keys,
// about 100 MiB: an sstable of many blocks) and checks keys at both ends and in the middle,
// and that the restored partition snapshots to the same bytes.
func TestRestoreLargePartition(t *testing.T) {
	if testing.Short() {
		t.Skip("writes about 100 MiB")
	}
	a := newStore(t)
	fa := newFSM(t, a, 3)
	value := strings.Repeat("v", 1000)
	const perCmd, cmds = 1000, 100 // 100,000 keys, ~100 MiB
	for c := range cmds {
		ops := make([]Op, perCmd)
		for i := range ops {
			ops[i] = put(fmt.Sprintf("k%06d", c*perCmd+i), value)
		}
		apply(t, fa, cmdLog(uint64(c+1), 1700000000000, ops...))
	}
	data := snapshotBytes(t, fa)

	b := newStore(t)
	fb := newFSM(t, b, 3)
	apply(t, fb, cmdLog(1, 1, put("stale", "x")))
	if err := restore(fb, data); err != nil {
		t.Fatal(err)
	}
	if fb.AppliedIndex() != cmds {
		t.Fatalf("applied %d, want %d", fb.AppliedIndex(), cmds)
	}
	wantMissing(t, b, 3, "stale")
	for _, i := range []int{0, 1, perCmd*cmds/2 + 7, perCmd*cmds - 1} {
		wantValue(t, b, 3, fmt.Sprintf("k%06d", i), value)
	}
	if again := snapshotBytes(t, fb); !bytes.Equal(again, data) {
		t.Fatal("snapshot of the restored partition differs from the original")
	}
}
