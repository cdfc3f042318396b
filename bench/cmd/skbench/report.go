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
	// ServerCPUms is the CPU time the server's processes spent per operation, in ms (0: not
	// measured). When the machine is saturated, throughput is bounded by it.
	ServerCPUms float64 `json:"server_cpu_ms_per_op,omitempty"`
	// L1Every is, for the chain in bundle mode, the seconds between two L1 transactions (the
	// bundles' wrappers) the node posted (0: not measured).
	L1Every float64 `json:"l1_tx_every_s,omitempty"`
	// ClientCPUms is the load generator's CPU time per operation, in ms (0: not measured).
	ClientCPUms float64 `json:"client_cpu_ms_per_op,omitempty"`
	// IdlePct is the share of the machine's CPU left idle during the run (nil: not measured).
	IdlePct *float64 `json:"machine_idle_pct,omitempty"`
	// StealPct is the share of the machine's CPU the hypervisor gave to other guests during
	// the run (nil: not measured).
	StealPct *float64 `json:"machine_steal_pct,omitempty"`

	errors map[string]int // failed operations by class (not in the file)
}

const (
	sysShardkeeper = "shardkeeper"
	sysRedis       = "redis"

	sysFloor        = "floor"         // the calibration server, every write fsynced
	sysFloorNoFsync = "floor-nofsync" // the calibration server storing nothing
	sysShardkeeper3 = "shardkeeper-3" // the 3-node cluster (--nodes 3)
	sysEtcd         = "etcd"          // a 3-member etcd cluster
)

func newRow(workload, system string, r load.Result) row {
	ms := func(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 } // µs precision
	return row{Workload: workload, System: system, Clients: r.Clients,
		OpsPerS: math.Round(r.OpsPerSec*10) / 10, P50ms: ms(r.P50), P99ms: ms(r.P99), errors: r.Errors}
}

// withUsage adds the run's CPU figures to r.
func (r row) withUsage(u usage) row {
	perOp := func(ok bool, cores float64) float64 { // ms, µs precision; 0: not measured
		if !ok || r.OpsPerS <= 0 {
			return 0
		}
		return math.Round(cores/r.OpsPerS*1e6) / 1e3
	}
	r.ServerCPUms, r.ClientCPUms = perOp(u.serverOK, u.serverCores), perOp(u.genOK, u.genCores)
	if u.idleOK {
		idle := math.Round(u.idle*1000) / 10
		steal := math.Round(u.steal*1000) / 10
		r.IdlePct, r.StealPct = &idle, &steal
	}
	return r
}

// cpuCell is the row's server CPU per operation in ms, or "-".
func (r row) cpuCell() string {
	if r.ServerCPUms <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", r.ServerCPUms)
}

// idleCell is the machine's idle share during the row's run, or "-".
func (r row) idleCell() string {
	if r.IdlePct == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", *r.IdlePct)
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

// printTable prints every row: throughput, latency, the server's CPU per operation and how
// idle the machine was, and errors.
func printTable(w io.Writer, rows []row) {
	const format = "%-24s  %-19s  %7v  %9v  %8v  %8v  %10v  %5v  %s\n"
	fmt.Fprintf(w, format, "workload", "system", "clients", "ops/s", "p50 ms", "p99 ms", "cpu ms/op", "idle", "errors")
	for _, r := range rows {
		rate := fmt.Sprintf("%.0f", r.OpsPerS)
		if r.OpsPerS < 10 {
			rate = fmt.Sprintf("%.2f", r.OpsPerS) // the slow uploads
		}
		fmt.Fprintf(w, format, r.Workload, r.System, r.Clients, rate,
			fmt.Sprintf("%.2f", r.P50ms), fmt.Sprintf("%.2f", r.P99ms), r.cpuCell(), r.idleCell(), r.errorSummary())
	}
}

// printComparison prints the oracle workload side by side at each client count shardkeeper
// was measured at: shardkeeper, Redis and the calibration floors, with each one's throughput
// relative to Redis, and shardkeeper's relative to the durable floor. A system not measured
// is left out; with neither Redis nor a floor there is nothing to compare.
func printComparison(w io.Writer, rows []row) {
	systems := []string{sysRedis, sysFloor, sysFloorNoFsync}
	systems = slices.DeleteFunc(systems, func(sys string) bool {
		return !slices.ContainsFunc(rows, func(r row) bool { return r.System == sys })
	})
	if len(systems) == 0 {
		return
	}
	ratio := func(a, b row, ok bool) string {
		if !ok || b.OpsPerS <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f×", a.OpsPerS/b.OpsPerS)
	}
	fmt.Fprintln(w, "\nnonce oracle, one op = issue + consume: shardkeeper vs Redis (appendonly, appendfsync always)")
	if len(systems) > 1 || systems[0] != sysRedis {
		fmt.Fprintln(w, "and vs the floor (bench/cmd/skfloor: net/http + one fsynced Pebble write per request, nothing else; nofsync: nothing stored)")
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	header := "clients\tshardkeeper ops/s\tp50 ms\tp99 ms\t"
	for _, sys := range systems {
		header += sys + " ops/s\t"
		if sys == sysRedis {
			header += "p50 ms\tp99 ms\t"
		}
	}
	header += "shardkeeper/redis\t"
	for _, sys := range systems[1:] {
		header += sys + "/redis\t"
	}
	if slices.Contains(systems, sysFloor) {
		header += "shardkeeper/floor\t"
	}
	fmt.Fprintln(tw, header)
	for _, sk := range rows {
		if sk.Workload != workload.Names[workload.Oracle] || sk.System != sysShardkeeper {
			continue
		}
		line := fmt.Sprintf("%d\t%.0f\t%.2f\t%.2f\t", sk.Clients, sk.OpsPerS, sk.P50ms, sk.P99ms)
		rd, rdOK := findRow(rows, sysRedis, sk.Clients)
		for _, sys := range systems {
			r, ok := findRow(rows, sys, sk.Clients)
			switch {
			case !ok && sys == sysRedis:
				line += "-\t-\t-\t"
			case !ok:
				line += "-\t"
			case sys == sysRedis:
				line += fmt.Sprintf("%.0f\t%.2f\t%.2f\t", r.OpsPerS, r.P50ms, r.P99ms)
			default:
				line += fmt.Sprintf("%.0f\t", r.OpsPerS)
			}
		}
		line += ratio(sk, rd, rdOK) + "\t"
		for _, sys := range systems[1:] {
			r, ok := findRow(rows, sys, sk.Clients)
			line += ratio(r, rd, ok && rdOK) + "\t"
		}
		if slices.Contains(systems, sysFloor) {
			fl, ok := findRow(rows, sysFloor, sk.Clients)
			line += ratio(sk, fl, ok) + "\t"
		}
		fmt.Fprintln(tw, line)
	}
	_ = tw.Flush()
}

// printGoals compares the measurements with the performance targets, when measured, and with what
// the floor shows this machine allows.
func printGoals(w io.Writer, rows []row) {
	var bestDevice row
	for _, r := range rows {
		if r.Workload == workload.Names[workload.Device] && r.OpsPerS > bestDevice.OpsPerS {
			bestDevice = r
		}
	}
	sk64, skOK := findRow(rows, sysShardkeeper, 64)
	rd64, rdOK := findRow(rows, sysRedis, 64)
	fl64, flOK := findRow(rows, sysFloor, 64)
	nf64, nfOK := findRow(rows, sysFloorNoFsync, 64)
	verdict := map[bool]string{true: "met", false: "NOT met"}
	switch {
	case skOK && flOK && fl64.OpsPerS > 0:
		ratio := sk64.OpsPerS / fl64.OpsPerS
		fmt.Fprintf(w, "\ngoal: oracle issue+consume at 64 clients ≥ 0.8× the floor (HTTP + one fsynced write per request, nothing else): %.2f× — %s\n",
			ratio, verdict[ratio >= 0.8])
		if rdOK && rd64.OpsPerS > 0 {
			fmt.Fprintf(w, "  against Redis (appendfsync always): shardkeeper %.2f×, the floor %.2f×\n",
				sk64.OpsPerS/rd64.OpsPerS, fl64.OpsPerS/rd64.OpsPerS)
		}
	case skOK && rdOK && rd64.OpsPerS > 0:
		fmt.Fprintf(w, "\noracle issue+consume at 64 clients: %.2f× Redis (the goal is judged against the calibration server, skipped in this run)\n",
			sk64.OpsPerS/rd64.OpsPerS)
	}
	if bestDevice.Clients != 0 {
		fmt.Fprintf(w, "goal: one hot device registry ≥ 10,000 challenge+verify pairs/s: %.0f at %d clients — %s\n",
			bestDevice.OpsPerS, bestDevice.Clients, verdict[bestDevice.OpsPerS >= 10000])
		if nfOK {
			fmt.Fprintf(w, "  on this machine the floor storing nothing answers %.0f request pairs/s at 64 clients (no signature check, no write)\n", nf64.OpsPerS)
		}
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
// count measured on both; and, where measured, each one's server CPU per operation and the
// ratio etcd/shardkeeper of those (how many times less CPU shardkeeper needs per operation).
func printClusterComparison(w io.Writer, rows []row) {
	if !slices.ContainsFunc(rows, func(r row) bool { return r.System == sysEtcd }) {
		return
	}
	fmt.Fprintln(w, "\nnonce oracle, one op = issue + consume: 3-node shardkeeper vs 3-member etcd (txn create-if-absent with a lease, then compare-and-put consume; default fsync)")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "clients\tshardkeeper-3 ops/s\tp50 ms\tp99 ms\tcpu ms/op\tidle\tetcd ops/s\tp50 ms\tp99 ms\tcpu ms/op\tidle\tshardkeeper/etcd\tcpu etcd/shardkeeper\t")
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
		cpuRatio := "-"
		if sk.ServerCPUms > 0 && et.ServerCPUms > 0 {
			cpuRatio = fmt.Sprintf("%.2f×", et.ServerCPUms/sk.ServerCPUms)
		}
		fmt.Fprintf(tw, "%d\t%.0f\t%.2f\t%.2f\t%s\t%s\t%.0f\t%.2f\t%.2f\t%s\t%s\t%.2f×\t%s\t\n", sk.Clients, sk.OpsPerS, sk.P50ms, sk.P99ms,
			sk.cpuCell(), sk.idleCell(), et.OpsPerS, et.P50ms, et.P99ms, et.cpuCell(), et.idleCell(), ratio, cpuRatio)
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
	if best == 64 {
		fmt.Fprintf(w, "goal: p99 ≤ 30 ms at 64 clients on 3 nodes: %.1f ms — %s\n", sk.P99ms, verdict[sk.P99ms <= 30])
	}
	// When neither run left the machine much idle, both were CPU-bound: throughput is then
	// the machine's cores over the CPU per operation (servers and load generator), so the
	// goal needs a third of etcd's.
	if sk.IdlePct != nil && et.IdlePct != nil && *sk.IdlePct < saturatedIdlePct && *et.IdlePct < saturatedIdlePct &&
		sk.ServerCPUms > 0 && et.ServerCPUms > 0 {
		skAll, etAll := sk.ServerCPUms+sk.ClientCPUms, et.ServerCPUms+et.ClientCPUms
		fmt.Fprintf(w, "  both runs saturated this machine (%.0f%% and %.0f%% idle), so throughput here is set by CPU per operation.\n"+
			"  Servers + load generator: shardkeeper %.3f ms (nodes %.3f), etcd %.3f ms (members %.3f); 3× etcd here needs at most %.3f ms in all\n",
			*sk.IdlePct, *et.IdlePct, skAll, sk.ServerCPUms, etAll, et.ServerCPUms, etAll/3)
	}
}

// saturatedIdlePct is the machine idle share below which a run is taken to be CPU-bound.
const saturatedIdlePct = 15

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
