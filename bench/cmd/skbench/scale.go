package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shardkeeper/shardkeeper/bench/internal/httpconn"
	"github.com/shardkeeper/shardkeeper/bench/internal/load"
	"github.com/shardkeeper/shardkeeper/bench/internal/workload"
	"github.com/shardkeeper/shardkeeper/client"
)

// The scale-out benchmark (--scale 3,6,9): does adding nodes to a running cluster add
// capacity? Each round starts a cluster of the first size with the server's default flags,
// measures it, grows it online to each next size (new nodes started with --join only),
// waits until every node leads a Raft group (at most --scale-lead-wait), and measures again.
// Before each size is measured the workload runs on it unmeasured (--scale-preload), so that
// every size is measured with its stores in their steady state, and the two modes below take
// turns at going first from round to round.
// Each node runs capped at --cpu-cap % of one core (a cgroup, when run as root), standing in
// for a fleet of small machines; the load generator keeps the rest of the machine. The
// workload is oracle issue+consume with clients in proportion to the nodes, once spread over
// every node (as behind a load balancer: most requests are forwarded to their leader) and once
// through the routing client (client.WithRouting: each request sent to its leader). Rounds
// are repeated and the medians reported, as ratios to the first size.

// scaleMode is how the load reaches the cluster.
type scaleMode string

const (
	modeEveryNode scaleMode = "every node"     // round robin over every node's URL
	modeRouting   scaleMode = "routing client" // client.WithRouting
)

// scaleResult is one measurement: a cluster size, a mode and a client count, in one round.
type scaleResult struct {
	round, nodes, perNode int
	mode                  scaleMode
	pairsPerS, p99ms      float64
	errors                int
	leaders               int     // nodes leading at least one Raft group when measured
	throttled             float64 // mean share of CFS periods the nodes were throttled in
	// leadAfter is how long after the nodes were ready every node led a group (or every
	// group had its own leader, with fewer groups than nodes); -1 when that did not happen.
	leadAfter time.Duration
}

// scaleNode is one node of the scale cluster.
type scaleNode struct {
	*process
	id, url, gossip, debug string
}

func runScale(ctx context.Context, o options) error {
	tmp, done, err := workDir(o, "skbench-scale-")
	if err != nil {
		return err
	}
	defer done()
	if o.bin == "" {
		if o.bin, err = buildShardkeeper(ctx, tmp); err != nil {
			return err
		}
	}
	var caps *cpuCaps
	if o.cpuCap > 0 {
		if caps, err = newCPUCaps(o.cpuCap); err != nil {
			logf("WARNING: the nodes run uncapped, sharing the machine's %d cores (%v); capacity then cannot grow with the nodes, so the ratios say little", runtime.NumCPU(), err)
		} else {
			defer caps.remove()
			logf("each node capped at %d%% of one core (cgroup %s)", o.cpuCap, caps.dir)
		}
	}
	var results []scaleResult
	for round := 1; round <= o.scaleRounds; round++ {
		rs, err := scaleRound(ctx, o, filepath.Join(tmp, "round"+strconv.Itoa(round)), caps, round)
		results = append(results, rs...)
		if err != nil {
			return err
		}
	}
	fmt.Println()
	printScale(os.Stdout, o, results, caps != nil)
	return nil
}

// scaleRound grows one cluster through o.scale and measures it at each size.
func scaleRound(ctx context.Context, o options, dir string, caps *cpuCaps, round int) (results []scaleResult, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var nodes []*scaleNode
	defer func() {
		logf("stopping the cluster of round %d", round)
		ps := make([]*process, len(nodes))
		for i, n := range nodes {
			ps[i] = n.process
		}
		stopAll(ps, 15*time.Second)
	}()
	first := o.scale[0]
	for _, size := range o.scale {
		for len(nodes) < size {
			n, err := startScaleNode(dir, o.bin, len(nodes)+1, first, o.partitions, o.scaleLogLevel, nodes)
			if err != nil {
				return results, err
			}
			nodes = append(nodes, n)
			if caps != nil {
				if err := caps.apply(n.id, n.cmd.Process.Pid); err != nil {
					return results, err
				}
			}
		}
		if caps != nil {
			caps.weigh(len(nodes))
		}
		var urls []string
		for _, n := range nodes {
			if err := n.waitFor(ctx, 90*time.Second, "ready", readyz(n.url)); err != nil {
				return results, err
			}
			urls = append(urls, n.url)
		}
		leaders, leadAfter := waitLeaders(ctx, urls, size, o.scaleLeadWait)
		if leadAfter >= 0 {
			logf("round %d: %d nodes, %d of them lead a Raft group %v after all were ready", round, size, leaders, leadAfter.Round(100*time.Millisecond))
		} else {
			logf("round %d: %d nodes, %d of them lead a Raft group after %v", round, size, leaders, o.scaleLeadWait)
		}
		if o.scalePreload > 0 {
			if err := preload(ctx, o, nodes, slices.Max(o.scaleClients)*size); err != nil {
				return results, err
			}
		}
		// The modes take turns at going first: a run leaves data behind whose flushes and
		// compactions the next run pays for.
		modes := []scaleMode{modeEveryNode, modeRouting}
		if round%2 == 0 {
			slices.Reverse(modes)
		}
		for _, perNode := range o.scaleClients {
			for _, mode := range modes {
				r, err := measureScale(ctx, o, round, nodes, caps, mode, perNode*size)
				if err != nil {
					return results, err
				}
				r.round, r.nodes, r.perNode, r.mode, r.leaders, r.leadAfter = round, size, perNode, mode, leaders, leadAfter
				results = append(results, r)
			}
		}
	}
	return results, nil
}

// startScaleNode starts node n<i> with the server's defaults (and --partitions when set to
// other than the default 16), logging at logLevel into <dir>/n<i>.log: the first
// bootstrap-expect nodes form the cluster, later ones join it through n1's gossip address.
func startScaleNode(dir, bin string, i, bootstrapExpect, partitions int, logLevel string, existing []*scaleNode) (*scaleNode, error) {
	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	addr := func(k int) string { return "127.0.0.1:" + strconv.Itoa(ports[k]) }
	id := "n" + strconv.Itoa(i)
	join := addr(1)
	if len(existing) > 0 {
		join = existing[0].gossip
	}
	args := []string{"serve", "--node-id", id, "--data-dir", filepath.Join(dir, id, "data"),
		"--http-addr", addr(0), "--gossip-addr", addr(1), "--raft-addr", addr(2), "--remote-addr", addr(3),
		"--debug-addr", addr(4), "--bootstrap-expect", strconv.Itoa(bootstrapExpect), "--join", join}
	if partitions > 0 && partitions != 16 {
		args = append(args, "--partitions", strconv.Itoa(partitions))
	}
	if logLevel == "" {
		logLevel = "warn"
	}
	args = append(append(args, limitArgs...), "--log-level", logLevel)
	p, err := startProcess("shardkeeper "+id, filepath.Join(dir, id+".log"), bin, args...)
	if err != nil {
		return nil, err
	}
	return &scaleNode{process: p, id: id, url: "http://" + addr(0), gossip: addr(1), debug: "http://" + addr(4)}, nil
}

func readyz(url string) func(context.Context) error {
	probe, err := client.New([]string{url}, client.WithRetryPolicy(client.NoRetry))
	if err != nil {
		return func(context.Context) error { return err }
	}
	return probe.Readyz
}

// waitLeaders waits until every one of the n nodes leads a Raft group (as the routing table
// says: the groups split as the cluster grows) and every group has a leader, for at most
// wait. With fewer partitions than nodes it waits for one leader per partition. It returns
// how many lead and how long it took (-1 when that did not happen). Then it waits, within the
// same bound, until the cluster has settled: every group on its full count of voters and
// none on its way in or out, and the leaders and every partition's replicas unchanged for
// settleFor, so that the measurement sees the grown cluster's capacity and not the last
// leadership transfers and replica moves (snapshots) of its growth. (A replica still catching
// up may sit unchanged for longer than settleFor: a node opens a group born by a split only
// once gossip has told it of the group.)
func waitLeaders(ctx context.Context, urls []string, n int, wait time.Duration) (int, time.Duration) {
	start := time.Now()
	// One node answers every poll: the views of two nodes may differ for a moment, which would
	// read as the cluster changing.
	c, err := client.New(urls[:1], client.WithRetryPolicy(client.NoRetry))
	if err != nil {
		return 0, -1
	}
	leaders, leadAfter := 0, time.Duration(-1)
	var shape string
	var since time.Time
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		rt, err := c.GetRoutes(cctx)
		var st *client.ClusterStatus
		if err == nil {
			st, err = c.Cluster(cctx)
		}
		cancel()
		if err == nil {
			seen, led := map[string]bool{}, true
			for _, g := range rt.Groups {
				if g.Leader != "" {
					seen[g.Leader] = true
				}
				led = led && g.Leader != ""
			}
			leaders = len(seen)
			if leadAfter < 0 && led && leaders >= min(n, rt.Partitions) {
				leadAfter = time.Since(start)
			}
			if now := clusterShape(rt, st); now != shape {
				shape, since = now, time.Now()
			}
			if leadAfter >= 0 && placed(st, min(serverReplicas, n)) && time.Since(since) >= settleFor {
				logf("the cluster settled %v after all were ready; %s", time.Since(start).Round(100*time.Millisecond), layout(rt, st))
				return leaders, leadAfter
			}
		}
		if time.Since(start) > wait || ctx.Err() != nil {
			if leadAfter >= 0 {
				logf("WARNING: measuring before the cluster has settled: its groups did not all reach %d voters, or its leaders and replicas did not stay unchanged for %v, within %v", min(serverReplicas, n), settleFor, wait)
			}
			return leaders, leadAfter
		}
		time.Sleep(time.Second)
	}
}

// settleFor is how long the leaders and replicas must stay unchanged before a measurement.
const settleFor = 10 * time.Second

// serverReplicas is the server's default replication factor (--replicas), which the
// benchmark's clusters run with.
const serverReplicas = 3

// placed reports whether every partition has exactly r voters and no non-voter: no replica
// is on its way in or out.
func placed(st *client.ClusterStatus, r int) bool {
	for _, p := range st.Partitions {
		if len(p.Voters) != r || len(p.NonVoters) != 0 {
			return false
		}
	}
	return true
}

// clusterShape is what must stay unchanged for the cluster to count as settled: each group's
// range and leader, and each partition's voters and non-voters.
func clusterShape(rt *client.Routes, st *client.ClusterStatus) string {
	var b strings.Builder
	for _, g := range rt.Groups {
		fmt.Fprintf(&b, "%d-%d:%s;", g.First, g.End, g.Leader)
	}
	for _, p := range st.Partitions {
		fmt.Fprintf(&b, "%v/%v;", slices.Sorted(slices.Values(p.Voters)), slices.Sorted(slices.Values(p.NonVoters)))
	}
	return b.String()
}

// layout says, per node, the groups and partitions it leads and the groups it is a voter of:
// in a closed loop the busiest node sets everyone's pace.
func layout(rt *client.Routes, st *client.ClusterStatus) string {
	type share struct{ groups, partitions, voter int }
	by := map[string]*share{}
	node := func(id string) *share {
		if by[id] == nil {
			by[id] = &share{}
		}
		return by[id]
	}
	for _, g := range rt.Groups {
		if g.Leader != "" {
			node(g.Leader).groups++
			node(g.Leader).partitions += int(g.End - g.First)
		}
	}
	seen := map[uint32]bool{}
	for _, p := range st.Partitions {
		if !seen[p.Group] {
			seen[p.Group] = true
			for _, v := range p.Voters {
				node(v).voter++
			}
		}
	}
	ids := slices.Sorted(maps.Keys(by))
	parts := make([]string, len(ids))
	for i, id := range ids {
		l := by[id]
		parts[i] = fmt.Sprintf("%s leads %d (%d partitions), votes in %d", id, l.groups, l.partitions, l.voter)
	}
	return "groups per node: " + strings.Join(parts, "; ")
}

// scaleClient is the load generator's client for clients clients in mode, and its transport,
// whose connections the caller closes once done.
func scaleClient(ctx context.Context, urls []string, mode scaleMode, clients int) (*client.Client, *httpconn.Transport, error) {
	tr := &httpconn.Transport{MaxIdlePerHost: 2 * clients, DialTimeout: 5 * time.Second, IdleTimeout: 90 * time.Second}
	opts := []client.Option{client.WithRetryPolicy(client.NoRetry), client.WithHTTPClient(&http.Client{Transport: tr})}
	if mode == modeRouting {
		opts = append(opts, client.WithRouting())
	}
	c, err := client.New(urls, opts...)
	if err != nil {
		return nil, nil, err
	}
	if mode == modeRouting {
		if err := c.RefreshRoutes(ctx); err != nil {
			return nil, nil, fmt.Errorf("routing table: %w", err)
		}
	}
	return c, tr, nil
}

// preload runs the workload unmeasured for o.scalePreload before a size is measured, so that
// every size is measured with its stores in their steady state: a fresh store's first
// seconds, and those of a node that has just taken its replicas by snapshot, cost less per
// pair than any after them, until memtables flush and compactions follow.
func preload(ctx context.Context, o options, nodes []*scaleNode, clients int) error {
	urls := make([]string, len(nodes))
	for i, n := range nodes {
		urls[i] = n.url
	}
	c, tr, err := scaleClient(ctx, urls, modeEveryNode, clients)
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections()
	logf("oracle on %d nodes, %d clients, unmeasured for %v: the stores reach their steady state", len(nodes), clients, o.scalePreload)
	load.Run(ctx, load.Config{Duration: o.scalePreload, OpTimeout: opTimeout, Classify: workload.Classify}, workload.OracleOps(c, clients))
	return ctx.Err()
}

// measureScale runs the oracle workload with clients clients in mode, and reads how much the
// nodes were throttled meanwhile.
func measureScale(ctx context.Context, o options, round int, nodes []*scaleNode, caps *cpuCaps, mode scaleMode, clients int) (scaleResult, error) {
	var urls []string
	for _, n := range nodes {
		urls = append(urls, n.url)
	}
	c, tr, err := scaleClient(ctx, urls, mode, clients)
	if err != nil {
		return scaleResult{}, err
	}
	defer tr.CloseIdleConnections()
	before := map[string]throttleMark{}
	if caps != nil {
		for _, n := range nodes {
			p, t := caps.throttled(n.id)
			before[n.id] = throttleMark{p, t}
		}
	}
	logf("oracle on %d nodes, %s, %d clients: %v warm-up + %v", len(nodes), mode, clients, o.warmup, o.duration)
	ps := make([]*process, len(nodes))
	for i, n := range nodes {
		ps[i] = n.process
	}
	// The CPU and the Raft commands are counted over the measured window, as the pairs are.
	type baseline struct {
		cpu     *cpuMeter
		commits commitTotals
	}
	measured := make(chan baseline, 1)
	go func() {
		if sleep(ctx, o.warmup) == nil {
			measured <- baseline{startCPUMeter(ps), commitSums(ctx, nodes)}
		}
		close(measured)
	}()
	var profiled func(opsPerS float64) error
	if o.profile != "" && clients == o.profileClients*len(nodes) {
		o.profileFrom = nil
		for _, n := range nodes {
			o.profileFrom = append(o.profileFrom, n.debug)
		}
		profiled = startProfiles(ctx, o, fmt.Sprintf("scale-round%d-%d-%s-%d", round, len(nodes), mode, o.profileClients))
	}
	res := load.Run(ctx, load.Config{Warmup: o.warmup, Duration: o.duration, OpTimeout: opTimeout, Classify: workload.Classify},
		workload.OracleOps(c, clients))
	if err := ctx.Err(); err != nil {
		return scaleResult{}, err
	}
	var u usage
	var commits commitTotals
	if b, ok := <-measured; ok {
		u, commits = b.cpu.stop(), commitSums(ctx, nodes).minus(b.commits)
	}
	if profiled != nil {
		if err := profiled(res.OpsPerSec); err != nil {
			return scaleResult{}, err
		}
	}
	for _, n := range nodes {
		select {
		case <-n.done:
			return scaleResult{}, n.exitedEarly()
		default:
		}
	}
	r := scaleResult{pairsPerS: res.OpsPerSec, p99ms: float64(res.P99) / float64(time.Millisecond), errors: res.ErrorCount()}
	// Each node's share of its periods throttled since before (-1: not measured).
	throttled := make([]float64, len(nodes))
	for i, n := range nodes {
		throttled[i] = -1
		if caps != nil {
			p, t := caps.throttled(n.id)
			if dp := p - before[n.id].periods; dp > 0 {
				throttled[i] = float64(t-before[n.id].throttled) / float64(dp)
				r.throttled += throttled[i] / float64(len(nodes))
			}
		}
	}
	logNodes(o, nodes, throttled, commits)
	logf("  → %.0f pairs/s, p99 %.1f ms, %d errors%s, nodes throttled in %.0f%% of periods%s", r.pairsPerS, r.p99ms, r.errors, errorClasses(res.Errors), 100*r.throttled, u)
	if u.serverOK && r.pairsPerS > 0 {
		logf("    %.0f µs of node CPU per pair; %s", 1e6*u.serverCores/r.pairsPerS, commits)
	}
	return r, nil
}

// printScale prints each round's figures and, per size and mode, the median over rounds of
// the best client count, with its ratio to the first size's.
func printScale(w io.Writer, o options, results []scaleResult, capped bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	capping := "uncapped"
	if capped {
		capping = fmt.Sprintf("each node capped at %d%% of a core", o.cpuCap)
	}
	per := make([]string, len(o.scaleClients))
	for i, c := range o.scaleClients {
		per[i] = strconv.Itoa(c)
	}
	fmt.Fprintf(w, "Scale-out: oracle issue+consume pairs/s, %s, the better of %s clients per node; clusters grown online from %d nodes\n\n",
		capping, strings.Join(per, " and "), o.scale[0])
	fmt.Fprintln(tw, "round\tnodes\tleading\tafter\tmode\tclients/node\tpairs/s\tp99 ms\terrors\tthrottled\t")
	for _, r := range results {
		after := "-"
		if r.leadAfter >= 0 {
			after = r.leadAfter.Round(100 * time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\t%d\t%.0f\t%.1f\t%d\t%.0f%%\t\n", r.round, r.nodes, r.leaders, after, r.mode, r.perNode, r.pairsPerS, r.p99ms, r.errors, 100*r.throttled)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	best := bestPerRound(results)
	fmt.Fprintf(tw, "nodes\tmode\truns (pairs/s)\tmedian\tratio to %d nodes\t\n", o.scale[0])
	for _, mode := range []scaleMode{modeEveryNode, modeRouting} {
		base := median(best[scaleKey{o.scale[0], mode}])
		for _, size := range o.scale {
			runs := best[scaleKey{size, mode}]
			m := median(runs)
			ratio := "-"
			if base > 0 {
				ratio = fmt.Sprintf("%.2f×", m/base)
			}
			var each []string
			for _, v := range runs {
				each = append(each, fmt.Sprintf("%.0f", v))
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%.0f\t%s\t\n", size, mode, strings.Join(each, " "), m, ratio)
		}
	}
	_ = tw.Flush()
}

type scaleKey struct {
	nodes int
	mode  scaleMode
}

// bestPerRound is, per size and mode, each round's best pairs/s over the client counts.
func bestPerRound(results []scaleResult) map[scaleKey][]float64 {
	type k struct {
		scaleKey
		round int
	}
	best := map[k]float64{}
	for _, r := range results {
		key := k{scaleKey{r.nodes, r.mode}, r.round}
		best[key] = max(best[key], r.pairsPerS)
	}
	out := map[scaleKey][]float64{}
	keys := make([]k, 0, len(best))
	for key := range best {
		keys = append(keys, key)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].round < keys[j].round })
	for _, key := range keys {
		out[key.scaleKey] = append(out[key.scaleKey], best[key])
	}
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// errorClasses lists the classes of a run's errors, most frequent first: " (12 timeout, 3 503 unavailable)".
func errorClasses(errs map[string]int) string {
	if len(errs) == 0 {
		return ""
	}
	classes := make([]string, 0, len(errs))
	for c := range errs {
		classes = append(classes, c)
	}
	sort.Slice(classes, func(i, j int) bool { return errs[classes[i]] > errs[classes[j]] })
	parts := make([]string, len(classes))
	for i, c := range classes {
		parts[i] = fmt.Sprintf("%d %s", errs[c], c)
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// commitTotals sums, over the nodes, the shardkeeper_commit_messages histogram: Raft commands
// proposed and the messages whose writes they carried; perNode keeps each node's own commands
// and HTTP requests answered, to show whether one node sets the pace.
type commitTotals struct {
	commands, messages float64
	perNode            []nodeTotals
}

type nodeTotals struct{ commands, requests float64 }

func (a commitTotals) minus(b commitTotals) commitTotals {
	d := commitTotals{commands: a.commands - b.commands, messages: a.messages - b.messages}
	for i, n := range a.perNode {
		if i < len(b.perNode) {
			n.commands -= b.perNode[i].commands
			n.requests -= b.perNode[i].requests
		}
		d.perNode = append(d.perNode, n)
	}
	return d
}

func (a commitTotals) String() string {
	if a.commands <= 0 {
		return "no Raft commands seen in /metrics"
	}
	return fmt.Sprintf("%.1f messages per Raft command (%.0f commands)", a.messages/a.commands, a.commands)
}

// commitSums reads every node's /metrics; a node that does not answer counts nothing.
func commitSums(ctx context.Context, nodes []*scaleNode) commitTotals {
	var t commitTotals
	for _, n := range nodes {
		var own nodeTotals
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		req, err := http.NewRequestWithContext(cctx, http.MethodGet, n.url+"/metrics", nil)
		if err == nil {
			var resp *http.Response
			if resp, err = http.DefaultClient.Do(req); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				for _, line := range strings.Split(string(b), "\n") {
					name, value, ok := strings.Cut(line, " ")
					if !ok {
						continue
					}
					v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
					if err != nil {
						continue
					}
					switch {
					case name == "shardkeeper_commit_messages_count":
						t.commands += v
						own.commands += v
					case name == "shardkeeper_commit_messages_sum":
						t.messages += v
					case strings.HasPrefix(name, "shardkeeper_http_requests_total{") && strings.Contains(name, `route="/v1/nonces`):
						own.requests += v
					}
				}
			}
		}
		cancel()
		t.perNode = append(t.perNode, own)
	}
	return t
}

type throttleMark struct{ periods, throttled int64 }

// logNodes logs, per node, the share of the cap's periods it was throttled in (warm-up
// included), and the nonce requests it answered and the Raft commands it proposed over the
// measured time: in a closed loop the busiest node sets everyone's pace, which the cluster's
// averages hide.
func logNodes(o options, nodes []*scaleNode, throttled []float64, commits commitTotals) {
	secs := o.duration.Seconds()
	parts := make([]string, 0, len(nodes))
	for i, n := range nodes {
		part := n.id
		if throttled[i] >= 0 {
			part += fmt.Sprintf(" %.0f%%", 100*throttled[i])
		}
		if i < len(commits.perNode) && secs > 0 {
			part += fmt.Sprintf(" %.0f req/s %.0f cmd/s", commits.perNode[i].requests/secs, commits.perNode[i].commands/secs)
		}
		parts = append(parts, part)
	}
	logf("    per node (throttled, nonce requests answered, Raft commands proposed): %s", strings.Join(parts, "; "))
}
