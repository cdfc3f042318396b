// Command skbench is shardkeeper's load benchmark. In one run it builds and starts a
// one-node shardkeeper (fresh data directory), measures the domain workloads through the
// client package at several client counts, then starts Redis with every write fsynced
// (appendonly, appendfsync always) and measures the equivalent nonce workload over RESP.
// It prints a table, the side-by-side nonce comparison with the shardkeeper/Redis ratio, and
// writes the rows to a JSON file. Progress goes to stderr.
//
// With --nodes 3 it starts a 3-node shardkeeper cluster instead (fresh data directories,
// the workloads round robin over the three nodes, system "shardkeeper-3") and, on the nonce
// workload, a 3-member etcd cluster on loopback (installed with apt-get install etcd-server
// when missing and root; default fsync) driven through etcd's v3 JSON gateway: issue = one
// txn "create_revision(nonce/<random>) == 0 → put nonce/<random> = org with a shared lease",
// consume = one txn "value(nonce/<n>) == org and create_revision(used/<n>) == 0 → put used/<n>
// = request id with the lease". It prints the shardkeeper/etcd comparison and adds its rows to
// the JSON file, replacing only earlier rows of the same workload, system and client count.
//
// Workloads (one operation each, closed loop, every client waiting for its answer):
//
//	oracle     POST /v1/nonces then POST /v1/nonces/{nonce}/consume
//	           (Redis: SET nonce:<random> <org> NX PX <ttl>, then an atomic Lua consume)
//	device     POST /v1/attest/bench/challenge then .../verify with an Ed25519 signature,
//	           over a pool of pre-registered devices in one registry
//	heartbeat  PUT /v1/servers/bench/{server_id}, rotating over a pool of ids
//
// Usage (from the repository root):
//
//	go run ./bench/cmd/skbench [--duration 5s] [--warmup 1s] [--clients 1,16,64,256]
//	    [--workloads oracle,device,heartbeat] [--skip-redis] [--out bench/results/latest.json]
//	    [--nodes 1|3] [--skip-etcd] [--skip-floor]
//
// With --scale 3,6,9 it runs the scale-out benchmark instead (scale.go): clusters grown online
// from the first size, each node CPU-capped by a cgroup, oracle pairs/s spread over every node
// and through the routing client, as ratios to the first size (make bench-scale).
//
// On one node it also calibrates the machine: the nonce workload on bench/cmd/skfloor, the
// least an HTTP service can do per request (net/http, shardkeeper's JSON decoding, one
// fsynced Pebble write; and again with nothing stored). The comparison then shows how far
// Redis is out of reach on these cores for any such service, and how much of the rest of the
// gap is shardkeeper's own (Raft, actors, expiry).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/shardkeeper/shardkeeper/bench/internal/load"
	"github.com/shardkeeper/shardkeeper/bench/internal/workload"
)

// opTimeout bounds one operation (it covers two requests).
const opTimeout = 10 * time.Second

// options are the command-line flags.
type options struct {
	duration, warmup  time.Duration
	clients           []int
	workloads         []string
	skipRedis         bool
	skipFloor         bool
	skipEtcd          bool
	nodes             int
	out               string
	bin               string
	urls              []string
	partitions        int
	raftGroups        int
	devices, servers  int
	keep              bool
	skipRelayer       bool
	relayerLatency    time.Duration
	skipChain         bool
	chainLatency      time.Duration
	chainDuration     time.Duration
	chainWarmup       time.Duration
	chainWindow       int
	chainBundleWindow int
	profile           string // directory for CPU profiles of the nodes
	profileClients    int
	profileFrom       []string // the nodes' debug URLs, while measuring shardkeeper

	// The scale-out benchmark (scale.go), run instead of the others when scale is set.
	scale         []int // cluster sizes, grown online from the first
	scaleClients  []int // clients per node
	scaleRounds   int
	scaleLeadWait time.Duration
	scalePreload  time.Duration
	scaleLogLevel string
	cpuCap        int // % of one core per node; 0: uncapped
}

// layoutArgs are the shardkeeper flags of the partition layout beyond --partitions.
func (o options) layoutArgs() []string {
	if o.raftGroups == 0 {
		return nil
	}
	return []string{"--raft-groups", strconv.Itoa(o.raftGroups)}
}

func main() {
	opts, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "skbench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	if len(opts.scale) > 0 {
		err = runScale(ctx, opts)
	} else {
		err = run(ctx, opts)
	}
	interrupted := ctx.Err() != nil
	stop()
	if err != nil {
		if interrupted {
			fmt.Fprintln(os.Stderr, "skbench: interrupted; every child process has been stopped")
			os.Exit(130)
		}
		fmt.Fprintln(os.Stderr, "skbench:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("skbench", flag.ContinueOnError)
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "measured time of each (workload, system, clients) run")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured warm-up before each run")
	clients := fs.String("clients", "1,16,64,256", "comma-separated concurrent client counts")
	workloads := fs.String("workloads", "oracle,device,heartbeat", "comma-separated workloads: oracle, device, heartbeat")
	fs.BoolVar(&o.skipRedis, "skip-redis", false, "do not run (or install) Redis")
	fs.BoolVar(&o.skipFloor, "skip-floor", false, "do not run the calibration server (bench/cmd/skfloor) on the nonce workload")
	fs.IntVar(&o.nodes, "nodes", 1, "shardkeeper nodes: 1 (compared with Redis) or 3 (a cluster, compared with a 3-member etcd)")
	fs.BoolVar(&o.skipEtcd, "skip-etcd", false, "with --nodes 3: do not run (or install) etcd")
	fs.StringVar(&o.out, "out", filepath.Join("bench", "results", "latest.json"), "JSON results file")
	fs.StringVar(&o.bin, "bin", "", "shardkeeper binary to run (default: go build one from this module)")
	urls := fs.String("url", "", "comma-separated base URLs of a running shardkeeper to measure instead of starting one (its limits must be out of the workloads' reach)")
	fs.IntVar(&o.partitions, "partitions", 16, "shardkeeper --partitions (with --scale too)")
	fs.IntVar(&o.raftGroups, "raft-groups", 0, "shardkeeper --raft-groups (0: the server's default)")
	fs.IntVar(&o.devices, "devices", 256, "pre-registered devices of the device workload")
	fs.IntVar(&o.servers, "servers", 1000, "server ids the heartbeat workload rotates over")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary directory (data, logs, binary)")
	fs.BoolVar(&o.skipRelayer, "skip-relayer", false, "do not run the relayer workload (one node only)")
	fs.DurationVar(&o.relayerLatency, "relayer-latency", 2*time.Millisecond, "one-way network delay of the fake NEAR node's connections in the relayer workload (an RPC node beside the relayer; a key sends one transaction per round trip)")
	fs.StringVar(&o.profile, "profile", "", "directory: write CPU and allocation profiles of every shardkeeper node, and a CPU profile of the load generator, for the measured time of each run at --profile-clients (read them with bench/cmd/skbudget)")
	fs.IntVar(&o.profileClients, "profile-clients", 64, "the client count whose runs --profile profiles (with --scale: per node)")
	fs.BoolVar(&o.skipChain, "skip-chain", false, "do not run the attestation chain workload (one node only)")
	fs.DurationVar(&o.chainLatency, "chain-latency", 2*time.Second, "delay the fake Arweave node adds to every answer in the chain workload")
	fs.DurationVar(&o.chainDuration, "chain-duration", 20*time.Second, "measured time of each chain run")
	fs.DurationVar(&o.chainWarmup, "chain-warmup", 8*time.Second, "unmeasured warm-up before each chain run")
	fs.IntVar(&o.chainWindow, "chain-window", 512, "events the chain workload keeps accepted and not yet taken by the node")
	fs.IntVar(&o.chainBundleWindow, "chain-bundle-window", 20000, "events the chain workload in bundle mode keeps accepted and not yet in a wrapper the node took")
	scale := fs.String("scale", "", "run the scale-out benchmark instead: comma-separated cluster sizes, grown online from the first (e.g. 3,6,9)")
	scaleClients := fs.String("scale-clients", "128,256", "with --scale: comma-separated client counts per node; the best is reported")
	fs.IntVar(&o.scaleRounds, "scale-rounds", 3, "with --scale: rounds (each grows a fresh cluster); medians are reported")
	fs.DurationVar(&o.scalePreload, "scale-preload", 30*time.Second, "with --scale: how long the workload runs, unmeasured, before each size is measured (0: not at all)")
	fs.StringVar(&o.scaleLogLevel, "scale-log-level", "warn", "with --scale: the nodes' --log-level (info logs every leadership change and split; with --keep the logs stay)")
	fs.DurationVar(&o.scaleLeadWait, "scale-lead-wait", 3*time.Minute, "with --scale: how long to wait, after growing, for every node to lead a Raft group before measuring anyway")
	fs.IntVar(&o.cpuCap, "cpu-cap", 15, "with --scale: % of one core each node may use (a cgroup; needs root and the cgroup v1 cpu controller); 0: uncapped")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if *scale != "" {
		var err error
		if o.scale, err = positiveInts("--scale", *scale); err != nil {
			return o, err
		}
		if !slices.IsSorted(o.scale) {
			return o, fmt.Errorf("--scale: sizes %v must grow", o.scale)
		}
		if o.scaleClients, err = positiveInts("--scale-clients", *scaleClients); err != nil {
			return o, err
		}
		if o.scaleRounds < 1 || o.cpuCap < 0 || o.cpuCap > 100 || o.scalePreload < 0 {
			return o, errors.New("--scale-rounds must be >= 1, --cpu-cap within 0..100 and --scale-preload >= 0")
		}
		if !slices.Contains([]string{"debug", "info", "warn", "error"}, o.scaleLogLevel) {
			return o, fmt.Errorf("--scale-log-level %q: one of debug, info, warn, error", o.scaleLogLevel)
		}
		if o.profile != "" && !slices.Contains(o.scaleClients, o.profileClients) {
			return o, fmt.Errorf("--profile-clients %d: with --scale, one of the --scale-clients counts per node %v", o.profileClients, o.scaleClients)
		}
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.duration <= 0 || o.warmup < 0 || o.chainDuration <= 0 || o.chainWarmup < 0 || o.chainWindow < 1 || o.chainBundleWindow < 1 {
		return o, errors.New("--duration and --chain-duration must be > 0, --warmup and --chain-warmup >= 0, --chain-window and --chain-bundle-window >= 1")
	}
	var err error
	if o.clients, err = positiveInts("--clients", *clients); err != nil {
		return o, err
	}
	for _, s := range strings.Split(*workloads, ",") {
		s = strings.TrimSpace(s)
		if _, ok := workload.Names[s]; !ok {
			return o, fmt.Errorf("--workloads: unknown workload %q (oracle, device, heartbeat)", s)
		}
		if !slices.Contains(o.workloads, s) {
			o.workloads = append(o.workloads, s)
		}
	}
	if *urls != "" {
		o.urls = strings.Split(*urls, ",")
	}
	if o.nodes != 1 && o.nodes != 3 {
		return o, fmt.Errorf("--nodes: %d is not 1 or 3", o.nodes)
	}
	if o.devices < 1 || o.servers < 1 || o.partitions < 1 {
		return o, errors.New("--devices, --servers and --partitions must be >= 1")
	}
	return o, nil
}

// positiveInts parses a comma-separated list of positive integers (flag name for errors).
func positiveInts(name, list string) ([]int, error) {
	var out []int
	for _, s := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s: %q is not a positive integer", name, s)
		}
		out = append(out, n)
	}
	return out, nil
}

// logf prints a progress line on stderr.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "skbench %s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// workDir makes the run's temporary directory; done removes it, or with --keep says where
// it is.
func workDir(o options, prefix string) (dir string, done func(), err error) {
	if dir, err = os.MkdirTemp("", prefix); err != nil {
		return "", nil, err
	}
	if o.keep {
		return dir, func() { logf("kept %s", dir) }, nil
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

func run(ctx context.Context, o options) error {
	tmp, done, err := workDir(o, "skbench-")
	if err != nil {
		return err
	}
	defer done()
	if avg, ok := loadAverage(); ok && avg > float64(runtime.NumCPU())/2 {
		logf("WARNING: load average %.1f on %d CPUs: other processes compete for CPU and disk, so the numbers will be low and noisy", avg, runtime.NumCPU())
	}
	relay := o.nodes == 1 && len(o.urls) == 0 && !o.skipRelayer
	anchor := o.nodes == 1 && len(o.urls) == 0 && !o.skipChain
	if o.bin == "" && (len(o.urls) == 0 || relay || anchor) {
		if o.bin, err = buildShardkeeper(ctx, tmp); err != nil {
			return err
		}
	}
	rows := []row{}
	if err := runShardkeeper(ctx, o, tmp, &rows); err != nil {
		return err
	}
	if slices.Contains(o.workloads, workload.Oracle) {
		switch {
		case o.nodes == 3 && o.skipEtcd:
			logf("--skip-etcd: no etcd comparison")
		case o.nodes == 3:
			if err := runEtcd(ctx, o, tmp, &rows); err != nil {
				return err
			}
		case o.skipRedis:
			logf("--skip-redis: no Redis comparison")
		default:
			if err := runRedis(ctx, o, tmp, &rows); err != nil {
				return err
			}
		}
		if o.nodes == 1 && !o.skipFloor {
			if err := runFloor(ctx, o, tmp, &rows); err != nil {
				return err
			}
		}
	}
	if relay {
		if err := runRelayer(ctx, o, o.bin, tmp, &rows); err != nil {
			return err
		}
	}
	if anchor {
		if err := runChain(ctx, o, o.bin, tmp, &rows); err != nil {
			return err
		}
		if err := runBundles(ctx, o, o.bin, tmp, &rows); err != nil {
			return err
		}
	}
	fmt.Println()
	printTable(os.Stdout, rows)
	if o.nodes == 3 {
		printClusterComparison(os.Stdout, rows)
		printClusterGoals(os.Stdout, rows)
		// Keep the file's other rows (the one-node run's), replacing earlier rows of the
		// systems measured now.
		n, err := appendJSON(o.out, rows)
		if err != nil {
			return fmt.Errorf("write results: %w", err)
		}
		logf("results appended to %s (%d rows in all)", o.out, n)
		return nil
	}
	printComparison(os.Stdout, rows)
	printGoals(os.Stdout, rows)
	printRelayer(os.Stdout, rows, o.relayerLatency)
	printChain(os.Stdout, rows, o.chainLatency, o.chainWindow)
	printBundles(os.Stdout, rows, o.chainLatency)
	if err := writeJSON(o.out, rows); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	logf("results written to %s", o.out)
	return nil
}

// runShardkeeper starts a fresh node or 3-node cluster (or uses --url) and measures every
// selected workload.
func runShardkeeper(ctx context.Context, o options, tmp string, rows *[]row) error {
	urls, procs, system := o.urls, []*process(nil), sysShardkeeper
	if o.nodes == 3 {
		system = sysShardkeeper3
	}
	if len(urls) == 0 {
		bin := o.bin
		dir := filepath.Join(tmp, "shardkeeper")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if o.nodes == 3 {
			nodes, err := startShardkeeperCluster(ctx, bin, dir, o.partitions, 3, o.layoutArgs()...)
			if err != nil {
				return err
			}
			defer func() {
				logf("stopping the shardkeeper cluster")
				stopAll(nodeProcesses(nodes), 15*time.Second)
			}()
			procs = nodeProcesses(nodes)
			for _, n := range nodes {
				urls = append(urls, n.url)
				o.profileFrom = append(o.profileFrom, n.debug)
			}
		} else {
			node, err := startShardkeeper(ctx, bin, dir, o.partitions, o.layoutArgs()...)
			if err != nil {
				return err
			}
			defer func() {
				logf("stopping shardkeeper")
				node.stop(15 * time.Second)
			}()
			urls, procs = []string{node.url}, []*process{node.process}
			o.profileFrom = []string{node.debug}
		}
	}
	c, err := benchClient(urls, slices.Max(o.clients))
	if err != nil {
		return err
	}
	for _, w := range o.workloads {
		var opsFor func(clients int) []load.Op
		switch w {
		case workload.Oracle:
			opsFor = func(n int) []load.Op { return workload.OracleOps(c, n) }
		case workload.Device:
			logf("registering %d devices in registry %q", o.devices, workload.Registry)
			devs, err := workload.RegisterDevices(ctx, urls, o.devices)
			if err != nil {
				return err
			}
			opsFor = func(n int) []load.Op { return workload.DeviceOps(c, n, devs) }
		case workload.Heartbeat:
			opsFor = func(n int) []load.Op { return workload.HeartbeatOps(c, n, o.servers) }
		}
		for _, n := range o.clients {
			r, err := measure(ctx, o, procs, workload.Names[w], system, opsFor(n))
			if err != nil {
				return err
			}
			*rows = append(*rows, r)
		}
	}
	return nil
}

// runRedis finds (or installs) Redis, starts it and measures the oracle workload on it.
// Redis being unavailable is not an error: the comparison is skipped with a message.
func runRedis(ctx context.Context, o options, tmp string, rows *[]row) error {
	bin, why := findRedis(ctx)
	if bin == "" {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		logf("SKIPPING the Redis comparison: %s", why)
		return nil
	}
	dir := filepath.Join(tmp, "redis")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	rs, err := startRedis(ctx, bin, dir)
	if err != nil {
		return err
	}
	defer func() {
		logf("stopping redis-server")
		rs.stop(10 * time.Second)
	}()
	sha, err := rs.loadScript(ctx)
	if err != nil {
		return err
	}
	for _, n := range o.clients {
		ops, closeAll := workload.RedisOracleOps(rs.addr, sha, n, opTimeout)
		r, err := measure(ctx, o, []*process{rs.process}, workload.Names[workload.Oracle], sysRedis, ops)
		closeAll()
		if err != nil {
			return err
		}
		*rows = append(*rows, r)
	}
	return nil
}

// measure runs ops against the server processes ps (none: not ours) and reports progress. A
// server that died during the run, or an interrupt, is an error.
func measure(ctx context.Context, o options, ps []*process, name, system string, ops []load.Op) (row, error) {
	logf("%s on %s, %d clients: %v warm-up + %v", name, system, len(ops), o.warmup, o.duration)
	cpu := startCPUMeter(ps)
	var profiled func(opsPerS float64) error
	if o.profile != "" && len(ops) == o.profileClients && len(o.profileFrom) > 0 {
		profiled = startProfiles(ctx, o, fmt.Sprintf("%s-%s-%d", system, name, len(ops)))
	}
	res := load.Run(ctx, load.Config{Warmup: o.warmup, Duration: o.duration, OpTimeout: opTimeout, Classify: workload.Classify}, ops)
	if err := ctx.Err(); err != nil {
		return row{}, err
	}
	u := cpu.stop()
	if profiled != nil {
		if err := profiled(res.OpsPerSec); err != nil {
			return row{}, err
		}
	}
	for _, p := range ps {
		select {
		case <-p.done:
			return row{}, p.exitedEarly()
		default:
		}
	}
	r := newRow(name, system, res).withUsage(u)
	logf("  → %.0f ops/s, p50 %.2f ms, p99 %.2f ms, errors %s%s", r.OpsPerS, r.P50ms, r.P99ms, r.errorSummary(), u)
	return r, nil
}

// cpuMeter measures the CPU used by the server (all its processes), by the load generator and
// by the whole machine during a run, to tell a CPU-bound run from one that waits (on fsync, on
// a serial actor), and to say what one operation costs the server.
type cpuMeter struct {
	ps                          []*process
	start                       time.Time
	server, self                time.Duration
	machine                     machineTime
	serverOK, selfOK, machineOK bool
}

// machineTime is the machine's CPU time so far (all CPUs), and the parts of it spent idle and
// stolen by the hypervisor.
type machineTime struct{ total, idle, steal time.Duration }

// usage is what a cpuMeter measured over one run; a field whose ok flag is false was not.
type usage struct {
	serverCores, genCores float64 // CPU time per wall-clock second: the server's, the load generator's
	idle                  float64 // share of the machine's CPU time left idle (iowait included)
	steal                 float64 // share of the machine's CPU time the hypervisor gave to others
	servers               int     // server processes measured
	serverOK, genOK       bool
	idleOK                bool
}

// serverCPU is the CPU time used so far by every process of ps.
func serverCPU(ps []*process) (time.Duration, bool) {
	var sum time.Duration
	for _, p := range ps {
		d, ok := processCPU(p.cmd.Process.Pid)
		if !ok {
			return 0, false
		}
		sum += d
	}
	return sum, len(ps) > 0
}

func startCPUMeter(ps []*process) *cpuMeter {
	m := &cpuMeter{ps: ps, start: time.Now()}
	m.server, m.serverOK = serverCPU(ps)
	m.self, m.selfOK = selfCPU()
	m.machine, m.machineOK = machineCPU()
	return m
}

// stop returns what was measured since the start.
func (m *cpuMeter) stop() usage {
	wall := time.Since(m.start).Seconds()
	u := usage{servers: len(m.ps)}
	if now, ok := serverCPU(m.ps); ok && m.serverOK {
		u.serverCores, u.serverOK = (now-m.server).Seconds()/wall, true
	}
	if now, ok := selfCPU(); ok && m.selfOK {
		u.genCores, u.genOK = (now-m.self).Seconds()/wall, true
	}
	if now, ok := machineCPU(); ok && m.machineOK && now.total > m.machine.total {
		total := float64(now.total - m.machine.total)
		u.idle, u.steal, u.idleOK = float64(now.idle-m.machine.idle)/total, float64(now.steal-m.machine.steal)/total, true
	}
	return u
}

// String is "; CPU: server x cores, load generator y cores, machine z% idle, load average a on
// n CPUs" with what was measured.
func (u usage) String() string {
	var parts []string
	if u.serverOK {
		what := "server"
		if u.servers > 1 {
			what = fmt.Sprintf("servers (%d processes)", u.servers)
		}
		parts = append(parts, fmt.Sprintf("%s %.2f cores", what, u.serverCores))
	}
	if u.genOK {
		parts = append(parts, fmt.Sprintf("load generator %.2f cores", u.genCores))
	}
	if u.idleOK {
		parts = append(parts, fmt.Sprintf("machine %.0f%% idle", 100*u.idle))
		if u.steal >= 0.005 {
			parts = append(parts, fmt.Sprintf("%.0f%% stolen by the host", 100*u.steal))
		}
	}
	if avg, ok := loadAverage(); ok {
		parts = append(parts, fmt.Sprintf("load average %.1f on %d CPUs", avg, runtime.NumCPU()))
	}
	if len(parts) == 0 {
		return ""
	}
	return "; CPU: " + strings.Join(parts, ", ")
}
