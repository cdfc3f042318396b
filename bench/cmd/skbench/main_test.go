package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/bench/internal/load"
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
	for _, s := range []string{"2 (redis NONCE_USED: 2)", "0.60×", "≥ 0.5× Redis: 0.60× — met"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("output lacks %q:\n%s", s, out.String())
		}
	}
}
