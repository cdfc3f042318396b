package persistence

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestEnsureLayout(t *testing.T) {
	dir := t.TempDir()
	s, closeS := openStore(t, dir)
	if _, ok, err := s.RecordedLayout(); ok || err != nil {
		t.Fatalf("RecordedLayout of a new directory: %v, %v", ok, err)
	}
	if err := s.EnsureLayout(Layout{16, 4}); err != nil {
		t.Fatalf("first EnsureLayout(16, 4): %v", err)
	}
	if l, ok, err := s.RecordedLayout(); err != nil || !ok || l != (Layout{16, 4}) {
		t.Fatalf("RecordedLayout = %+v, %v, %v; want {16 4}", l, ok, err)
	}
	// Without Raft state another layout replaces the record; with it, the record binds.
	if err := s.EnsureLayout(Layout{8, 2}); err != nil {
		t.Fatalf("EnsureLayout(8, 2) before any Raft state: %v", err)
	}
	if err := s.EnsureLayout(Layout{16, 4}); err != nil {
		t.Fatalf("EnsureLayout(16, 4) back, before any Raft state: %v", err)
	}
	if err := s.StableStore(12).SetUint64([]byte("CurrentTerm"), 1); err != nil {
		t.Fatal(err)
	}
	if err := s.EnsureLayout(Layout{16, 4}); err != nil {
		t.Fatalf("EnsureLayout(16, 4) again: %v", err)
	}
	checkMismatch := func(s *Store, requested Layout, flag string, n int) {
		t.Helper()
		err := s.EnsureLayout(requested)
		var lm *LayoutMismatchError
		if !errors.As(err, &lm) {
			t.Fatalf("EnsureLayout(%+v) = %v, want *LayoutMismatchError", requested, err)
		}
		if lm.Recorded != (Layout{16, 4}) || lm.Requested != requested {
			t.Fatalf("mismatch error = %+v, want Recorded {16 4}, Requested %+v", *lm, requested)
		}
		msg := err.Error()
		for _, v := range []int{map[string]int{"partitions": 16, "raft-groups": 4}[flag], n} {
			if !strings.Contains(msg, fmt.Sprintf("--%s=%d ", flag, v)) {
				t.Fatalf("message %q does not name --%s=%d", msg, flag, v)
			}
		}
	}
	checkMismatch(s, Layout{8, 4}, "partitions", 8)
	checkMismatch(s, Layout{17, 4}, "partitions", 17)
	checkMismatch(s, Layout{16, 2}, "raft-groups", 2)
	checkMismatch(s, Layout{16, 16}, "raft-groups", 16)
	// A refused layout is not recorded.
	if err := s.EnsureLayout(Layout{16, 4}); err != nil {
		t.Fatalf("EnsureLayout(16, 4) after a refusal: %v", err)
	}
	closeS()

	// The record survives a restart.
	s, _ = openStore(t, dir)
	if err := s.EnsureLayout(Layout{16, 4}); err != nil {
		t.Fatalf("EnsureLayout(16, 4) after reopen: %v", err)
	}
	checkMismatch(s, Layout{32, 4}, "partitions", 32)

	// Out of range layouts are refused before anything is recorded.
	for _, l := range []Layout{{0, 0}, {4, 5}, {-1, 1}} {
		if err := newStore(t).EnsureLayout(l); err == nil {
			t.Errorf("EnsureLayout(%+v) = nil, want an error", l)
		}
	}
}

// TestEnsureLayoutBeforeGroups: a directory that recorded only P, as directories did before
// Raft groups held several partitions, has one group per partition.
func TestEnsureLayoutBeforeGroups(t *testing.T) {
	s := newStore(t)
	if err := s.db.Set(nodeKey(nodeParts), []byte{0, 0, 0, 16}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.LogStore(15).StoreLogs(testLogs(1, 2)); err != nil {
		t.Fatal(err)
	}
	if l, ok, err := s.RecordedLayout(); err != nil || !ok || l != (Layout{16, 16}) {
		t.Errorf("RecordedLayout = %+v, %v, %v; want {16 16}", l, ok, err)
	}
	for _, l := range []Layout{{16, 0}, {16, 16}} {
		if err := s.EnsureLayout(l); err != nil {
			t.Errorf("EnsureLayout(%+v) = %v on a directory of 16 partitions", l, err)
		}
	}
	var lm *LayoutMismatchError
	if err := s.EnsureLayout(Layout{16, 4}); !errors.As(err, &lm) || lm.Recorded != (Layout{16, 16}) {
		t.Errorf("EnsureLayout(16, 4) = %v, want a mismatch with the recorded {16 16}", err)
	}
}

func TestEnsureLayoutIndependentOfPartitionData(t *testing.T) {
	s := newStore(t)
	// Data in every section of some partitions does not count as a recorded layout.
	if err := s.LogStore(0).StoreLogs(testLogs(1, 3)); err != nil {
		t.Fatal(err)
	}
	if err := s.StableStore(0).SetUint64([]byte("CurrentTerm"), 1); err != nil {
		t.Fatal(err)
	}
	apply(t, newFSM(t, s, 0), cmdLog(1, 1, put("partitions", "\x00\x00\x00\x09"), put("groups", "\x00\x00\x00\x09")))
	if err := s.EnsureLayout(Layout{4, 2}); err != nil {
		t.Fatalf("EnsureLayout(4, 2) on a store without a record: %v", err)
	}
	var lm *LayoutMismatchError
	if err := s.EnsureLayout(Layout{9, 9}); !errors.As(err, &lm) {
		t.Fatalf("EnsureLayout(9, 9) = %v, want *LayoutMismatchError", err)
	}
}

// TestLayout checks the map of partitions to groups against its definition: group g holds
// [⌊g·P/G⌋, ⌊(g+1)·P/G⌋), the groups cover every partition once, in order, and their sizes
// differ by at most one.
func TestLayout(t *testing.T) {
	for parts := 1; parts <= 64; parts++ {
		for groups := 0; groups <= parts; groups++ {
			l := Layout{parts, groups}
			g := groups
			if g == 0 {
				g = parts
			}
			if l.Count() != g {
				t.Fatalf("%+v: Count = %d", l, l.Count())
			}
			next, small, big := uint32(0), parts, 0
			for id := range uint32(g) {
				gr := l.Group(id)
				if gr.ID != id || gr.First != next || gr.End <= gr.First {
					t.Fatalf("%+v: group %d = %+v, want to start at %d and be non-empty", l, id, gr, next)
				}
				small, big = min(small, int(gr.End-gr.First)), max(big, int(gr.End-gr.First))
				for p := gr.First; p < gr.End; p++ {
					if l.Of(p) != id || !gr.Contains(p) {
						t.Fatalf("%+v: Of(%d) = %d, want %d", l, p, l.Of(p), id)
					}
				}
				next = gr.End
			}
			if next != uint32(parts) || big-small > 1 {
				t.Fatalf("%+v: groups end at %d (want %d), sizes %d..%d", l, next, parts, small, big)
			}
		}
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
