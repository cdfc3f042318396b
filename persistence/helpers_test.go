package persistence

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/raft"
)

// openStore opens the Store in dir. The returned close function is idempotent and also runs
// at cleanup, so a test may close and reopen the same directory freely.
func openStore(t testing.TB, dir string) (*Store, func()) {
	t.Helper()
	s, err := Open(dir, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	var once sync.Once
	closeFn := func() {
		once.Do(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	}
	t.Cleanup(closeFn)
	return s, closeFn
}

// newStore opens a Store in a fresh temporary directory.
func newStore(t testing.TB) *Store {
	t.Helper()
	s, _ := openStore(t, t.TempDir())
	return s
}

func newFSM(t testing.TB, s *Store, p uint32) *FSM {
	t.Helper()
	f, err := s.FSM(Group{ID: p, First: p, End: p + 1})
	if err != nil {
		t.Fatalf("FSM(%d): %v", p, err)
	}
	return f
}

func put(k, v string) Op { return Op{Key: []byte(k), Value: []byte(v)} }
func del(k string) Op    { return Op{Delete: true, Key: []byte(k)} }

// cmdLog builds a LogCommand entry holding the command in version 1, whose ops name no
// partition and apply to the first of the FSM's group, as the logs of data directories
// written when each group held one partition do. (groupCmdLog writes version 2.)
func cmdLog(index uint64, time int64, ops ...Op) *raft.Log {
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: encodeV1(Command{Time: time, Ops: ops})}
}

// groupCmdLog builds a LogCommand entry holding the command in the current version.
func groupCmdLog(index uint64, time int64, ops ...Op) *raft.Log {
	c := Command{Time: time, Ops: ops}
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: c.Encode(nil)}
}

// encodeV1 writes c as version 1, without the partitions.
func encodeV1(c Command) []byte { return c.encode(nil, commandV1) }

// apply applies logs as one batch and fails the test on any error response.
func apply(t testing.TB, f *FSM, logs ...*raft.Log) {
	t.Helper()
	for i, r := range f.ApplyBatch(logs) {
		if r != nil {
			t.Fatalf("entry %d (index %d): response %v", i, logs[i].Index, r)
		}
	}
}

// dumpState renders every state key of partition p, in order, one "key=value" per line.
func dumpState(t testing.TB, s *Store, p uint32) string {
	t.Helper()
	var sb strings.Builder
	if err := s.Scan(p, nil, nil, false, func(k, v []byte) bool {
		fmt.Fprintf(&sb, "%q=%q\n", k, v)
		return true
	}); err != nil {
		t.Fatalf("Scan(%d): %v", p, err)
	}
	return sb.String()
}

// dumpFSM renders partition p's state plus the FSM's applied index and last time.
func dumpFSM(t testing.TB, s *Store, f *FSM) string {
	t.Helper()
	return fmt.Sprintf("applied=%d time=%d\n%s", f.AppliedIndex(), f.LastTime(), dumpState(t, s, f.first))
}

func getValue(t testing.TB, s *Store, p uint32, k string) (string, bool) {
	t.Helper()
	v, ok, err := s.Get(p, []byte(k))
	if err != nil {
		t.Fatalf("Get(%d, %q): %v", p, k, err)
	}
	return string(v), ok
}

func wantValue(t testing.TB, s *Store, p uint32, k, want string) {
	t.Helper()
	got, ok := getValue(t, s, p, k)
	if !ok {
		t.Fatalf("partition %d key %q: missing, want %q", p, k, want)
	}
	if got != want {
		t.Fatalf("partition %d key %q = %q, want %q", p, k, got, want)
	}
}

func wantMissing(t testing.TB, s *Store, p uint32, k string) {
	t.Helper()
	if got, ok := getValue(t, s, p, k); ok {
		t.Fatalf("partition %d key %q = %q, want missing", p, k, got)
	}
}

// memSink is an in-memory raft.SnapshotSink.
type memSink struct {
	bytes.Buffer
	closed, cancelled bool
	failAfter         int // if > 0, Write fails once the buffer would exceed this many bytes
}

var _ raft.SnapshotSink = (*memSink)(nil)

var errSinkFull = errors.New("sink full")

func (s *memSink) Write(p []byte) (int, error) {
	if s.failAfter > 0 && s.Len()+len(p) > s.failAfter {
		return 0, errSinkFull
	}
	return s.Buffer.Write(p)
}
func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Close() error  { s.closed = true; return nil }

// snapshotBytes snapshots f and persists the snapshot into memory.
func snapshotBytes(t testing.TB, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	defer snap.Release()
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatalf("Persist: %v", err)
	}
	if !sink.closed || sink.cancelled {
		t.Fatalf("after successful Persist: closed=%v cancelled=%v, want closed and not cancelled", sink.closed, sink.cancelled)
	}
	return sink.Bytes()
}

// trackingReader records whether Restore closed it.
type trackingReader struct {
	io.Reader
	closed bool
}

func (r *trackingReader) Close() error { r.closed = true; return nil }

func restore(f *FSM, data []byte) error {
	rc := &trackingReader{Reader: bytes.NewReader(data)}
	err := f.Restore(rc)
	if !rc.closed {
		return errors.Join(err, errors.New("Restore did not close its reader"))
	}
	return err
}
