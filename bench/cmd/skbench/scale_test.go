package main

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/client"
)

func TestParseScaleFlags(t *testing.T) {
	o, err := parseFlags([]string{"--scale", "3,6,9"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.scale, []int{3, 6, 9}) || !slices.Equal(o.scaleClients, []int{128, 256}) || o.scaleRounds != 3 || o.cpuCap != 15 {
		t.Fatalf("scale defaults %+v", o)
	}
	for _, bad := range [][]string{{"--scale", "6,3"}, {"--scale", "3,x"}, {"--scale", "3", "--scale-clients", "0"},
		{"--scale", "3", "--cpu-cap", "101"}, {"--scale", "3", "--scale-rounds", "0"},
		{"--scale", "3", "--profile", "p", "--profile-clients", "64"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("parseFlags(%q) accepted", bad)
		}
	}
}

// The summary takes, per round, the better client count, and gives the median of the rounds
// as a ratio to the first size.
func TestPrintScale(t *testing.T) {
	o := options{scale: []int{3, 6}, scaleClients: []int{128, 256}, cpuCap: 15}
	var rs []scaleResult
	add := func(round, nodes, per int, mode scaleMode, v float64) {
		rs = append(rs, scaleResult{round: round, nodes: nodes, perNode: per, mode: mode, pairsPerS: v, leaders: nodes})
	}
	for round, base := range []float64{1000, 1200, 1100} {
		add(round+1, 3, 128, modeEveryNode, base)
		add(round+1, 3, 256, modeEveryNode, base-100)
		add(round+1, 6, 128, modeEveryNode, 1.5*base)
		add(round+1, 6, 256, modeEveryNode, 2*base) // the better one
		add(round+1, 3, 128, modeRouting, base)
		add(round+1, 6, 128, modeRouting, 3*base)
	}
	var b bytes.Buffer
	printScale(&b, o, rs, true)
	out := strings.Join(strings.Fields(b.String()), " ") // the columns' widths do not matter
	for _, want := range []string{"each node capped at 15% of a core", "the better of 128 and 256 clients per node",
		"3 every node 1000 1200 1100 1100 1.00×", "6 every node 2000 2400 2200 2200 2.00×",
		"3 routing client 1000 1200 1100 1100 1.00×", "6 routing client 3000 3600 3300 3300 3.00×"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
}

// A short run of the whole benchmark (two sizes, uncapped, tiny windows), so that it never
// rots: the cluster grows online and both modes complete pairs (a replica or leadership moving
// right after the join may fail a few: the load runs without retries).
func TestScaleSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four nodes")
	}
	bin, err := buildShardkeeper(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	o := options{bin: bin, scale: []int{3, 4}, scaleClients: []int{4}, scaleRounds: 1, scaleLeadWait: time.Second,
		duration: 500 * time.Millisecond, warmup: 200 * time.Millisecond}
	dir := t.TempDir()
	rs, err := scaleRound(context.Background(), o, dir, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 4 {
		t.Fatalf("%d measurements, want 4 (2 sizes × 2 modes): %+v", len(rs), rs)
	}
	for _, r := range rs {
		if r.pairsPerS <= 0 {
			t.Errorf("%d nodes, %s: %.0f pairs/s, %d errors", r.nodes, r.mode, r.pairsPerS, r.errors)
		}
	}
	if _, err := os.Stat(dir + "/n4.log"); err != nil {
		t.Errorf("the fourth node never started: %v", err)
	}
}

// The error summary lists the classes most frequent first, and says nothing without errors.
func TestErrorClasses(t *testing.T) {
	if got := errorClasses(nil); got != "" {
		t.Errorf("no errors: %q", got)
	}
	if got, want := errorClasses(map[string]int{"timeout": 2, "503 unavailable": 7}), " (7 503 unavailable, 2 timeout)"; got != want {
		t.Errorf("errorClasses = %q, want %q", got, want)
	}
}

// The settling wait compares the cluster's shape: a new leader or a replica moving changes
// it; the order in which a node lists the voters does not.
func TestClusterShape(t *testing.T) {
	rt := &client.Routes{Partitions: 4, Groups: []client.Route{{First: 0, End: 2, Leader: "n1"}, {First: 2, End: 4, Leader: "n2"}}}
	st := &client.ClusterStatus{Partitions: []client.Partition{{Voters: []string{"n1", "n2", "n3"}}}}
	base := clusterShape(rt, st)
	reordered := &client.ClusterStatus{Partitions: []client.Partition{{Voters: []string{"n3", "n1", "n2"}}}}
	if clusterShape(rt, reordered) != base {
		t.Error("the voters' order changed the shape")
	}
	moved := &client.ClusterStatus{Partitions: []client.Partition{{Voters: []string{"n1", "n2", "n3"}, NonVoters: []string{"n4"}}}}
	if clusterShape(rt, moved) == base {
		t.Error("a replica being added left the shape unchanged")
	}
	led := &client.Routes{Partitions: 4, Groups: []client.Route{{First: 0, End: 2, Leader: "n3"}, {First: 2, End: 4, Leader: "n2"}}}
	if clusterShape(led, st) == base {
		t.Error("a new leader left the shape unchanged")
	}
}

// Ports are drawn below the ephemeral range, where no client connection can take one.
func TestFreePortsBelowEphemeral(t *testing.T) {
	if ephemeralStart() < 10500 {
		t.Skipf("the ephemeral range starts at %d: no room below it", ephemeralStart())
	}
	ps, err := freePorts(5)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ps {
		if p >= ephemeralStart() || p < 1024 || seen[p] {
			t.Fatalf("ports %v: want distinct ports below %d", ps, ephemeralStart())
		}
		seen[p] = true
	}
}
