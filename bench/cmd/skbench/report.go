package main

import (
	"encoding/json"
	"fmt"
	"io"
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
	const format = "%-24s  %-11s  %7v  %9v  %8v  %8v  %s\n"
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
