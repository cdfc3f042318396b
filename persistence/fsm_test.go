package persistence

import (
	"errors"
	"math"
	"testing"

	"github.com/hashicorp/raft"
)

func TestFSMApplyBatchWrites(t *testing.T) {
	s := newStore(t)
	f := newFSM(t, s, 1)
	if f.AppliedIndex() != 0 || f.LastTime() != 0 {
		t.Fatalf("fresh FSM: applied %d time %d, want 0 0", f.AppliedIndex(), f.LastTime())
	}
	apply(t, f,
		cmdLog(1, 100, put("a", "1"), put("b", "2"), put("c", "3")),
		cmdLog(2, 101, del("b"), put("d", "4")),
		cmdLog(3, 102, put("a", "1'")),
	)
	want := "\"a\"=\"1'\"\n\"c\"=\"3\"\n\"d\"=\"4\"\n"
	if got := dumpState(t, s, 1); got != want {
		t.Fatalf("state:\n%s\nwant:\n%s", got, want)
	}
	wantValue(t, s, 1, "a", "1'")
	wantMissing(t, s, 1, "b")
	if f.AppliedIndex() != 3 || f.LastTime() != 102 {
		t.Fatalf("applied %d time %d, want 3 102", f.AppliedIndex(), f.LastTime())
	}

	var rev []string
	if err := s.Scan(1, nil, nil, true, func(k, _ []byte) bool { rev = append(rev, string(k)); return true }); err != nil {
		t.Fatal(err)
	}
	if len(rev) != 3 || rev[0] != "d" || rev[1] != "c" || rev[2] != "a" {
		t.Fatalf("reverse scan = %q, want [d c a]", rev)
	}

	// Ops of one batch, and of one command, take effect in order.
	apply(t, f,
		cmdLog(4, 103, put("x", "1"), del("x")),
		cmdLog(5, 103, del("y"), put("y", "2")),
		cmdLog(6, 103, put("z", "1")),
		cmdLog(7, 103, del("z")),
	)
	wantMissing(t, s, 1, "x")
	wantValue(t, s, 1, "y", "2")
	wantMissing(t, s, 1, "z")

	// Apply is ApplyBatch of one entry.
	if r := f.Apply(cmdLog(8, 104, put("single", "yes"))); r != nil {
		t.Fatalf("Apply response %v", r)
	}
	wantValue(t, s, 1, "single", "yes")
	if f.AppliedIndex() != 8 {
		t.Fatalf("applied %d after Apply, want 8", f.AppliedIndex())
	}
}

func TestFSMAppliedIndexAndTimeSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	s, closeS := openStore(t, dir)
	f := newFSM(t, s, 2)
	apply(t, f, cmdLog(10, 5000, put("k", "v")))
	apply(t, f, cmdLog(11, 4000, put("k2", "v2"))) // an older clock does not move LastTime back
	apply(t, f, &raft.Log{Index: 12, Type: raft.LogConfiguration, Data: []byte("cfg")})
	if f.AppliedIndex() != 12 || f.LastTime() != 5000 {
		t.Fatalf("applied %d time %d, want 12 5000", f.AppliedIndex(), f.LastTime())
	}
	want := dumpFSM(t, s, f)
	closeS()

	s, _ = openStore(t, dir)
	f = newFSM(t, s, 2)
	if got := dumpFSM(t, s, f); got != want {
		t.Fatalf("after reopen:\n%s\nwant:\n%s", got, want)
	}
	// Another partition of the same store starts from zero.
	if g := newFSM(t, s, 3); g.AppliedIndex() != 0 || g.LastTime() != 0 {
		t.Fatalf("partition 3: applied %d time %d, want 0 0", g.AppliedIndex(), g.LastTime())
	}
}

// TestFSMNegativeAndExtremeTimes checks LastTime is the maximum command time as a signed value.
func TestFSMNegativeAndExtremeTimes(t *testing.T) {
	dir := t.TempDir()
	s, closeS := openStore(t, dir)
	f := newFSM(t, s, 1)
	apply(t, f, cmdLog(1, -5, put("a", "1")))
	if f.LastTime() != 0 {
		t.Fatalf("LastTime after a negative command time = %d, want 0 (never below the start)", f.LastTime())
	}
	apply(t, f, cmdLog(2, math.MaxInt64, put("a", "2")))
	apply(t, f, cmdLog(3, 7, put("a", "3")))
	if f.LastTime() != math.MaxInt64 {
		t.Fatalf("LastTime = %d, want MaxInt64", f.LastTime())
	}
	closeS()
	s, _ = openStore(t, dir)
	if f := newFSM(t, s, 1); f.LastTime() != math.MaxInt64 || f.AppliedIndex() != 3 {
		t.Fatalf("after reopen applied %d time %d, want 3 MaxInt64", f.AppliedIndex(), f.LastTime())
	}
}

// TestFSMSkipsAppliedEntries checks that entries at or below the applied index are not
// applied again, within a batch, across batches and across a restart.
func TestFSMSkipsAppliedEntries(t *testing.T) {
	dir := t.TempDir()
	s, closeS := openStore(t, dir)
	f := newFSM(t, s, 1)
	apply(t, f, cmdLog(5, 100, put("k", "a")))

	resp := f.ApplyBatch([]*raft.Log{
		cmdLog(5, 200, put("k", "b")),     // same index again
		cmdLog(3, 300, put("k", "c")),     // older index
		cmdLog(1, 400, put("other", "x")), // much older
		{Index: 4, Type: raft.LogCommand, Data: []byte("garbage")},
	})
	for i, r := range resp {
		if r != nil {
			t.Fatalf("skipped entry %d got response %v, want nil", i, r)
		}
	}
	if len(resp) != 4 {
		t.Fatalf("%d responses for 4 entries", len(resp))
	}
	wantValue(t, s, 1, "k", "a")
	wantMissing(t, s, 1, "other")
	if f.AppliedIndex() != 5 || f.LastTime() != 100 {
		t.Fatalf("applied %d time %d, want 5 100: skipped entries changed the metadata", f.AppliedIndex(), f.LastTime())
	}

	// Within one batch: the first entry 6 applies, its duplicate does not.
	apply(t, f, cmdLog(6, 100, put("k", "x")), cmdLog(6, 100, put("k", "y")), cmdLog(7, 100, put("j", "z")))
	wantValue(t, s, 1, "k", "x")
	wantValue(t, s, 1, "j", "z")
	if f.AppliedIndex() != 7 {
		t.Fatalf("applied %d, want 7", f.AppliedIndex())
	}
	closeS()

	// After a restart the stored applied index still guards against replays.
	s, _ = openStore(t, dir)
	f = newFSM(t, s, 1)
	before := dumpFSM(t, s, f)
	apply(t, f, cmdLog(5, 999, put("k", "b")), cmdLog(7, 999, del("j")))
	if got := dumpFSM(t, s, f); got != before {
		t.Fatalf("replay after reopen changed the FSM:\n%s\nwant:\n%s", got, before)
	}
	apply(t, f, cmdLog(8, 999, put("k", "new")))
	wantValue(t, s, 1, "k", "new")
}

// TestFSMInvalidCommand checks that a malformed command gets an error response, writes
// nothing (not even the ops it could parse before failing), and still consumes its index.
func TestFSMInvalidCommand(t *testing.T) {
	dir := t.TempDir()
	s, closeS := openStore(t, dir)
	f := newFSM(t, s, 1)
	apply(t, f, cmdLog(1, 10, put("keep", "1")))

	// A command whose first op is valid and whose second is not.
	partial := (&Command{Time: 50, Ops: []Op{{Partition: 1, Key: []byte("partial"), Value: []byte("x")}}}).Encode(nil)
	partial[2] = 2 // claim two ops
	partial = append(partial, 0x07, 0x01, 'z')

	resp := f.ApplyBatch([]*raft.Log{
		{Index: 2, Type: raft.LogCommand, Data: []byte("garbage")},
		cmdLog(3, 20, put("good", "1")),
		{Index: 4, Type: raft.LogCommand, Data: partial},
		{Index: 5, Type: raft.LogCommand, Data: nil},
	})
	if len(resp) != 4 {
		t.Fatalf("%d responses for 4 entries", len(resp))
	}
	for _, i := range []int{0, 2, 3} {
		err, ok := resp[i].(error)
		if !ok || !errors.Is(err, ErrBadCommand) {
			t.Fatalf("response %d = %v, want an error wrapping ErrBadCommand", i, resp[i])
		}
	}
	if resp[1] != nil {
		t.Fatalf("valid command in the batch got response %v", resp[1])
	}
	want := "\"good\"=\"1\"\n\"keep\"=\"1\"\n"
	if got := dumpState(t, s, 1); got != want {
		t.Fatalf("state:\n%s\nwant:\n%s", got, want)
	}
	// The invalid commands consumed their indexes; their times do not count.
	if f.AppliedIndex() != 5 || f.LastTime() != 20 {
		t.Fatalf("applied %d time %d, want 5 20", f.AppliedIndex(), f.LastTime())
	}

	// A batch of only invalid commands still advances and persists the applied index.
	if r := f.Apply(&raft.Log{Index: 6, Type: raft.LogCommand, Data: []byte{0x01}}); r == nil {
		t.Fatal("garbage entry got a nil response")
	}
	if f.AppliedIndex() != 6 {
		t.Fatalf("applied %d, want 6", f.AppliedIndex())
	}
	closeS()
	s, _ = openStore(t, dir)
	if f := newFSM(t, s, 1); f.AppliedIndex() != 6 || f.LastTime() != 20 {
		t.Fatalf("after reopen applied %d time %d, want 6 20", f.AppliedIndex(), f.LastTime())
	}
	if got := dumpState(t, s, 1); got != want {
		t.Fatalf("state after reopen:\n%s\nwant:\n%s", got, want)
	}
}

// TestFSMNonCommandEntries checks that entries of other types advance the applied index and
// write no state even when their data would decode as a command.
func TestFSMNonCommandEntries(t *testing.T) {
	dir := t.TempDir()
	s, closeS := openStore(t, dir)
	f := newFSM(t, s, 1)
	looksLikeCommand := (&Command{Time: 77, Ops: []Op{{Partition: 1, Key: []byte("sneaky"), Value: []byte("x")}}}).Encode(nil)
	for i, typ := range []raft.LogType{raft.LogConfiguration, raft.LogNoop, raft.LogBarrier, raft.LogAddPeerDeprecated} {
		idx := uint64(i + 1)
		if r := f.Apply(&raft.Log{Index: idx, Type: typ, Data: looksLikeCommand}); r != nil {
			t.Fatalf("%v entry got response %v", typ, r)
		}
		if f.AppliedIndex() != idx {
			t.Fatalf("after %v entry %d applied = %d", typ, idx, f.AppliedIndex())
		}
	}
	if got := dumpState(t, s, 1); got != "" {
		t.Fatalf("non-command entries wrote state:\n%s", got)
	}
	if f.LastTime() != 0 {
		t.Fatalf("non-command entries moved LastTime to %d", f.LastTime())
	}
	closeS()
	s, _ = openStore(t, dir)
	if f := newFSM(t, s, 1); f.AppliedIndex() != 4 {
		t.Fatalf("after reopen applied %d, want 4", f.AppliedIndex())
	}
}

// TestFSMPartitionIsolation checks that partitions of one store share neither state nor
// metadata, including the first and last partition numbers and keys at the range ends.
func TestFSMPartitionIsolation(t *testing.T) {
	dir := t.TempDir()
	s, closeS := openStore(t, dir)
	parts := []uint32{0, 1, 2, 255, 256, 4095}
	edgeKeys := []string{"\x00", "k", "\xff", "\xff\xff\xff\xff\xff\xff\xff\xff\xff"}
	for i, p := range parts {
		f := newFSM(t, s, p)
		var ops []Op
		for _, k := range edgeKeys {
			ops = append(ops, put(k, "p"+string(rune('A'+i))))
		}
		apply(t, f, cmdLog(uint64(10*(i+1)), int64(1000*(i+1)), ops...))
		if i == 0 {
			// Deleting in partition 0 must not delete in partition 1 (applied later).
			apply(t, f, cmdLog(11, 1000, del("k")))
		}
	}
	check := func(s *Store) {
		t.Helper()
		for i, p := range parts {
			f := newFSM(t, s, p)
			if f.AppliedIndex() != uint64(10*(i+1))+boolToUint(i == 0) || f.LastTime() != int64(1000*(i+1)) {
				t.Fatalf("partition %d: applied %d time %d", p, f.AppliedIndex(), f.LastTime())
			}
			n := 0
			if err := s.Scan(p, nil, nil, false, func(k, v []byte) bool {
				n++
				if string(v) != "p"+string(rune('A'+i)) {
					t.Fatalf("partition %d key %q holds %q, another partition's value", p, k, v)
				}
				return true
			}); err != nil {
				t.Fatal(err)
			}
			want := len(edgeKeys)
			if i == 0 {
				want--
			}
			if n != want {
				t.Fatalf("partition %d: %d keys, want %d", p, n, want)
			}
		}
		wantValue(t, s, 1, "k", "pB")
		// Partitions that were never written are empty.
		if got := dumpState(t, s, 3); got != "" {
			t.Fatalf("partition 3 holds:\n%s", got)
		}
	}
	check(s)
	closeS()
	s, _ = openStore(t, dir)
	check(s)
}

func boolToUint(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
