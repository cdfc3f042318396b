// Package nodetest starts in-process shardkeeper nodes for tests: real Pebble, real Raft and
// the real HTTP API with every service's kinds, on loopback ports chosen by the kernel.
package nodetest

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/node"
	"github.com/shardkeeper/shardkeeper/services"
	"github.com/shardkeeper/shardkeeper/services/all"
)

// Start starts a one-node server with 4 partitions, fast Raft timeouts and no shutdown
// drain, in a fresh data directory; mutate (if any) adjusts the configuration first. It
// returns once the node is ready and shuts it down when the test ends.
//
// Only one node per test process should use protoactor remoting at a time in race-detector
// runs (see ARCHITECTURE.md); run multi-node tests as processes (test/proc).
func Start(t testing.TB, mutate func(*config.Config)) *node.Node {
	t.Helper()
	return StartWith(t, all.Services(), mutate)
}

// StartWith is Start serving ss instead of the binary's services.
func StartWith(t testing.TB, ss []services.Service, mutate func(*config.Config)) *node.Node {
	t.Helper()
	cfg := config.Default()
	cfg.NodeID = "test"
	cfg.DataDir = t.TempDir()
	cfg.HTTPAddr, cfg.RaftAddr, cfg.GossipAddr, cfg.RemoteAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.Partitions = 4
	cfg.RaftHeartbeatTimeout, cfg.RaftElectionTimeout = 100*time.Millisecond, 100*time.Millisecond
	cfg.LogLevel = "error"
	cfg.ShutdownDrain = 0     // nothing to drain in a test
	cfg.DiskBallast = 1 << 20 // a test's node writes little; a ballast per test costs time
	if mutate != nil {
		mutate(&cfg)
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	n, err := node.Start(cfg, node.Options{Logger: logger, Services: ss})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := n.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for n.Ready() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("node not ready: %v", n.Ready())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return n
}
