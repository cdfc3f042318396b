package cluster

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/persistence"
)

// A host listening on every interface advertises the address Advertise gives, and a
// one-node cluster bootstraps every group with that address, never 0.0.0.0.
func TestHostAdvertisesAddress(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := persistence.Open(t.TempDir(), logger, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	h, err := NewHost(HostConfig{
		ServerID: "n1@abc", RaftAddr: "0.0.0.0:0", Advertise: config.Config{AdvertiseAddr: "127.0.0.9"}.Advertised, Layout: persistence.Layout{Partitions: 4, Groups: 2},
		SnapshotDir: t.TempDir(), Store: store, HeartbeatTimeout: 100 * time.Millisecond,
		ElectionTimeout: 100 * time.Millisecond, SnapshotThreshold: 1024, BootstrapSelf: true,
		Logger: logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	host, port, err := net.SplitHostPort(h.Addr())
	if err != nil || host != "127.0.0.9" || port == "0" {
		t.Fatalf("Addr() = %q, want 127.0.0.9:<bound port>", h.Addr())
	}
	for _, g := range h.groups {
		f := g.raft.GetConfiguration()
		if err := f.Error(); err != nil {
			t.Fatal(err)
		}
		servers := f.Configuration().Servers
		if len(servers) != 1 || servers[0].Address != RaftAddress(h.Addr(), "n1@abc") {
			t.Fatalf("group %d bootstrapped with %+v, want only %s", g.ID, servers, RaftAddress(h.Addr(), "n1@abc"))
		}
	}
}

// raftConfig passes every setting through, and a zero one keeps hashicorp/raft's default.
func TestRaftConfig(t *testing.T) {
	cfg := HostConfig{ServerID: "n1@abc", HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 400 * time.Millisecond,
		CommitTimeout: 700 * time.Millisecond, SnapshotThreshold: 32, SnapshotInterval: time.Second, TrailingLogs: 16}
	rc := raftConfig(cfg, hclog.NewNullLogger())
	if rc.LocalID != "n1@abc" || rc.HeartbeatTimeout != 300*time.Millisecond || rc.ElectionTimeout != 400*time.Millisecond ||
		rc.LeaderLeaseTimeout != 300*time.Millisecond || rc.CommitTimeout != 700*time.Millisecond || rc.SnapshotThreshold != 32 ||
		rc.SnapshotInterval != time.Second || rc.TrailingLogs != 16 || !rc.NoSnapshotRestoreOnStart || !rc.BatchApplyCh {
		t.Fatalf("raftConfig(%+v) = %+v", cfg, rc)
	}
	if err := raft.ValidateConfig(rc); err != nil {
		t.Fatal(err)
	}
	def := raft.DefaultConfig()
	cfg.CommitTimeout, cfg.SnapshotInterval, cfg.TrailingLogs = 0, 0, 0
	rc = raftConfig(cfg, hclog.NewNullLogger())
	if rc.CommitTimeout != def.CommitTimeout || rc.SnapshotInterval != def.SnapshotInterval || rc.TrailingLogs != def.TrailingLogs {
		t.Fatalf("zero settings gave %v %v %d, want raft's defaults %v %v %d", rc.CommitTimeout, rc.SnapshotInterval, rc.TrailingLogs,
			def.CommitTimeout, def.SnapshotInterval, def.TrailingLogs)
	}
}

// Apply errors after which raft certainly did not append the entry are not-applied (the
// router may resend); the others leave the outcome unknown.
func TestClassifyApplyError(t *testing.T) {
	for _, tt := range []struct {
		err        error
		notApplied bool
	}{
		{raft.ErrNotLeader, true},
		{raft.ErrLeadershipTransferInProgress, true},
		{raft.ErrLeadershipLost, false},
		{raft.ErrRaftShutdown, false},
		{raft.ErrEnqueueTimeout, false},
	} {
		got := classifyApplyError(tt.err)
		if errors.Is(got, actors.ErrNotApplied) != tt.notApplied || !errors.Is(got, tt.err) {
			t.Errorf("classifyApplyError(%v) = %v; not applied: want %v", tt.err, got, tt.notApplied)
		}
	}
}
