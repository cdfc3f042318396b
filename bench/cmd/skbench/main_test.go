package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/bench/internal/load"
	"github.com/shardkeeper/shardkeeper/client"
)

func TestParseFlags(t *testing.T) {
	o, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.duration != 5*time.Second || !slices.Equal(o.clients, []int{1, 16, 64, 256}) ||
		!slices.Equal(o.workloads, []string{"oracle", "device", "heartbeat"}) || o.skipRedis || o.partitions != 16 {
		t.Fatalf("defaults %+v", o)
	}
	o, err = parseFlags([]string{"--duration", "2s", "--clients", "4, 8", "--workloads", "device,oracle,device", "--skip-redis", "--url", "http://a:1,http://b:2"})
	if err != nil {
		t.Fatal(err)
	}
	if o.duration != 2*time.Second || !slices.Equal(o.clients, []int{4, 8}) || !slices.Equal(o.workloads, []string{"device", "oracle"}) ||
		!o.skipRedis || !slices.Equal(o.urls, []string{"http://a:1", "http://b:2"}) {
		t.Fatalf("parsed %+v", o)
	}
	for _, bad := range [][]string{{"--clients", "0"}, {"--clients", "x"}, {"--workloads", "etcd"}, {"--duration", "0s"}, {"extra"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("parseFlags(%q) accepted", bad)
		}
	}
}

func TestResultsFileAndComparison(t *testing.T) {
	rows := []row{
		newRow("oracle_issue_consume", sysShardkeeper, load.Result{Clients: 64, OpsPerSec: 6000.04, P50: 1500 * time.Microsecond, P99: 9 * time.Millisecond}),
		newRow("oracle_issue_consume", sysRedis, load.Result{Clients: 64, OpsPerSec: 10000, P50: time.Millisecond, P99: 5 * time.Millisecond,
			Errors: map[string]int{"redis NONCE_USED": 2}}),
	}
	path := filepath.Join(t.TempDir(), "results", "latest.json")
	if err := writeJSON(path, rows); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"workload": "oracle_issue_consume", "system": "shardkeeper", "clients": 64.0, "ops_per_s": 6000.0, "p50_ms": 1.5, "p99_ms": 9.0}
	if len(got) != 2 || !reflect.DeepEqual(got[0], want) {
		t.Fatalf("results %s, want first row %v", b, want)
	}
	var out bytes.Buffer
	printTable(&out, rows)
	printComparison(&out, rows)
	printGoals(&out, rows)
	for _, s := range []string{"2 (redis NONCE_USED: 2)", "0.60×", "at 64 clients: 0.60× Redis (the goal is judged against the calibration server"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("output lacks %q:\n%s", s, out.String())
		}
	}
	if strings.Contains(out.String(), "floor") {
		t.Errorf("floor mentioned though not measured:\n%s", out.String())
	}
}

// TestComparisonWithFloor checks the calibration columns: each system relative to Redis,
// shardkeeper relative to the durable floor, and a client count the floor lacks shown as "-".
func TestComparisonWithFloor(t *testing.T) {
	oracle := "oracle_issue_consume"
	res := func(clients int, ops float64) load.Result { return load.Result{Clients: clients, OpsPerSec: ops} }
	rows := []row{
		newRow(oracle, sysShardkeeper, res(64, 3000)),
		newRow(oracle, sysShardkeeper, res(256, 3500)),
		newRow(oracle, sysRedis, res(64, 12000)),
		newRow(oracle, sysRedis, res(256, 14000)),
		newRow(oracle, sysFloor, res(64, 6000)),
		newRow(oracle, sysFloorNoFsync, res(64, 9600)),
		newRow("device_challenge_verify", sysShardkeeper, res(64, 2500)),
	}
	var out bytes.Buffer
	printComparison(&out, rows)
	printGoals(&out, rows)
	lines := strings.Split(out.String(), "\n")
	var row64, row256 string
	for _, l := range lines {
		switch f := strings.Fields(l); {
		case len(f) > 0 && f[0] == "64":
			row64 = l
		case len(f) > 0 && f[0] == "256":
			row256 = l
		}
	}
	// shardkeeper/redis 0.25, floor/redis 0.50, floor-nofsync/redis 0.80, shardkeeper/floor 0.50.
	if f := strings.Fields(row64); len(f) < 4 || !slices.Equal(f[len(f)-4:], []string{"0.25×", "0.50×", "0.80×", "0.50×"}) {
		t.Errorf("64-client row %q", row64)
	}
	if f := strings.Fields(row256); len(f) < 4 || !slices.Equal(f[len(f)-4:], []string{"0.25×", "-", "-", "-"}) {
		t.Errorf("256-client row %q", row256)
	}
	for _, s := range []string{"goal: oracle issue+consume at 64 clients ≥ 0.8× the floor (HTTP + one fsynced write per request, nothing else): 0.50× — NOT met",
		"against Redis (appendfsync always): shardkeeper 0.25×, the floor 0.50×",
		"floor storing nothing answers 9600 request pairs/s"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("output lacks %q:\n%s", s, out.String())
		}
	}
}

func TestParseFlagsNodes(t *testing.T) {
	o, err := parseFlags(nil)
	if err != nil || o.nodes != 1 || o.skipEtcd {
		t.Fatalf("defaults %+v, %v", o, err)
	}
	o, err = parseFlags([]string{"--nodes", "3", "--skip-etcd"})
	if err != nil || o.nodes != 3 || !o.skipEtcd {
		t.Fatalf("parsed %+v, %v", o, err)
	}
	for _, n := range []string{"0", "2", "4"} {
		if _, err := parseFlags([]string{"--nodes", n}); err == nil {
			t.Errorf("--nodes %s accepted", n)
		}
	}
}

func TestClusterComparisonAndAppend(t *testing.T) {
	oracle := "oracle_issue_consume"
	rows := []row{
		newRow(oracle, sysShardkeeper3, load.Result{Clients: 16, OpsPerSec: 900, P50: 10 * time.Millisecond, P99: 30 * time.Millisecond}),
		newRow(oracle, sysShardkeeper3, load.Result{Clients: 64, OpsPerSec: 3000, P50: 20 * time.Millisecond, P99: 60 * time.Millisecond}),
		newRow(oracle, sysEtcd, load.Result{Clients: 16, OpsPerSec: 300, P50: 50 * time.Millisecond, P99: 90 * time.Millisecond}),
		newRow(oracle, sysEtcd, load.Result{Clients: 64, OpsPerSec: 1500, P50: 40 * time.Millisecond, P99: 80 * time.Millisecond}),
	}
	var out bytes.Buffer
	printClusterComparison(&out, rows)
	printClusterGoals(&out, rows)
	for _, s := range []string{"shardkeeper/etcd", "3.00×", "2.00×", "goal: ≥ 3× etcd on the nonce workload (oracle issue+consume at 64 clients, 3 nodes each): 2.00× — NOT met",
		"goal: p99 ≤ 30 ms at 64 clients on 3 nodes: 60.0 ms — NOT met"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("output lacks %q:\n%s", s, out.String())
		}
	}
	if strings.Contains(out.String(), "saturated") {
		t.Errorf("CPU-bound verdict without CPU figures:\n%s", out.String())
	}

	// With CPU figures from saturated runs: the CPU columns, their ratio, and what the goal
	// needs per operation. 3000 ops/s on 1.5 server cores is 0.5 ms per op; 1500 on 1.8 is 1.2.
	cpu := func(r row, server, gen, idle float64) row {
		return r.withUsage(usage{serverCores: server, genCores: gen, idle: idle, serverOK: true, genOK: true, idleOK: true})
	}
	saturated := []row{cpu(rows[1], 1.5, 0.3, 0.05), cpu(rows[3], 1.8, 0.15, 0.08)}
	out.Reset()
	printClusterComparison(&out, saturated)
	printClusterGoals(&out, saturated)
	for _, s := range []string{"0.500", "1.200", "2.40×", "5%", "8%", "(5% and 8% idle)",
		"shardkeeper 0.600 ms (nodes 0.500), etcd 1.300 ms (members 1.200); 3× etcd here needs at most 0.433 ms in all"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("output lacks %q:\n%s", s, out.String())
		}
	}
	idle := []row{cpu(rows[1], 1.5, 0.3, 0.40), saturated[1]}
	out.Reset()
	printClusterGoals(&out, idle)
	if strings.Contains(out.String(), "saturated") {
		t.Errorf("CPU-bound verdict though shardkeeper's run left 40%% idle:\n%s", out.String())
	}

	path := filepath.Join(t.TempDir(), "latest.json")
	oneNode := []row{
		newRow(oracle, sysShardkeeper, load.Result{Clients: 16, OpsPerSec: 1000}),
		newRow(oracle, sysEtcd, load.Result{Clients: 16, OpsPerSec: 1}), // an earlier etcd row: replaced
	}
	if err := writeJSON(path, oneNode); err != nil {
		t.Fatal(err)
	}
	n, err := appendJSON(path, rows)
	if err != nil || n != 5 {
		t.Fatalf("appendJSON = %d, %v; want 5 rows", n, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []row
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	var systems []string
	for _, r := range got {
		systems = append(systems, r.System)
	}
	if !slices.Equal(systems, []string{sysShardkeeper, sysShardkeeper3, sysShardkeeper3, sysEtcd, sysEtcd}) || got[3].OpsPerS != 300 {
		t.Fatalf("file after append: %s", b)
	}
	if n, err := appendJSON(filepath.Join(t.TempDir(), "new", "latest.json"), rows); err != nil || n != 4 {
		t.Fatalf("appendJSON to a new file = %d, %v", n, err)
	}
}

func TestUnsettled(t *testing.T) {
	members := []client.Member{{NodeID: "n1", State: "alive"}, {NodeID: "n2", State: "alive"}, {NodeID: "n3", State: "alive"}}
	part := func(id uint32, leader string) client.Partition {
		return client.Partition{ID: id, Group: id, Leader: leader, Replicas: []string{"a", "b", "c"}}
	}
	spread := []client.Partition{part(0, "n1"), part(1, "n1"), part(2, "n2"), part(3, "n3")}
	if why := unsettled(&client.ClusterStatus{Members: members, Partitions: spread}, nil, 3); why != "" {
		t.Fatalf("settled cluster: %s", why)
	}
	// Three groups of several partitions, one led by each node: spread, though n1 leads
	// more partitions.
	grouped := []client.Partition{part(0, "n1"), part(1, "n1"), part(2, "n2"), part(3, "n3")}
	grouped[1].Group, grouped[2].Group, grouped[3].Group = 0, 1, 2
	if why := unsettled(&client.ClusterStatus{Members: members, Partitions: grouped}, nil, 3); why != "" {
		t.Fatalf("settled cluster of groups: %s", why)
	}
	for name, st := range map[string]*client.ClusterStatus{
		"member down": {Members: append(members[:2:2], client.Member{NodeID: "n3", State: "dead"}), Partitions: spread},
		"no leader":   {Members: members, Partitions: []client.Partition{part(0, "n1"), part(1, "")}},
		"2 replicas":  {Members: members, Partitions: []client.Partition{{ID: 0, Leader: "n1", Replicas: []string{"a", "b"}}}},
		"uneven":      {Members: members, Partitions: []client.Partition{part(0, "n1"), part(1, "n1"), part(2, "n1"), part(3, "n2")}},
	} {
		if unsettled(st, nil, 3) == "" {
			t.Errorf("%s: reported settled", name)
		}
	}
	if unsettled(nil, errors.New("refused"), 3) != "refused" {
		t.Error("an error is not settled")
	}
}

// TestCPUMeter measures a busy loop: the load generator's CPU must show it, the machine's
// idle share must be a fraction, and the row must carry both.
func TestCPUMeter(t *testing.T) {
	if _, ok := machineCPU(); !ok {
		t.Skip("no /proc/stat: CPU is only measured on Linux")
	}
	m := startCPUMeter(nil)
	for start := time.Now(); time.Since(start) < 200*time.Millisecond; {
	}
	u := m.stop()
	if !u.genOK || u.genCores < 0.3 || !u.idleOK || u.idle < 0 || u.idle > 1 || u.serverOK {
		t.Fatalf("usage after 200 ms of busy loop, no server: %+v", u)
	}
	r := newRow("oracle_issue_consume", sysEtcd, load.Result{Clients: 1, OpsPerSec: 100}).withUsage(u)
	if r.ClientCPUms <= 0 || r.ServerCPUms != 0 || r.IdlePct == nil || r.cpuCell() != "-" {
		t.Fatalf("row %+v", r)
	}
}
