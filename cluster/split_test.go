package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/persistence"
)

// splitLayout is the layout of the split tests: one group of eight partitions.
var splitLayout = persistence.Layout{Partitions: 8, Groups: 1}

// testHost is one node of an in-process cluster of real Raft over TCP.
type testHost struct {
	*Host
	dir   string
	store *persistence.Store
}

func startHost(t *testing.T, dir, id string) *testHost { return startHostAt(t, dir, id, "127.0.0.1:0") }

// startHostAt starts a host listening on addr (a restarted node keeps its address).
func startHostAt(t *testing.T, dir, id, addr string) *testHost {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	store, err := persistence.Open(filepath.Join(dir, "db"), logger, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewHost(HostConfig{
		ServerID: id, RaftAddr: addr, Layout: splitLayout, SnapshotDir: filepath.Join(dir, "snaps"), Store: store,
		HeartbeatTimeout: 200 * time.Millisecond, ElectionTimeout: 200 * time.Millisecond, SnapshotThreshold: 1 << 20,
		Logger: logger,
	})
	if err != nil {
		store.Close()
		t.Fatal(err)
	}
	h.Start(nil)
	th := &testHost{Host: h, dir: dir, store: store}
	t.Cleanup(th.stop)
	return th
}

// stop closes the host and its store; idempotent.
func (th *testHost) stop() {
	if th.Host == nil {
		return
	}
	_ = th.Host.Close()
	_ = th.store.Close()
	th.Host = nil
}

func (th *testHost) server() raft.Server {
	return raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(th.ServerID()), Address: RaftAddress(th.Addr(), th.ServerID())}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// leaderOf waits for a leader of group g among hosts and returns it.
func leaderOf(t *testing.T, g uint32, hosts ...*testHost) *testHost {
	t.Helper()
	var out *testHost
	waitFor(t, fmt.Sprintf("a leader of group %#x", g), func() bool {
		for _, h := range hosts {
			if h.Host != nil && h.IsLeader(g) {
				out = h
				return true
			}
		}
		return false
	})
	return out
}

func putCmd(p uint32, k, v string) []byte {
	c := persistence.Command{Time: time.Now().UnixMilli(), Ops: []persistence.Op{{Partition: p, Key: []byte(k), Value: []byte(v)}}}
	return c.Encode(nil)
}

// startThree starts three hosts of one group of eight partitions (splitLayout) and writes
// "v<p>" in every partition.
func startThree(t *testing.T) []*testHost {
	t.Helper()
	root := t.TempDir()
	var hosts []*testHost
	for i := range 3 {
		hosts = append(hosts, startHost(t, filepath.Join(root, fmt.Sprint(i)), fmt.Sprintf("n%d@x", i)))
	}
	if err := hosts[0].Bootstrap(func(uint32) []raft.Server {
		return []raft.Server{hosts[0].server(), hosts[1].server(), hosts[2].server()}
	}); err != nil {
		t.Fatal(err)
	}
	lead := leaderOf(t, 0, hosts...)
	for p := range uint32(8) {
		if err := lead.Propose(0, putCmd(p, "k", fmt.Sprint("v", p))).Error(); err != nil {
			t.Fatal(err)
		}
	}
	return hosts
}

// sameState waits until every host holds group g at the same applied index with the same
// state hashes, and returns that index.
func sameState(t *testing.T, g uint32, hosts ...*testHost) uint64 {
	t.Helper()
	var at uint64
	waitFor(t, fmt.Sprintf("equal state of group %#x on %d hosts", g, len(hosts)), func() bool {
		var first [][32]byte
		for i, h := range hosts {
			applied, sums, err := h.StateHashes(g)
			if err != nil {
				return false
			}
			if i == 0 {
				at, first = applied, sums
				continue
			}
			if applied != at || fmt.Sprint(sums) != fmt.Sprint(first) {
				return false
			}
		}
		return true
	})
	return at
}

// A split is a command in the group's log: every replica cuts the range and opens the new
// group from the same birth, which elects a leader among the same voters and serves the
// partitions it took. The old group refuses them from then on, as not applied (the caller
// may retry at the new group). A node added to the new group later catches up by
// snapshot, never by replaying the new group's log from its start, and a replica that
// restarts opens both groups again.
func TestSplitOnline(t *testing.T) {
	hosts := startThree(t)
	lead := leaderOf(t, 0, hosts...)
	child, err := lead.Split(0, 5, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if child.First != 5 || child.End != 8 || child.ID != persistence.SplitID(5, 1) {
		t.Fatalf("Split = %+v, want [5, 8) as %#x", child, persistence.SplitID(5, 1))
	}
	if _, err := lead.Split(0, 6, time.Second); !errors.Is(err, persistence.ErrSplitRefused) {
		t.Fatalf("splitting at a partition the group gave away: %v, want ErrSplitRefused", err)
	}
	err = lead.Propose(0, putCmd(6, "k", "late")).Error()
	if !errors.Is(err, actors.ErrNotApplied) || !errors.Is(err, persistence.ErrMoved) {
		t.Fatalf("a write of a moved partition to the old group: %v, want not applied", err)
	}
	clead := leaderOf(t, child.ID, hosts...)
	if err := clead.Propose(child.ID, putCmd(6, "k", "child")).Error(); err != nil {
		t.Fatal(err)
	}
	if err := clead.Propose(child.ID, putCmd(2, "k", "wrong group")).Error(); !errors.Is(err, persistence.ErrMoved) {
		t.Fatalf("a write of the old group's partition to the new one: %v, want ErrMoved", err)
	}
	sameState(t, 0, hosts...)
	sameState(t, child.ID, hosts...)
	for _, h := range hosts {
		if v, ok, err := h.store.Get(6, []byte("k")); err != nil || !ok || string(v) != "child" {
			t.Fatalf("%s: partition 6 holds %q %v %v, want the new group's write", h.ServerID(), v, ok, err)
		}
		if v, _, _ := h.store.Get(5, []byte("k")); string(v) != "v5" {
			t.Fatalf("%s: partition 5 holds %q, want the state from before the split", h.ServerID(), v)
		}
	}

	// A fourth node joins the new group: by snapshot, as its log starts after the birth.
	n3 := startHost(t, filepath.Join(t.TempDir(), "3"), "n3@x")
	if err := n3.EnsureGroup(child); err != nil {
		t.Fatal(err)
	}
	clead = leaderOf(t, child.ID, hosts...)
	s3 := n3.server()
	if err := clead.Change(child.ID, Action{Kind: AddNonvoter, Server: s3.ID, Address: s3.Address}); err != nil {
		t.Fatal(err)
	}
	sameState(t, child.ID, append(hosts, n3)...)
	if v, _, _ := n3.store.Get(5, []byte("k")); string(v) != "v5" {
		t.Fatalf("the added node's partition 5 holds %q, want v5 from the snapshot", v)
	}
	if in := n3.Info(child.ID); in.Applied <= persistence.BirthIndex {
		t.Fatalf("added node applied %d", in.Applied)
	}

	// A replica restarts: it opens the new group again (recorded with the node) and both
	// groups catch up.
	i := 0
	if hosts[0] == leaderOf(t, 0, hosts...) {
		i = 1
	}
	follower := hosts[i]
	id, addr := follower.ServerID(), follower.Addr()
	follower.stop()
	clead = leaderOf(t, child.ID, hosts...)
	if err := clead.Propose(child.ID, putCmd(7, "k", "while down")).Error(); err != nil {
		t.Fatal(err)
	}
	hosts[i] = startHostAt(t, follower.dir, id, addr)
	if in := hosts[i].Info(child.ID); !in.Replica {
		t.Fatalf("after a restart the new group is %+v, want a replica", in)
	}
	sameState(t, child.ID, append(hosts, n3)...)
	sameState(t, 0, hosts...)
}

// A node that stopped after applying a split and before opening the new group (the split
// is durable, the birth is not) opens it at the next start, from the same birth.
func TestSplitBirthAfterCrash(t *testing.T) {
	dir := t.TempDir()
	logger := slog.New(slog.DiscardHandler)
	store, err := persistence.Open(filepath.Join(dir, "db"), logger, nil)
	if err != nil {
		t.Fatal(err)
	}
	fsm, err := store.FSM(splitLayout.Group(0))
	if err != nil {
		t.Fatal(err)
	}
	self := raft.Server{Suffrage: raft.Voter, ID: "n0@x", Address: "127.0.0.1:1#n0@x"}
	child := persistence.SplitID(4, 1)
	fsm.ApplyBatch([]*raft.Log{
		{Index: 1, Term: 1, Type: raft.LogCommand, Data: putCmd(6, "k", "before")},
		{Index: 2, Term: 1, Type: raft.LogCommand, Data: persistence.EncodeSplit(nil, 1, persistence.Split{At: 4, Child: child, Servers: []raft.Server{self}})},
	})
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	th := startHost(t, dir, "n0@x")
	in := th.Info(child)
	if !in.Replica || in.LastIndex != persistence.BirthIndex || in.Term != persistence.BirthIndex {
		t.Fatalf("new group after the restart: %+v, want a replica at its birth", in)
	}
	if v, _, _ := th.store.Get(6, []byte("k")); string(v) != "before" {
		t.Fatalf("partition 6 holds %q", v)
	}
}
