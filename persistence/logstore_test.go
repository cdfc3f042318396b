package persistence

import (
	"bytes"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// testLogs returns entries lo..hi with varied types, payloads and timestamps.
func testLogs(lo, hi uint64) []*raft.Log {
	var logs []*raft.Log
	types := []raft.LogType{raft.LogCommand, raft.LogNoop, raft.LogConfiguration, raft.LogBarrier}
	for i := lo; i <= hi; i++ {
		l := &raft.Log{
			Index:      i,
			Term:       i/3 + 1,
			Type:       types[i%uint64(len(types))],
			Data:       []byte(fmt.Sprintf("data-%d\x00\xff", i)),
			AppendedAt: time.Unix(1700000000+int64(i), int64(i)*7919+1).UTC(),
		}
		if i%2 == 0 {
			l.Extensions = []byte(fmt.Sprintf("ext-%d", i))
		}
		logs = append(logs, l)
	}
	return logs
}

func checkLogEqual(t *testing.T, got, want *raft.Log) {
	t.Helper()
	if got.Index != want.Index || got.Term != want.Term || got.Type != want.Type {
		t.Fatalf("log %d: index/term/type = %d/%d/%v, want %d/%d/%v",
			want.Index, got.Index, got.Term, got.Type, want.Index, want.Term, want.Type)
	}
	if !bytes.Equal(got.Data, want.Data) {
		t.Fatalf("log %d: data = %q, want %q", want.Index, got.Data, want.Data)
	}
	if !bytes.Equal(got.Extensions, want.Extensions) {
		t.Fatalf("log %d: extensions = %q, want %q", want.Index, got.Extensions, want.Extensions)
	}
	if !got.AppendedAt.Equal(want.AppendedAt) || got.AppendedAt.IsZero() != want.AppendedAt.IsZero() {
		t.Fatalf("log %d: appended at %v, want %v", want.Index, got.AppendedAt, want.AppendedAt)
	}
}

func checkBounds(t *testing.T, l *LogStore, first, last uint64) {
	t.Helper()
	f, err := l.FirstIndex()
	if err != nil {
		t.Fatalf("FirstIndex: %v", err)
	}
	la, err := l.LastIndex()
	if err != nil {
		t.Fatalf("LastIndex: %v", err)
	}
	if f != first || la != last {
		t.Fatalf("FirstIndex, LastIndex = %d, %d; want %d, %d", f, la, first, last)
	}
}

func wantNoLog(t *testing.T, l *LogStore, index uint64) {
	t.Helper()
	var log raft.Log
	if err := l.GetLog(index, &log); err != raft.ErrLogNotFound {
		t.Fatalf("GetLog(%d) = %v, want raft.ErrLogNotFound", index, err)
	}
}

func TestLogStoreEmpty(t *testing.T) {
	l := newStore(t).LogStore(1)
	checkBounds(t, l, 0, 0)
	wantNoLog(t, l, 0)
	wantNoLog(t, l, 1)
	wantNoLog(t, l, math.MaxUint64)
}

func TestLogStoreStoreAndGet(t *testing.T) {
	l := newStore(t).LogStore(1)
	logs := testLogs(1, 20)
	if err := l.StoreLogs(logs[:10]); err != nil {
		t.Fatal(err)
	}
	for _, log := range logs[10:] {
		if err := l.StoreLog(log); err != nil {
			t.Fatal(err)
		}
	}
	checkBounds(t, l, 1, 20)
	for _, want := range logs {
		// Decode into a log holding stale fields: GetLog must overwrite all of them.
		got := raft.Log{Index: 999, Term: 999, Data: []byte("stale"), Extensions: []byte("stale"), AppendedAt: time.Now()}
		if err := l.GetLog(want.Index, &got); err != nil {
			t.Fatalf("GetLog(%d): %v", want.Index, err)
		}
		checkLogEqual(t, &got, want)
	}
	wantNoLog(t, l, 0)
	wantNoLog(t, l, 21)
}

// TestLogStoreEdgeFields stores entries with empty payloads, zero and pre-epoch times and
// extreme terms and indices.
func TestLogStoreEdgeFields(t *testing.T) {
	l := newStore(t).LogStore(2)
	logs := []*raft.Log{
		{Index: 1, Term: 0, Type: raft.LogCommand},
		{Index: 2, Term: math.MaxUint64, Type: raft.LogType(255), Data: []byte{}, Extensions: []byte{}},
		{Index: 3, Term: 1, Type: raft.LogCommand, Data: bytes.Repeat([]byte{0xab}, 1<<16), AppendedAt: time.Unix(-1, 5)},
		{Index: 255, Term: 1, AppendedAt: time.Now()}, // carries a monotonic reading
		{Index: 256, Term: 1, AppendedAt: time.Date(2200, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600))},
		{Index: 1 << 40, Term: 2},
	}
	if err := l.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	checkBounds(t, l, 1, 1<<40)
	for _, want := range logs {
		var got raft.Log
		if err := l.GetLog(want.Index, &got); err != nil {
			t.Fatalf("GetLog(%d): %v", want.Index, err)
		}
		checkLogEqual(t, &got, want)
	}
}

// TestLogStoreOverwrite checks that storing an index again replaces the entry, as raft does
// after truncating a conflicting suffix.
func TestLogStoreOverwrite(t *testing.T) {
	l := newStore(t).LogStore(1)
	if err := l.StoreLogs(testLogs(1, 5)); err != nil {
		t.Fatal(err)
	}
	repl := &raft.Log{Index: 4, Term: 9, Type: raft.LogCommand, Data: []byte("new")}
	if err := l.StoreLog(repl); err != nil {
		t.Fatal(err)
	}
	var got raft.Log
	if err := l.GetLog(4, &got); err != nil {
		t.Fatal(err)
	}
	checkLogEqual(t, &got, repl)
	checkBounds(t, l, 1, 5)
}

func TestLogStoreDeleteRange(t *testing.T) {
	l := newStore(t).LogStore(1)
	if err := l.StoreLogs(testLogs(1, 10)); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		min, max    uint64
		first, last uint64
		gone, kept  []uint64
	}{
		{1, 3, 4, 10, []uint64{1, 2, 3}, []uint64{4}},      // prefix, as compaction does
		{8, 10, 4, 7, []uint64{8, 9, 10}, []uint64{7}},     // suffix, as conflict truncation does
		{5, 5, 4, 7, []uint64{5}, []uint64{4, 6}},          // single entry
		{20, 30, 4, 7, nil, []uint64{4, 6, 7}},             // nothing there
		{1, 4, 6, 7, []uint64{4}, []uint64{6, 7}},          // range starting before the first
		{6, math.MaxUint64 - 1, 0, 0, []uint64{6, 7}, nil}, // to (almost) the end
	}
	for _, s := range steps {
		if err := l.DeleteRange(s.min, s.max); err != nil {
			t.Fatalf("DeleteRange(%d, %d): %v", s.min, s.max, err)
		}
		checkBounds(t, l, s.first, s.last)
		for _, i := range s.gone {
			wantNoLog(t, l, i)
		}
		for _, i := range s.kept {
			var log raft.Log
			if err := l.GetLog(i, &log); err != nil {
				t.Fatalf("after DeleteRange(%d, %d): GetLog(%d): %v", s.min, s.max, i, err)
			}
		}
	}
}

// TestLogStorePartitionIsolation checks that neighbouring partitions share nothing.
func TestLogStorePartitionIsolation(t *testing.T) {
	s := newStore(t)
	l1, l2, l0 := s.LogStore(1), s.LogStore(2), s.LogStore(0)
	if err := l1.StoreLogs(testLogs(1, 5)); err != nil {
		t.Fatal(err)
	}
	checkBounds(t, l1, 1, 5)
	checkBounds(t, l2, 0, 0)
	checkBounds(t, l0, 0, 0)
	for i := uint64(1); i <= 5; i++ {
		wantNoLog(t, l2, i)
		wantNoLog(t, l0, i)
	}

	if err := l2.StoreLogs(testLogs(100, 102)); err != nil {
		t.Fatal(err)
	}
	checkBounds(t, l1, 1, 5)
	checkBounds(t, l2, 100, 102)

	// Deleting everything in partition 2 leaves partition 1 alone, and vice versa.
	if err := l2.DeleteRange(0, math.MaxUint64-1); err != nil {
		t.Fatal(err)
	}
	checkBounds(t, l2, 0, 0)
	checkBounds(t, l1, 1, 5)
	if err := l0.DeleteRange(0, 1000); err != nil {
		t.Fatal(err)
	}
	checkBounds(t, l1, 1, 5)

	// The stable store and the state of the same partition do not show up as log entries.
	if err := s.StableStore(3).Set([]byte("CurrentTerm"), []byte{0xff, 0xff}); err != nil {
		t.Fatal(err)
	}
	apply(t, newFSM(t, s, 3), cmdLog(1, 1, put("\xff\xff\xff\xff\xff\xff\xff\xff", "x")))
	checkBounds(t, s.LogStore(3), 0, 0)
}

func TestLogStoreSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s, closeS := openStore(t, dir)
	logs := testLogs(1, 50)
	if err := s.LogStore(7).StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := s.LogStore(7).DeleteRange(1, 10); err != nil {
		t.Fatal(err)
	}
	closeS()

	s, _ = openStore(t, dir)
	l := s.LogStore(7)
	checkBounds(t, l, 11, 50)
	wantNoLog(t, l, 10)
	for _, want := range logs[10:] {
		var got raft.Log
		if err := l.GetLog(want.Index, &got); err != nil {
			t.Fatalf("GetLog(%d) after reopen: %v", want.Index, err)
		}
		checkLogEqual(t, &got, want)
	}
}

// TestLogStoreDeleteRangeToMaxIndex checks that a range ending at the largest index is
// deleted too: max+1 must not wrap around to 0 and make the range empty. (Raft itself always
// passes its last index as max, so this is the LogStore contract rather than raft's usage.)
func TestLogStoreDeleteRangeToMaxIndex(t *testing.T) {
	s := newStore(t)
	l := s.LogStore(1)
	if err := l.StoreLogs(testLogs(1, 5)); err != nil {
		t.Fatal(err)
	}
	if err := l.StoreLog(&raft.Log{Index: math.MaxUint64, Term: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.LogStore(2).StoreLogs(testLogs(1, 2)); err != nil {
		t.Fatal(err)
	}
	if err := l.DeleteRange(3, math.MaxUint64); err != nil {
		t.Fatalf("DeleteRange(3, MaxUint64): %v", err)
	}
	checkBounds(t, l, 1, 2)
	wantNoLog(t, l, math.MaxUint64)
	checkBounds(t, s.LogStore(2), 1, 2)
}
