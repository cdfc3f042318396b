// Package bench_test runs the benchmark workloads against an in-process node, so that one
// `go test -cpuprofile` profile holds the server and the load generator together (the
// server has no pprof endpoint):
//
//	go test -run '^$' -bench InProcess -benchtime 10s -cpuprofile /tmp/cpu.out ./bench/
//	go tool pprof -top /tmp/cpu.out
//
// BENCH_CLIENTS sets the concurrent clients (default 64).
package bench_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/bench/internal/httpconn"
	"github.com/shardkeeper/shardkeeper/bench/internal/load"
	"github.com/shardkeeper/shardkeeper/bench/internal/workload"
	"github.com/shardkeeper/shardkeeper/client"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/node/nodetest"
	"github.com/shardkeeper/shardkeeper/services/device"
	"github.com/shardkeeper/shardkeeper/services/servers"
)

// startNode starts a one-node server as skbench does (16 partitions, limits out of reach)
// and returns its base URL.
func startNode(b *testing.B) string {
	b.Helper()
	n := nodetest.Start(b, func(cfg *config.Config) {
		def := config.Default()
		cfg.NodeID = "bench"
		cfg.Partitions = 16
		cfg.RaftHeartbeatTimeout, cfg.RaftElectionTimeout = def.RaftHeartbeatTimeout, def.RaftElectionTimeout
		device.Settings.Update(cfg, func(o *device.Config) { o.MaxPending, o.MaxDevices = 1_000_000, 1_000_000 })
		servers.Settings.Update(cfg, func(o *servers.Config) { o.MaxServers = 1_000_000 })
	})
	url := "http://" + n.HTTPAddr()
	c, err := client.New([]string{url})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx, 10*time.Millisecond); err != nil {
		b.Fatal(err)
	}
	return url
}

func BenchmarkInProcess(b *testing.B) {
	clients := 64
	if s := os.Getenv("BENCH_CLIENTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("BENCH_CLIENTS=%q", s)
		}
		clients = n
	}
	url := startNode(b)
	tr := &httpconn.Transport{MaxIdlePerHost: 2 * clients, DialTimeout: 5 * time.Second}
	c, err := client.New([]string{url}, client.WithRetryPolicy(client.NoRetry), client.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		b.Fatal(err)
	}
	devs, err := workload.RegisterDevices(context.Background(), []string{url}, 256)
	if err != nil {
		b.Fatal(err)
	}
	// RunParallel starts parallelism·GOMAXPROCS goroutines: round clients up to a multiple.
	parallelism := (clients + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0)
	goroutines := parallelism * runtime.GOMAXPROCS(0)
	for _, w := range []struct {
		name string
		ops  func(n int) []load.Op
	}{
		{workload.Oracle, func(n int) []load.Op { return workload.OracleOps(c, n) }},
		{workload.Device, func(n int) []load.Op { return workload.DeviceOps(c, n, devs) }},
		{workload.Heartbeat, func(n int) []load.Op { return workload.HeartbeatOps(c, n, 1000) }},
	} {
		b.Run(fmt.Sprintf("%s/clients=%d", w.name, goroutines), func(b *testing.B) {
			ops := w.ops(goroutines)
			var next, failed atomic.Int64
			b.SetParallelism(parallelism)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				op := ops[next.Add(1)-1] // one op per goroutine: ops keep per-client state
				for pb.Next() {
					if err := op(context.Background()); err != nil {
						if failed.Add(1) == 1 {
							b.Errorf("%s: %v", w.name, err)
						}
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
			if n := failed.Load(); n > 0 {
				b.Errorf("%d of %d operations failed", n, b.N)
			}
		})
	}
}
