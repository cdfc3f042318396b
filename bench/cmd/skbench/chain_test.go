package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// The chain workload, short: a real shardkeeper binary anchoring on the fake Arweave node.
// Every row is measured with events taken and no error, and no event taken twice (runChain
// checks the fake's takes).
func TestChainWorkload(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs shardkeeper")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	bin, err := buildShardkeeper(ctx, tmp)
	if err != nil {
		t.Fatal(err)
	}
	o := options{partitions: 4, chainLatency: 20 * time.Millisecond, chainDuration: 2 * time.Second, chainWarmup: 500 * time.Millisecond, chainWindow: 32}
	var rows []row
	if err := runChain(ctx, o, bin, tmp, &rows); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		workload, system string
		clients          int
	}{{chainWorkload(1), sysCron, 1}, {chainWorkload(1), sysShardkeeper, 1}, {chainWorkload(256), sysShardkeeper, 256}}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(rows), len(want), rows)
	}
	for i, w := range want {
		r := rows[i]
		if r.Workload != w.workload || r.System != w.system || r.Clients != w.clients || r.OpsPerS <= 0 || r.P50ms <= 0 || r.P99ms < r.P50ms || r.errorCount() != 0 {
			t.Errorf("row %d: %+v (errors %s), want %s on %s at %d with events taken", i, r, r.errorSummary(), w.workload, w.system, w.clients)
		}
	}
	if rows[2].OpsPerS <= rows[1].OpsPerS {
		t.Errorf("256 posts in flight (%.1f/s) no faster than one (%.1f/s)", rows[2].OpsPerS, rows[1].OpsPerS)
	}
	var out bytes.Buffer
	printChain(&out, rows, o.chainLatency, o.chainWindow)
	for _, s := range []string{"max-in-flight 256: shardkeeper", "vs a sequential uploader", "goal: ≥ 100 events/s anchored"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("the comparison lacks %q:\n%s", s, out.String())
		}
	}
	t.Logf("\n%s", out.String())
}

// The comparison's verdict follows the figures.
func TestPrintChainVerdict(t *testing.T) {
	rows := []row{
		{Workload: chainWorkload(1), System: sysCron, Clients: 1, OpsPerS: 0.2},
		{Workload: chainWorkload(1), System: sysShardkeeper, Clients: 1, OpsPerS: 0.5},
		{Workload: chainWorkload(256), System: sysShardkeeper, Clients: 256, OpsPerS: 90, P50ms: 3000, P99ms: 5000},
	}
	var out bytes.Buffer
	printChain(&out, rows, 2*time.Second, 512)
	for _, s := range []string{"shardkeeper 90.0/s vs a sequential uploader 0.20/s: 450×", "max-in-flight 1: 0.50/s", "90.0/s — NOT met"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("missing %q in:\n%s", s, out.String())
		}
	}
}
