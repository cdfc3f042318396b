package actors_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/test/await"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/actors/actortest"
	"github.com/shardkeeper/shardkeeper/cluster"
	"github.com/shardkeeper/shardkeeper/persistence"
	"github.com/shardkeeper/shardkeeper/test/testkinds"
)

// raftEnv is the production stack on one node: Pebble, Raft groups of two partitions each
// (actortest.Layout), runtime.
type raftEnv struct {
	rt    *actors.Runtime
	host  *cluster.Host
	store *persistence.Store
	reg   *prometheus.Registry
}

func startRaftEnv(t testing.TB, dir string, kinds ...actors.Kind) *raftEnv {
	t.Helper()
	store, err := persistence.Open(dir+"/pebble", actortest.Logger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	e := &raftEnv{store: store, reg: prometheus.NewRegistry()}
	if e.host, err = cluster.NewHost(cluster.HostConfig{
		ServerID: "n1", RaftAddr: "127.0.0.1:0", Layout: actortest.Layout, SnapshotDir: dir + "/snapshots",
		Store: store, HeartbeatTimeout: 100 * time.Millisecond, ElectionTimeout: 100 * time.Millisecond,
		SnapshotThreshold: 1024, BootstrapSelf: true, Logger: actortest.Logger(),
	}); err != nil {
		t.Fatal(err)
	}
	if e.rt, err = actors.New(actors.Options{Store: store, Replicator: e.host, Partitions: actortest.Partitions, Groups: actortest.Groups,
		Registerer: e.reg, Logger: actortest.Logger()}, kinds...); err != nil {
		t.Fatal(err)
	}
	e.host.Start(e.rt.SetLeader)
	actortest.WaitReady(t, e.rt, actortest.Partitions)
	return e
}

func (e *raftEnv) close(t testing.TB) {
	e.rt.Close()
	if err := e.host.Close(); err != nil {
		t.Error(err)
	}
	if err := e.store.Close(); err != nil {
		t.Error(err)
	}
}

// On real Raft: state and alarms survive a clean restart (crash restarts are tested with
// SIGKILL in test/crash), and log replay does not re-apply entries.
func TestRaftRestartKeepsStateAndAlarms(t *testing.T) {
	dir := t.TempDir()
	e := startRaftEnv(t, dir, testkinds.Counter())
	for range 100 {
		actortest.MustCall(t, e.rt, "counter", "r", "incr", nil)
	}
	setAlarm(t, e.rt, "r", "after-restart", time.Now().Add(300*time.Millisecond))
	e.close(t)

	e = startRaftEnv(t, dir, testkinds.Counter())
	defer e.close(t)
	if v := string(actortest.MustCall(t, e.rt, "counter", "r", "get", nil)); v != "100" {
		t.Fatalf("after restart counter = %s, want 100", v)
	}
	await.True(t, 10*time.Second, "alarm after restart", func() bool {
		return len(decodeFirings(t, string(actortest.MustCall(t, e.rt, "counter", "r", "fired", nil)))) == 1
	})
	if n := actortest.Metric(t, e.reg, "shardkeeper_alarms_fired_total", "", nil); n != 1 {
		t.Fatalf("fired %v times", n)
	}
}

// On real Raft: an effect runs after its commit and its result's writes commit; an effect in
// flight when the node stops is cancelled, and after the restart the actor's Activate finds
// its record pending in the replayed state and sends it again.
func TestRaftEffects(t *testing.T) {
	dir := t.TempDir()
	l := newLab()
	e := startRaftEnv(t, dir, outbox(l))
	actortest.MustCall(t, e.rt, outboxKind, "r", "send", []byte("first"))
	await.True(t, 10*time.Second, "the first effect handled", func() bool {
		return string(actortest.MustCall(t, e.rt, outboxKind, "r", "get", []byte("first"))) == "done:ok"
	})
	held := l.hold("second")
	actortest.MustCall(t, e.rt, outboxKind, "r", "send", []byte("second"))
	l.awaitStarts(t, "second", 1)
	e.close(t)
	if n := l.cancellations("second"); n != 1 {
		t.Fatalf("%d cancellations of the effect in flight at close", n)
	}
	held <- outcome{}

	e = startRaftEnv(t, dir, outbox(l))
	defer e.close(t)
	if v := string(actortest.MustCall(t, e.rt, outboxKind, "r", "reconciled", nil)); v != "second" {
		t.Fatalf("reconciled after restart = %q, want second", v)
	}
	await.True(t, 10*time.Second, "the re-sent effect handled", func() bool {
		return string(actortest.MustCall(t, e.rt, outboxKind, "r", "get", []byte("second"))) == "done:ok"
	})
	starts, hs := l.startsOf("second"), l.handlings("second")
	if len(starts) != 2 || len(hs) != 1 || hs[0].instance != starts[1] {
		t.Fatalf("starts %v handled %+v: want the result of the second start only", starts, hs)
	}
	if v := string(actortest.MustCall(t, e.rt, outboxKind, "r", "get", []byte("first"))); v != "done:ok" {
		t.Fatalf("first = %q after restart", v)
	}
}

// Coalescing on real Raft with 64 concurrent callers on one actor.
func TestRaftCoalescing(t *testing.T) {
	e := startRaftEnv(t, t.TempDir(), testkinds.Counter())
	defer e.close(t)
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 30 {
				actortest.MustCall(t, e.rt, "counter", "hot", "incr", nil)
			}
		}()
	}
	wg.Wait()
	commands := actortest.Metric(t, e.reg, "shardkeeper_commit_messages", "count", nil)
	messages := actortest.Metric(t, e.reg, "shardkeeper_commit_messages", "sum", nil)
	if messages != 64*30 || messages/commands < 4 {
		t.Fatalf("%v messages in %v commands: want 1920 messages, several per command", messages, commands)
	}
	t.Logf("%v messages in %v Raft commands (%.1f per command)", messages, commands, messages/commands)
}

// BenchmarkSpreadDurableWrites is the opposite load: 64 callers each writing to a random one
// of 256 actors (like the nonce oracle's shards), so batching must come from merging many
// actors' writes per partition.
func BenchmarkSpreadDurableWrites(b *testing.B) {
	e := startRaftEnv(b, b.TempDir(), testkinds.Counter())
	defer e.close(b)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				id := strconv.Itoa(int(i*7919) % 256)
				if _, err := e.rt.Call(context.Background(), "counter", id, actors.Request{Method: "incr"}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "acks/s")
	b.ReportMetric(float64(b.N)/actortest.Metric(b, e.reg, "shardkeeper_commit_messages", "count", nil), "msgs/cmd")
}

// BenchmarkHotActorDurableWrites measures acknowledged durable writes per second to one hot
// actor from 64 concurrent callers on one node: every acknowledged increment is in a synced
// Raft log entry on disk.
func BenchmarkHotActorDurableWrites(b *testing.B) {
	e := startRaftEnv(b, b.TempDir(), testkinds.Counter())
	defer e.close(b)
	const callers = 64
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if _, err := e.rt.Call(context.Background(), "counter", "hot", actors.Request{Method: "incr"}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "acks/s")
	commands := actortest.Metric(b, e.reg, "shardkeeper_commit_messages", "count", nil)
	b.ReportMetric(float64(b.N)/commands, "msgs/cmd")
}
