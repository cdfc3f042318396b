package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// The relayer workload, short: a real shardkeeper binary relaying to the fake NEAR node. Every
// row is measured with intents landing and no error, and no intent landed twice (runRelayer
// checks the fake's ledger).
func TestRelayerWorkload(t *testing.T) {
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
	o := options{duration: time.Second, warmup: 200 * time.Millisecond, partitions: 4, relayerLatency: 10 * time.Millisecond}
	var rows []row
	if err := runRelayer(ctx, o, bin, tmp, &rows); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		workload, system string
		clients          int
	}{{relayerWorkload(1), sysSequential, 1}, {relayerWorkload(1), sysShardkeeper, 1}, {relayerWorkload(1), sysShardkeeper, 64}, {relayerWorkload(8), sysShardkeeper, 64}}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(rows), len(want), rows)
	}
	for i, w := range want {
		r := rows[i]
		if r.Workload != w.workload || r.System != w.system || r.Clients != w.clients || r.OpsPerS <= 0 || r.P50ms <= 0 || r.P99ms < r.P50ms || r.errorCount() != 0 {
			t.Errorf("row %d: %+v (errors %s), want %s on %s at %d with landings", i, r, r.errorSummary(), w.workload, w.system, w.clients)
		}
	}
	var out bytes.Buffer
	printRelayer(&out, rows, o.relayerLatency)
	for _, s := range []string{"1 key:  shardkeeper", "goal: one key ≥ 100 landed intents/s", "goal: 8 keys ≥ 7× one key"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("the comparison lacks %q:\n%s", s, out.String())
		}
	}
	t.Logf("\n%s", out.String())
}

// The comparison's verdicts follow the figures.
func TestPrintRelayerVerdicts(t *testing.T) {
	rows := []row{
		{Workload: relayerWorkload(1), System: sysSequential, Clients: 1, OpsPerS: 5, P50ms: 200},
		{Workload: relayerWorkload(1), System: sysShardkeeper, Clients: 1, OpsPerS: 10, P50ms: 99, P99ms: 101},
		{Workload: relayerWorkload(1), System: sysShardkeeper, Clients: 64, OpsPerS: 150},
		{Workload: relayerWorkload(8), System: sysShardkeeper, Clients: 64, OpsPerS: 900},
	}
	var out bytes.Buffer
	printRelayer(&out, rows, 50*time.Millisecond)
	for _, s := range []string{"shardkeeper 150/s vs a sequential sender 5.0/s: 30.0×", "one key ≥ 100 landed intents/s: 150/s — met", "900/s, 6.0× — NOT met"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("missing %q in:\n%s", s, out.String())
		}
	}
}
