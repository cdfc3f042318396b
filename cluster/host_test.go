package cluster

import (
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/persistence"
)

// A host listening on every interface advertises AdvertiseHost with its bound port, and a
// one-node cluster bootstraps every partition with that address, never 0.0.0.0.
func TestHostAdvertisesAddress(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := persistence.Open(t.TempDir(), logger)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	h, err := NewHost(HostConfig{
		ServerID: "n1@abc", RaftAddr: "0.0.0.0:0", AdvertiseHost: "127.0.0.9", Partitions: 2,
		SnapshotDir: t.TempDir(), Store: store, HeartbeatTimeout: 100 * time.Millisecond,
		ElectionTimeout: 100 * time.Millisecond, SnapshotThreshold: 1024, BootstrapSelf: true,
		Logger: logger, LogLevel: slog.LevelError + 4,
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
			t.Fatalf("partition %d bootstrapped with %+v, want only %s", g.p, servers, RaftAddress(h.Addr(), "n1@abc"))
		}
	}
}
