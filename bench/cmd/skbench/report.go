package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shardkeeper/shardkeeper/bench/internal/load"
	"github.com/shardkeeper/shardkeeper/bench/internal/workload"
)

// row is one measurement: a workload on a system at a client count. The JSON fields are
// the results file's format.
type row struct {
	Workload string  `json:"workload"`
	System   string  `json:"system"`
	Clients  int     `json:"clients"`
	OpsPerS  float64 `json:"ops_per_s"`
	P50ms    float64 `json:"p50_ms"`
	P99ms    float64 `json:"p99_ms"`

	errors map[string]int // failed operations by class (not in the file)
}

const (
	sysShardkeeper = "shardkeeper"
	sysRedis       = "redis"

	sysShardkeeper3 = "shardkeeper-3" // the 3-node cluster (--nodes 3)
	sysEtcd         = "etcd"          // a 3-member etcd cluster
)

func newRow(workload, system string, r load.Result) row {
	ms := func(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 } // µs precision
	return row{Workload: workload, System: system, Clients: r.Clients,
		OpsPerS: math.Round(r.OpsPerSec*10) / 10, P50ms: ms(r.P50), P99ms: ms(r.P99), errors: r.Errors}
}

func (r row) errorCount() int {
	n := 0
	for _, c := range r.errors {
		n += c
	}
	return n
}

// errorSummary is "0" or "<n> (<class>: <n>, ...)".
func (r row) errorSummary() string {
	if r.errorCount() == 0 {
		return "0"
	}
	var parts []string
	for class, n := range r.errors {
		parts = append(parts, fmt.Sprintf("%s: %d", class, n))
	}
	slices.Sort(parts)
	return fmt.Sprintf("%d (%s)", r.errorCount(), strings.Join(parts, ", "))
}

// printTable prints every row.
func printTable(w io.Writer, rows []row) {
	const format = "%-24s  %-13s  %7v  %9v  %8v  %8v  %s\n"
	fmt.Fprintf(w, format, "workload", "system", "clients", "ops/s", "p50 ms", "p99 ms", "errors")
	for _, r := range rows {
		fmt.Fprintf(w, format, r.Workload, r.System, r.Clients, fmt.Sprintf("%.0f", r.OpsPerS),
			fmt.Sprintf("%.2f", r.P50ms), fmt.Sprintf("%.2f", r.P99ms), r.errorSummary())
	}
}

// printComparison prints the oracle workload of both systems side by side, with the
// shardkeeper/Redis throughput ratio, at each client count measured on both.
func printComparison(w io.Writer, rows []row) {
	find := func(system string, clients int) (row, bool) {
		for _, r := range rows {
			if r.Workload == workload.Names[workload.Oracle] && r.System == system && r.Clients == clients {
				return r, true
			}
		}
		return row{}, false
	}
	if !slices.ContainsFunc(rows, func(r row) bool { return r.System == sysRedis }) {
		return
	}
	fmt.Fprintln(w, "\nnonce oracle, one op = issue + consume: shardkeeper vs Redis (appendonly, appendfsync always)")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "clients\tshardkeeper ops/s\tp50 ms\tp99 ms\tredis ops/s\tp50 ms\tp99 ms\tshardkeeper/redis\t")
	for _, sk := range rows {
		if sk.Workload != workload.Names[workload.Oracle] || sk.System != sysShardkeeper {
			continue
		}
		rd, ok := find(sysRedis, sk.Clients)
		if !ok {
			continue
		}
		ratio := math.NaN()
		if rd.OpsPerS > 0 {
			ratio = sk.OpsPerS / rd.OpsPerS
		}
		fmt.Fprintf(tw, "%d\t%.0f\t%.2f\t%.2f\t%.0f\t%.2f\t%.2f\t%.2f×\t\n", sk.Clients, sk.OpsPerS, sk.P50ms, sk.P99ms, rd.OpsPerS, rd.P50ms, rd.P99ms, ratio)
	}
	_ = tw.Flush()
}

// printGoals compares the measurements with the goals, when measured.
func printGoals(w io.Writer, rows []row) {
	var sk64, rd64, bestDevice row
	for _, r := range rows {
		switch {
		case r.Workload == workload.Names[workload.Oracle] && r.Clients == 64 && r.System == sysShardkeeper:
			sk64 = r
		case r.Workload == workload.Names[workload.Oracle] && r.Clients == 64 && r.System == sysRedis:
			rd64 = r
		case r.Workload == workload.Names[workload.Device] && r.OpsPerS > bestDevice.OpsPerS:
			bestDevice = r
		}
	}
	verdict := map[bool]string{true: "met", false: "NOT met"}
	if sk64.Clients != 0 && rd64.Clients != 0 && rd64.OpsPerS > 0 {
		ratio := sk64.OpsPerS / rd64.OpsPerS
		fmt.Fprintf(w, "\ngoal: oracle issue+consume at 64 clients ≥ 0.5× Redis: %.2f× — %s\n", ratio, verdict[ratio >= 0.5])
	}
	if bestDevice.Clients != 0 {
		fmt.Fprintf(w, "goal: one hot device registry ≥ 10,000 challenge+verify pairs/s: %.0f at %d clients — %s\n",
			bestDevice.OpsPerS, bestDevice.Clients, verdict[bestDevice.OpsPerS >= 10000])
	}
}

// findRow is the oracle row of system at clients.
func findRow(rows []row, system string, clients int) (row, bool) {
	for _, r := range rows {
		if r.Workload == workload.Names[workload.Oracle] && r.System == system && r.Clients == clients {
			return r, true
		}
	}
	return row{}, false
}

// printClusterComparison prints the oracle workload of the 3-node shardkeeper and the
// 3-member etcd side by side, with the shardkeeper/etcd throughput ratio, at each client
// count measured on both.
func printClusterComparison(w io.Writer, rows []row) {
	if !slices.ContainsFunc(rows, func(r row) bool { return r.System == sysEtcd }) {
		return
	}
	fmt.Fprintln(w, "\nnonce oracle, one op = issue + consume: 3-node shardkeeper vs 3-member etcd (txn create-if-absent with a lease, then compare-and-put consume; default fsync)")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "clients\tshardkeeper-3 ops/s\tp50 ms\tp99 ms\tetcd ops/s\tp50 ms\tp99 ms\tshardkeeper/etcd\t")
	for _, sk := range rows {
		if sk.Workload != workload.Names[workload.Oracle] || sk.System != sysShardkeeper3 {
			continue
		}
		et, ok := findRow(rows, sysEtcd, sk.Clients)
		if !ok {
			continue
		}
		ratio := math.NaN()
		if et.OpsPerS > 0 {
			ratio = sk.OpsPerS / et.OpsPerS
		}
		fmt.Fprintf(tw, "%d\t%.0f\t%.2f\t%.2f\t%.0f\t%.2f\t%.2f\t%.2f×\t\n", sk.Clients, sk.OpsPerS, sk.P50ms, sk.P99ms, et.OpsPerS, et.P50ms, et.P99ms, ratio)
	}
	_ = tw.Flush()
}

// printClusterGoals compares the 3-node measurements with the goal: at least 3× etcd's
// throughput on the nonce workload, judged at 64 clients (or, if 64 was not measured on
// both, at the largest client count that was).
func printClusterGoals(w io.Writer, rows []row) {
	best := 0 // the client count judged
	for _, sk := range rows {
		if sk.Workload != workload.Names[workload.Oracle] || sk.System != sysShardkeeper3 {
			continue
		}
		if et, ok := findRow(rows, sysEtcd, sk.Clients); !ok || et.OpsPerS <= 0 {
			continue
		}
		if sk.Clients == 64 {
			best = 64
			break
		}
		best = max(best, sk.Clients)
	}
	if best == 0 {
		return
	}
	sk, _ := findRow(rows, sysShardkeeper3, best)
	et, _ := findRow(rows, sysEtcd, best)
	ratio := sk.OpsPerS / et.OpsPerS
	verdict := map[bool]string{true: "met", false: "NOT met"}
	fmt.Fprintf(w, "\ngoal: ≥ 3× etcd on the nonce workload (oracle issue+consume at %d clients, 3 nodes each): %.2f× — %s\n", best, ratio, verdict[ratio >= 3])
}

// appendJSON adds rows to the results file at path (creating it), replacing the rows it
// already holds for the same (workload, system, clients), and returns the number of rows
// the file now holds. A file that is not a JSON array of rows is an error (nothing written).
func appendJSON(path string, rows []row) (int, error) {
	var old []row
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return 0, err
	default:
		if err := json.Unmarshal(b, &old); err != nil {
			return 0, fmt.Errorf("%s is not a JSON array of rows: %w", path, err)
		}
	}
	type key struct {
		workload, system string
		clients          int
	}
	replaced := map[key]bool{}
	for _, r := range rows {
		replaced[key{r.Workload, r.System, r.Clients}] = true
	}
	all := slices.DeleteFunc(old, func(r row) bool { return replaced[key{r.Workload, r.System, r.Clients}] })
	all = append(all, rows...)
	return len(all), writeJSON(path, all)
}

// writeJSON writes rows to path (an array of row objects), creating its directory.
func writeJSON(path string, rows []row) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
