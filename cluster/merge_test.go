package cluster

import (
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/persistence"
)

// startSplitCluster starts three hosts of one group of eight partitions, writes "v<p>" in
// every partition, splits the group at 4 and returns the hosts and the new group, both
// groups led by the same host.
func startSplitCluster(t *testing.T) ([]*testHost, persistence.Group) {
	t.Helper()
	hosts := startThree(t)
	child, err := leaderOf(t, 0, hosts...).Split(0, 4, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	sameLeader(t, 0, child.ID, hosts)
	return hosts, child
}

// sameLeader waits until one host leads both l and r, moving r's leadership to l's leader.
func sameLeader(t *testing.T, l, r uint32, hosts []*testHost) *testHost {
	t.Helper()
	var lead *testHost
	waitFor(t, "one leader of both groups", func() bool {
		lead = leaderOf(t, l, hosts...)
		if lead.IsLeader(r) {
			return true
		}
		rl := leaderOf(t, r, hosts...)
		s := lead.server()
		_ = rl.Change(r, Action{Kind: TransferLeadership, Server: s.ID, Address: s.Address})
		return false
	})
	return lead
}

// A merge takes the right group in: every replica stops it and the left group serves its
// partitions with their state; the right group is gone from every node, also after a
// restart; a node added to the merged group later starts from a snapshot (it holds no
// instance of the group taken in, so it must not replay the merge).
func TestMergeOnline(t *testing.T) {
	hosts, child := startSplitCluster(t)
	lead := leaderOf(t, child.ID, hosts...)
	if err := lead.Propose(child.ID, putCmd(6, "k", "child")).Error(); err != nil {
		t.Fatal(err)
	}
	got, err := lead.Merge(0, child.ID, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got.First != 0 || got.End != 8 || got.Gen != 2 {
		t.Fatalf("Merge = %+v, want [0, 8) at generation 2", got)
	}
	if err := lead.Propose(0, putCmd(7, "k", "merged")).Error(); err != nil {
		t.Fatalf("a write of a partition taken in, to the merged group: %v", err)
	}
	if err := lead.Propose(child.ID, putCmd(6, "k", "late")).Error(); !errors.Is(err, actors.ErrNotApplied) {
		t.Fatalf("a write to the group taken in: %v, want not applied", err)
	}
	sameState(t, 0, hosts...)
	for _, h := range hosts {
		waitFor(t, h.ServerID()+" dropping the merged group", func() bool {
			gone, err := h.store.Gone(child.ID)
			return err == nil && gone && h.group(child.ID) == nil
		})
		if s := h.Spans(); len(s) != 1 || s[0] != got {
			t.Fatalf("%s holds %+v, want only %+v", h.ServerID(), s, got)
		}
		for p, want := range map[uint32]string{2: "v2", 5: "v5", 6: "child", 7: "merged"} {
			if v, _, _ := h.store.Get(p, []byte("k")); string(v) != want {
				t.Fatalf("%s: partition %d holds %q, want %q", h.ServerID(), p, v, want)
			}
		}
	}

	// A fourth node joins: the leader compacts its log past the merge first.
	n3 := startHost(t, filepath.Join(t.TempDir(), "3"), "n3@x")
	lead = leaderOf(t, 0, hosts...)
	s3 := n3.server()
	if err := lead.Change(0, Action{Kind: AddNonvoter, Server: s3.ID, Address: s3.Address}); err != nil {
		t.Fatal(err)
	}
	sameState(t, 0, append(hosts, n3)...)
	if v, _, _ := n3.store.Get(6, []byte("k")); string(v) != "child" {
		t.Fatalf("the added node's partition 6 holds %q, want the merged group's state", v)
	}

	// A replica restarts: the merged group stays gone, the left one holds the whole range.
	i := 0
	if hosts[0] == leaderOf(t, 0, hosts...) {
		i = 1
	}
	id, addr, dir := hosts[i].ServerID(), hosts[i].Addr(), hosts[i].dir
	hosts[i].stop()
	hosts[i] = startHostAt(t, dir, id, addr)
	if s := hosts[i].Spans(); len(s) != 1 || s[0] != got {
		t.Fatalf("after a restart %s holds %+v, want only %+v", id, s, got)
	}
	if err := leaderOf(t, 0, hosts...).Propose(0, putCmd(5, "k", "after restart")).Error(); err != nil {
		t.Fatal(err)
	}
	sameState(t, 0, append(hosts, n3)...)
}

// A merge that cannot finish — a voter that does not hold the freeze — is decided against
// in the left group's log and the right group reopens; its writes apply again.
func TestMergeAbandoned(t *testing.T) {
	hosts, child := startSplitCluster(t)
	lead := leaderOf(t, 0, hosts...)
	for i, h := range hosts {
		if h != lead {
			hosts[i].stop()
			break
		}
	}
	if _, err := lead.Merge(0, child.ID, 2*time.Second); err == nil {
		t.Fatal("a merge completed with a voter down")
	}
	if lead.group(child.ID).fsm.Frozen() != 0 {
		t.Fatal("the right group is still frozen after the merge was abandoned")
	}
	if err := lead.Propose(child.ID, putCmd(6, "k", "reopened")).Error(); err != nil {
		t.Fatalf("a write to the reopened group: %v", err)
	}
	if s := lead.group(0).fsm.Group(); s.End != 4 {
		t.Fatalf("the left group after an abandoned merge: %+v", s)
	}
}

// The merge decision: the smallest adjacent pair of groups on the same voters, while the
// cluster has more groups than it aims for; merged by the node leading both, or handed to
// the left group's leader first.
func TestDecideMerge(t *testing.T) {
	voters := func(ids ...string) []raft.Server {
		var out []raft.Server
		for _, id := range ids {
			out = append(out, raft.Server{ID: raft.ServerID(id), Suffrage: raft.Voter, Address: raft.ServerAddress(id)})
		}
		return out
	}
	all := voters("a", "b", "c")
	groups := []GroupInfo{
		{ID: 0, First: 0, End: 4, Servers: all},
		{ID: 1, First: 4, End: 6, Servers: all},
		{ID: 2, First: 6, End: 8, Servers: all},
		{ID: 3, First: 8, End: 16, Servers: voters("a", "b", "d")},
	}
	merges := map[string]bool{"a": true, "b": true, "c": true, "d": true}
	base := MergeSituation{Groups: groups, Nodes: 2, PerNode: 1, Merges: merges,
		Leaders: map[uint32]string{0: "a", 1: "b", 2: "a", 3: "c"}}
	for _, tc := range []struct {
		name  string
		edit  func(*MergeSituation)
		step  MergeStep
		l, r  uint32
		ofLed bool
	}{
		{"leads both", func(s *MergeSituation) { s.Led = []GroupInfo{groups[1], groups[2]} }, MergeHere, 1, 2, true},
		{"leads the right one", func(s *MergeSituation) { s.Led = []GroupInfo{groups[2]}; s.Leaders[1] = "c" }, HandRToLeft, 1, 2, true},
		{"leads the left one only", func(s *MergeSituation) { s.Led = []GroupInfo{groups[1]} }, NoMerge, 0, 0, false},
		{"enough groups", func(s *MergeSituation) { s.Led = []GroupInfo{groups[1], groups[2]}; s.Nodes = 4 }, NoMerge, 0, 0, false},
		{"an old release", func(s *MergeSituation) {
			s.Led = []GroupInfo{groups[1], groups[2]}
			s.Merges = map[string]bool{"a": true, "b": true}
		}, NoMerge, 0, 0, false},
		{"a non-voter", func(s *MergeSituation) {
			g := groups[2]
			g.Servers = append(voters("a", "b", "c"), raft.Server{ID: "d", Suffrage: raft.Nonvoter})
			s.Groups = []GroupInfo{groups[0], groups[1], g, groups[3]}
			s.Led = []GroupInfo{groups[0], groups[1]}
		}, MergeHere, 0, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base
			s.Leaders = map[uint32]string{0: "a", 1: "b", 2: "a", 3: "c"}
			tc.edit(&s)
			l, r, step, _ := DecideMerge(s)
			if step != tc.step || (step != NoMerge && (l.ID != tc.l || r.ID != tc.r)) {
				t.Fatalf("DecideMerge = %d %d step %d, want %d %d step %d", l.ID, r.ID, step, tc.l, tc.r, tc.step)
			}
		})
	}
}

// A group frozen by a merge its coordinator never finished (here: frozen by hand) answers no
// read (the left group may have taken its partitions in) and refuses configuration changes;
// its leader, leading the left group too, settles it: L's log decides against the merge and
// the group reopens.
func TestFrozenGroupSettled(t *testing.T) {
	hosts, child := startSplitCluster(t)
	lead := sameLeader(t, 0, child.ID, hosts)
	var servers []raft.Server
	for _, h := range hosts {
		servers = append(servers, h.server())
	}
	fr := persistence.Freeze{L: 0, ConfigIndex: lead.group(child.ID).fsm.ConfigIndex(), Servers: servers}
	if err := lead.Propose(child.ID, persistence.EncodeFreeze(nil, time.Now().UnixMilli(), fr)).Error(); err != nil {
		t.Fatal(err)
	}
	if g := lead.group(child.ID).fsm; g.Frozen() == 0 || g.FrozenFor() != 0 {
		t.Fatalf("after the freeze: frozen at %d for %#x", g.Frozen(), g.FrozenFor())
	}
	if err := lead.VerifyLeader(child.ID).Error(); !errors.Is(err, actors.ErrNotApplied) || !errors.Is(err, persistence.ErrFrozen) {
		t.Fatalf("a read check of a frozen group: %v, want not applied (frozen)", err)
	}
	s := servers[1]
	if err := lead.Change(child.ID, Action{Kind: RemoveServer, Server: s.ID}); !errors.Is(err, ErrMergeBusy) {
		t.Fatalf("a configuration change of a frozen group: %v, want ErrMergeBusy", err)
	}
	at := lead.group(child.ID).fsm.Frozen()
	if n, err := lead.ResolveFreeze(); err != nil || n != 1 {
		t.Fatalf("ResolveFreeze = %d %v, want one group settled", n, err)
	}
	if got := lead.group(child.ID).fsm.Frozen(); got != 0 || lead.group(0).fsm.Decision(child.ID, at) != 'a' {
		t.Fatalf("after ResolveFreeze: frozen at %d, group 0's decision %q; want reopened after an abort", got, lead.group(0).fsm.Decision(child.ID, at))
	}
	if err := lead.VerifyLeader(child.ID).Error(); err != nil {
		t.Fatalf("a read check after the group reopened: %v", err)
	}
	if err := lead.Propose(child.ID, putCmd(6, "k", "reopened")).Error(); err != nil {
		t.Fatalf("a write after the group reopened: %v", err)
	}
}

// A leader never sends a follower a merge entry that does not name it (it was added after
// the merge and holds no instance of the group taken in): it must start from a snapshot.
func TestGuardMerges(t *testing.T) {
	voters := []raft.Server{{ID: "a", Suffrage: raft.Voter}, {ID: "b", Suffrage: raft.Voter}}
	m := persistence.EncodeMerge(nil, 1, persistence.Merge{L: 0, R: persistence.Group{ID: 1, First: 4, End: 8}, At: 5, ConfigIndex: 3, Servers: voters})
	req := &raft.AppendEntriesRequest{Entries: []*raft.Log{
		{Index: 7, Type: raft.LogCommand, Data: putCmd(1, "k", "v")},
		{Index: 8, Type: raft.LogCommand, Data: m},
	}}
	if err := guardMerges("b", req); err != nil {
		t.Fatalf("a merge naming the follower: %v", err)
	}
	if err := guardMerges("c", req); err == nil {
		t.Fatal("a merge sent to a follower it does not name")
	}
	req.Entries = req.Entries[:1]
	if err := guardMerges("c", req); err != nil {
		t.Fatalf("no merge: %v", err)
	}
}

// A group whose whole range a newer group holds here (a snapshot's restore took it in and
// stopped before dropping it) is dropped when the node starts, for good.
func TestDropCovered(t *testing.T) {
	store, err := persistence.Open(filepath.Join(t.TempDir(), "db"), slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	stale := persistence.Group{ID: persistence.SplitID(4, 1), First: 4, End: 8, Gen: 1}
	if err := store.RecordGroup(stale); err != nil {
		t.Fatal(err)
	}
	merged := persistence.Group{ID: 0, First: 0, End: 8, Gen: 2}
	child := persistence.Group{ID: persistence.SplitID(8, 1), First: 8, End: 12, Gen: 1}
	h := &Host{cfg: HostConfig{Store: store, SnapshotDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)}}
	keep, err := h.dropCovered([]persistence.Group{merged, stale, child})
	if err != nil || len(keep) != 2 || keep[0] != merged || keep[1] != child {
		t.Fatalf("dropCovered = %+v %v, want the merged group and the one beside it", keep, err)
	}
	if gone, err := store.Gone(stale.ID); err != nil || !gone {
		t.Fatalf("the covered group is not gone: %v %v", gone, err)
	}
	if err := store.RecordGroup(stale); !errors.Is(err, persistence.ErrGone) {
		t.Fatalf("recording a gone group again: %v, want ErrGone", err)
	}
}

// A group that a node still holds although a merge took it in elsewhere (the node was not
// among the merge's replicas) is dropped, Raft state and all, when a newer group that starts
// at the same partition arrives; an older one arriving late changes nothing.
func TestEnsureGroupDropsStale(t *testing.T) {
	dir := t.TempDir()
	store, err := persistence.Open(filepath.Join(dir, "db"), slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	stale := persistence.Group{ID: persistence.SplitID(4, 1), First: 4, End: 8, Gen: 1}
	if err := store.RecordGroup(stale); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	th := startHost(t, dir, "n0@x")
	if th.group(stale.ID) == nil {
		t.Fatal("the recorded group did not open")
	}
	newer := persistence.Group{ID: persistence.SplitID(4, 2), First: 4, End: 8, Gen: 3}
	if err := th.EnsureGroup(newer); err != nil {
		t.Fatal(err)
	}
	if th.group(stale.ID) != nil || th.group(newer.ID) == nil {
		t.Fatalf("after the newer group arrived: stale open %v, newer open %v", th.group(stale.ID) != nil, th.group(newer.ID) != nil)
	}
	if gone, err := th.store.Gone(stale.ID); err != nil || !gone {
		t.Fatalf("the stale group is not gone: %v %v", gone, err)
	}
	late := persistence.Group{ID: persistence.SplitID(4, 3), First: 4, End: 8, Gen: 2}
	if err := th.EnsureGroup(late); err != nil || th.group(late.ID) != nil {
		t.Fatalf("an older group arriving late: %v, opened %v", err, th.group(late.ID) != nil)
	}
}

// A snapshot Raft stored (received from a leader) but the FSM never restored — the node
// stopped in between — is restored when the group opens: Raft, which does not restore on
// start, would otherwise start past state the FSM never got.
func TestOpenRestoresNewerSnapshot(t *testing.T) {
	src, err := persistence.Open(filepath.Join(t.TempDir(), "db"), slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	fsm, err := src.FSM(splitLayout.Group(0))
	if err != nil {
		t.Fatal(err)
	}
	fsm.ApplyBatch([]*raft.Log{{Index: 5, Term: 2, Type: raft.LogCommand, Data: putCmd(3, "k", "from the snapshot")}})
	snap, err := fsm.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	dir := t.TempDir()
	snaps, err := raft.NewFileSnapshotStore(filepath.Join(dir, "snaps", snapshotDirName(splitLayout.Group(0))), 2, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	self := raft.Server{Suffrage: raft.Voter, ID: "n0@x", Address: "127.0.0.1:1#n0@x"}
	_, trans := raft.NewInmemTransport("")
	sink, err := snaps.Create(raft.SnapshotVersionMax, 5, 2, raft.Configuration{Servers: []raft.Server{self}}, 1, trans)
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	th := startHost(t, dir, "n0@x")
	if in := th.Info(0); in.Applied != 5 {
		t.Fatalf("applied %d after opening, want the snapshot's 5", in.Applied)
	}
	if v, _, _ := th.store.Get(3, []byte("k")); string(v) != "from the snapshot" {
		t.Fatalf("partition 3 holds %q", v)
	}
}
