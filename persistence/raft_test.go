package persistence

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// The end-to-end tests run a real single-voter hashicorp/raft group on the Store.

const raftPartition = 7

func raftConfig() *raft.Config {
	conf := raft.DefaultConfig()
	conf.LocalID = "n1"
	conf.HeartbeatTimeout = 50 * time.Millisecond
	conf.ElectionTimeout = 50 * time.Millisecond
	conf.LeaderLeaseTimeout = 50 * time.Millisecond
	conf.CommitTimeout = 5 * time.Millisecond
	conf.NoSnapshotRestoreOnStart = true
	// Compact aggressively on the snapshots the test takes, and take no others.
	conf.TrailingLogs = 4
	conf.SnapshotThreshold = 1 << 40
	conf.SnapshotInterval = time.Hour
	conf.LogOutput = io.Discard
	return conf
}

// startRaft starts partition raftPartition's Raft group on s with fsm, bootstrapping it
// first if asked, and waits until it is the leader.
func startRaft(t *testing.T, s *Store, fsm raft.FSM, snaps raft.SnapshotStore, bootstrap bool) *raft.Raft {
	t.Helper()
	conf := raftConfig()
	addr, trans := raft.NewInmemTransport("n1")
	logs, stable := s.LogStore(raftPartition), s.StableStore(raftPartition)
	if bootstrap {
		cfg := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: conf.LocalID, Address: addr}}}
		if err := raft.BootstrapCluster(conf, logs, stable, snaps, trans, cfg); err != nil {
			t.Fatalf("BootstrapCluster: %v", err)
		}
	}
	r, err := raft.NewRaft(conf, fsm, logs, stable, snaps, trans)
	if err != nil {
		t.Fatalf("NewRaft: %v", err)
	}
	// Registered after the store's cleanup, so it runs before the store closes.
	t.Cleanup(func() { _ = r.Shutdown().Error() })
	timeout := time.After(10 * time.Second)
	for {
		select {
		case leader := <-r.LeaderCh():
			if leader {
				return r
			}
		case <-timeout:
			t.Fatalf("no leadership after 10s; state %v", r.State())
		}
	}
}

// raftApply applies c, its ops in raftPartition.
func raftApply(t *testing.T, r *raft.Raft, c Command) raft.ApplyFuture {
	t.Helper()
	for i := range c.Ops {
		c.Ops[i].Partition = raftPartition
	}
	f := r.Apply(c.Encode(nil), 5*time.Second)
	if err := f.Error(); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if resp := f.Response(); resp != nil {
		t.Fatalf("Apply response: %v", resp)
	}
	return f
}

func barrier(t *testing.T, r *raft.Raft) {
	t.Helper()
	if err := r.Barrier(5 * time.Second).Error(); err != nil {
		t.Fatalf("Barrier: %v", err)
	}
}

func keyName(i int) string { return fmt.Sprintf("key/%03d", i) }

// stateString is dumpFSM without testing.TB, for use off the test goroutine.
func stateString(s *Store, f *FSM) (string, error) {
	var sb strings.Builder
	fmt.Fprintf(&sb, "applied=%d time=%d\n", f.AppliedIndex(), f.LastTime())
	err := s.Scan(f.first, nil, nil, false, func(k, v []byte) bool {
		fmt.Fprintf(&sb, "%q=%q\n", k, v)
		return true
	})
	return sb.String(), err
}

// replayCheckFSM delegates to a real FSM and watches the entries at or below threshold (the
// applied index before a restart) that raft delivers: it counts them and checks that
// applying them changes neither the state nor the FSM's metadata.
type replayCheckFSM struct {
	*FSM
	threshold uint64

	mu       sync.Mutex
	replayed int      // entries with index <= threshold that reached ApplyBatch
	changes  []string // what applying them changed; must stay empty
	restores int
}

var _ raft.BatchingFSM = (*replayCheckFSM)(nil)

func (w *replayCheckFSM) Apply(l *raft.Log) any { return w.ApplyBatch([]*raft.Log{l})[0] }

func (w *replayCheckFSM) ApplyBatch(logs []*raft.Log) []any {
	resp := make([]any, 0, len(logs))
	// Raft delivers entries in index order, so the old ones form a prefix of the batch. Pass
	// them to the FSM one at a time so that the effect of each is observed on its own: a
	// replayed blind write shows up (e.g. "last" going back from n to i) even when the
	// replay as a whole would end in the same state.
	i := 0
	for ; i < len(logs) && logs[i].Index <= w.threshold; i++ {
		before, err1 := stateString(w.s, w.FSM)
		r := w.FSM.ApplyBatch(logs[i : i+1])
		after, err2 := stateString(w.s, w.FSM)
		resp = append(resp, r...)
		w.mu.Lock()
		w.replayed++
		switch {
		case err1 != nil || err2 != nil:
			w.changes = append(w.changes, fmt.Sprintf("scan errors: %v, %v", err1, err2))
		case before != after:
			w.changes = append(w.changes, fmt.Sprintf("entry %d changed the FSM from\n%s\nto\n%s",
				logs[i].Index, before, after))
		case r[0] != nil:
			w.changes = append(w.changes, fmt.Sprintf("replayed entry %d: response %v", logs[i].Index, r[0]))
		}
		w.mu.Unlock()
	}
	if i < len(logs) {
		resp = append(resp, w.FSM.ApplyBatch(logs[i:])...)
	}
	return resp
}

func (w *replayCheckFSM) Restore(rc io.ReadCloser) error {
	w.mu.Lock()
	w.restores++
	w.mu.Unlock()
	return w.FSM.Restore(rc)
}

// TestRaftEndToEnd runs a single-voter Raft group on the store, snapshots and compacts its
// log midway, restarts it on the same directory and checks that the replayed log suffix is
// skipped by the FSM rather than applied again.
func TestRaftEndToEnd(t *testing.T) {
	const n = 40
	dir, snapDir := t.TempDir(), t.TempDir()
	const timeBase = 1700000000000

	s, closeS := openStore(t, dir)
	fsm := newFSM(t, s, raftPartition)
	snaps, err := raft.NewFileSnapshotStore(snapDir, 2, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r := startRaft(t, s, fsm, snaps, true)

	indexes := make([]uint64, n+1) // raft index of command i
	put := func(i int) {
		f := raftApply(t, r, Command{Time: timeBase + int64(i), Ops: []Op{
			{Key: []byte(keyName(i)), Value: []byte(strconv.Itoa(i))},
			{Key: []byte("last"), Value: []byte(strconv.Itoa(i))},
		}})
		indexes[i] = f.Index()
		// The FSM has applied the entry by the time its future returns.
		if got := fsm.AppliedIndex(); got != f.Index() {
			t.Fatalf("command %d at index %d: FSM applied index %d", i, f.Index(), got)
		}
	}
	for i := 1; i <= n/2; i++ {
		put(i)
	}
	sf := r.Snapshot()
	if err := sf.Error(); err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	meta, rc, err := sf.Open()
	if err != nil {
		t.Fatal(err)
	}
	rc.Close()
	if meta.Index < indexes[n/2] {
		t.Fatalf("snapshot index %d below the last applied command %d", meta.Index, indexes[n/2])
	}
	// The snapshot let raft compact the log.
	first, err := s.LogStore(raftPartition).FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	if first <= 1 || first > meta.Index {
		t.Fatalf("after the snapshot at %d the log starts at %d: not compacted", meta.Index, first)
	}
	for i := n/2 + 1; i <= n; i++ {
		put(i)
	}
	barrier(t, r)

	preApplied := fsm.AppliedIndex()
	if preApplied != indexes[n] {
		t.Fatalf("FSM applied index %d, want the last command's index %d", preApplied, indexes[n])
	}
	wantState, err := stateString(s, fsm)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Shutdown().Error(); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	closeS()

	// Restart on the same directories.
	s, _ = openStore(t, dir)
	fsm = newFSM(t, s, raftPartition)
	if got, _ := stateString(s, fsm); got != wantState {
		t.Fatalf("state after reopening the store:\n%s\nwant:\n%s", got, wantState)
	}
	snaps, err = raft.NewFileSnapshotStore(snapDir, 2, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if list, err := snaps.List(); err != nil || len(list) != 1 || list[0].Index != meta.Index {
		t.Fatalf("snapshot store after restart: %v, %v; want the snapshot at %d", list, err, meta.Index)
	}
	w := &replayCheckFSM{FSM: fsm, threshold: preApplied}
	r = startRaft(t, s, w, snaps, false)
	barrier(t, r)

	w.mu.Lock()
	replayed, changes, restores := w.replayed, w.changes, w.restores
	w.mu.Unlock()
	if restores != 0 {
		t.Fatalf("raft restored a snapshot %d times despite NoSnapshotRestoreOnStart", restores)
	}
	// Raft replays the entries after its snapshot: the n/2 later commands.
	if want := n - n/2; replayed != want {
		t.Fatalf("%d entries at or below the applied index %d reached the FSM, want %d (those after the snapshot at %d)",
			replayed, preApplied, want, meta.Index)
	}
	for _, c := range changes {
		t.Errorf("a replayed entry was applied again: %s", c)
	}
	got, err := stateString(s, fsm)
	if err != nil {
		t.Fatal(err)
	}
	if got != wantState {
		t.Fatalf("state after restart:\n%s\nwant:\n%s", got, wantState)
	}
	for i := 1; i <= n; i++ {
		wantValue(t, s, raftPartition, keyName(i), strconv.Itoa(i))
	}
	wantValue(t, s, raftPartition, "last", strconv.Itoa(n))

	// Raft delivers only command and configuration entries to a BatchingFSM (not its no-op
	// and barrier entries), so the FSM's applied index is the last such entry at or below
	// raft's, rather than raft's itself.
	rApplied := r.AppliedIndex()
	if fsm.AppliedIndex() != preApplied || rApplied < preApplied {
		t.Fatalf("after restart FSM applied %d, raft applied %d; want FSM at %d", fsm.AppliedIndex(), rApplied, preApplied)
	}
	if last := lastFSMEntry(t, s.LogStore(raftPartition), rApplied); fsm.AppliedIndex() != last {
		t.Fatalf("FSM applied index %d, but the last command/configuration entry up to raft's applied index %d is %d",
			fsm.AppliedIndex(), rApplied, last)
	}

	// New commands apply normally after the restart.
	f := raftApply(t, r, Command{Time: timeBase + n + 1, Ops: []Op{{Key: []byte("after"), Value: []byte("restart")}}})
	if fsm.AppliedIndex() != f.Index() || fsm.LastTime() != timeBase+n+1 {
		t.Fatalf("after a new command: FSM applied %d time %d, want %d %d", fsm.AppliedIndex(), fsm.LastTime(), f.Index(), timeBase+n+1)
	}
	wantValue(t, s, raftPartition, "after", "restart")
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.replayed != replayed {
		t.Fatalf("a new entry was counted as a replay")
	}
}

// lastFSMEntry returns the index of the last command or configuration entry at or below max.
func lastFSMEntry(t *testing.T, l *LogStore, max uint64) uint64 {
	t.Helper()
	first, err := l.FirstIndex()
	if err != nil {
		t.Fatal(err)
	}
	for i := max; i >= first && i > 0; i-- {
		var log raft.Log
		if err := l.GetLog(i, &log); err != nil {
			t.Fatalf("GetLog(%d): %v", i, err)
		}
		if log.Type == raft.LogCommand || log.Type == raft.LogConfiguration {
			return i
		}
	}
	t.Fatalf("no command or configuration entry in %d..%d", first, max)
	return 0
}

// TestRaftSnapshotRestoresOnFreshReplica takes a snapshot through raft, as a leader does
// before sending InstallSnapshot to a lagging follower, and restores it into an empty store,
// as the follower does.
func TestRaftSnapshotRestoresOnFreshReplica(t *testing.T) {
	s := newStore(t)
	fsm := newFSM(t, s, raftPartition)
	r := startRaft(t, s, fsm, raft.NewInmemSnapshotStore(), true)
	for i := 1; i <= 10; i++ {
		raftApply(t, r, Command{Time: int64(i), Ops: []Op{{Key: []byte(keyName(i)), Value: []byte("v")}}})
	}
	sf := r.Snapshot()
	if err := sf.Error(); err != nil {
		t.Fatal(err)
	}
	_, rc, err := sf.Open()
	if err != nil {
		t.Fatal(err)
	}
	want, err := stateString(s, fsm)
	if err != nil {
		t.Fatal(err)
	}

	b := newStore(t)
	fb := newFSM(t, b, raftPartition)
	if err := fb.Restore(rc); err != nil {
		t.Fatalf("Restore of a raft-taken snapshot: %v", err)
	}
	if got, _ := stateString(b, fb); got != want {
		t.Fatalf("restored:\n%s\nwant:\n%s", got, want)
	}
	checkBounds(t, b.LogStore(raftPartition), 0, 0)
}
