package persistence

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestEnsurePartitions(t *testing.T) {
	dir := t.TempDir()
	s, closeS := openStore(t, dir)
	if err := s.EnsurePartitions(16); err != nil {
		t.Fatalf("first EnsurePartitions(16): %v", err)
	}
	if err := s.EnsurePartitions(16); err != nil {
		t.Fatalf("EnsurePartitions(16) again: %v", err)
	}
	checkMismatch := func(s *Store, requested int) {
		t.Helper()
		err := s.EnsurePartitions(requested)
		var pm *PartitionMismatchError
		if !errors.As(err, &pm) {
			t.Fatalf("EnsurePartitions(%d) = %v, want *PartitionMismatchError", requested, err)
		}
		if pm.Recorded != 16 || pm.Requested != requested {
			t.Fatalf("mismatch error = %+v, want Recorded 16, Requested %d", *pm, requested)
		}
		msg := err.Error()
		for _, n := range []int{16, requested} {
			if !strings.Contains(msg, fmt.Sprintf("--partitions=%d ", n)) {
				t.Fatalf("message %q does not name %d", msg, n)
			}
		}
	}
	checkMismatch(s, 8)
	checkMismatch(s, 17)
	// A refused count is not recorded.
	if err := s.EnsurePartitions(16); err != nil {
		t.Fatalf("EnsurePartitions(16) after a refusal: %v", err)
	}
	closeS()

	// The record survives a restart.
	s, _ = openStore(t, dir)
	if err := s.EnsurePartitions(16); err != nil {
		t.Fatalf("EnsurePartitions(16) after reopen: %v", err)
	}
	checkMismatch(s, 32)
}

func TestEnsurePartitionsIndependentOfPartitionData(t *testing.T) {
	s := newStore(t)
	// Data in every section of some partitions does not count as a recorded P.
	if err := s.LogStore(0).StoreLogs(testLogs(1, 3)); err != nil {
		t.Fatal(err)
	}
	if err := s.StableStore(0).SetUint64([]byte("CurrentTerm"), 1); err != nil {
		t.Fatal(err)
	}
	apply(t, newFSM(t, s, 0), cmdLog(1, 1, put("partitions", "\x00\x00\x00\x09")))
	if err := s.EnsurePartitions(4); err != nil {
		t.Fatalf("EnsurePartitions(4) on a store without a record: %v", err)
	}
	var pm *PartitionMismatchError
	if err := s.EnsurePartitions(9); !errors.As(err, &pm) {
		t.Fatalf("EnsurePartitions(9) = %v, want *PartitionMismatchError", err)
	}
}

func TestScan(t *testing.T) {
	s := newStore(t)
	f := newFSM(t, s, 5)
	keys := []string{"a", "a\x00", "a\xff", "b", "b/1", "b/2", "c", "\xff", "\xff\xff"}
	var ops []Op
	for _, k := range keys {
		ops = append(ops, put(k, "v"+k))
	}
	apply(t, f, cmdLog(1, 1, ops...))
	// Neighbouring partitions hold keys at both ends of their ranges.
	apply(t, newFSM(t, s, 4), cmdLog(1, 1, put("\xff\xff\xff", "p4"), put("a", "p4")))
	apply(t, newFSM(t, s, 6), cmdLog(1, 1, put("\x00", "p6"), put("a", "p6")))

	scan := func(lower, upper []byte, reverse bool, limit int) string {
		t.Helper()
		var got []string
		err := s.Scan(5, lower, upper, reverse, func(k, v []byte) bool {
			if string(v) != "v"+string(k) {
				t.Fatalf("Scan: key %q has value %q", k, v)
			}
			got = append(got, fmt.Sprintf("%q", k))
			return limit <= 0 || len(got) < limit
		})
		if err != nil {
			t.Fatalf("Scan: %v", err)
		}
		return strings.Join(got, " ")
	}
	for _, tc := range []struct {
		lower, upper string
		nilUpper     bool
		reverse      bool
		limit        int
		want         string
	}{
		{nilUpper: true, want: `"a" "a\x00" "a\xff" "b" "b/1" "b/2" "c" "\xff" "\xff\xff"`},
		{nilUpper: true, reverse: true, want: `"\xff\xff" "\xff" "c" "b/2" "b/1" "b" "a\xff" "a\x00" "a"`},
		{lower: "b", upper: "c", want: `"b" "b/1" "b/2"`},
		{lower: "b", upper: "c", reverse: true, want: `"b/2" "b/1" "b"`},
		{lower: "b/", upper: "b0", want: `"b/1" "b/2"`},
		{lower: "a\x00", upper: "b", want: `"a\x00" "a\xff"`},
		{lower: "c", nilUpper: true, want: `"c" "\xff" "\xff\xff"`},
		{lower: "c", nilUpper: true, reverse: true, limit: 2, want: `"\xff\xff" "\xff"`},
		{nilUpper: true, limit: 3, want: `"a" "a\x00" "a\xff"`},
		{lower: "d", upper: "e", want: ``},
	} {
		var upper []byte
		if !tc.nilUpper {
			upper = []byte(tc.upper)
		}
		if got := scan([]byte(tc.lower), upper, tc.reverse, tc.limit); got != tc.want {
			t.Errorf("Scan(%q, %q, reverse=%v, limit=%d) = %s, want %s", tc.lower, upper, tc.reverse, tc.limit, got, tc.want)
		}
	}

	for prefix, want := range map[string]int{"": 9, "a": 3, "b/": 2, "\xff": 2, "\xff\xff": 1, "z": 0} {
		n, err := s.KeyCount(5, []byte(prefix))
		if err != nil || n != want {
			t.Errorf("KeyCount(5, %q) = %d, %v; want %d", prefix, n, err, want)
		}
	}
	if n, err := s.KeyCount(7, nil); err != nil || n != 0 {
		t.Errorf("KeyCount of an empty partition = %d, %v", n, err)
	}
}
