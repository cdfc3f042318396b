package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/services/servers"
	"github.com/shardkeeper/shardkeeper/test/proc"
)

// A fault is injected into a loaded cluster and healed again; see TestChaos.
type fault struct {
	name  string
	short bool     // part of the -short subset
	net   bool     // needs nftables (root)
	retry bool     // clients retry (rolling restart): no request may fail permanently
	flags []string // the cluster's, after the relayer's
	run   func(s *scenario)
}

var faults = []fault{
	{name: "kill-leader", short: true, run: killLeader},
	{name: "kill-follower", run: killFollower},
	{name: "stop-follower", short: true, run: func(s *scenario) { stopNode(s, false) }},
	{name: "stop-leader", run: func(s *scenario) { stopNode(s, true) }},
	{name: "restart", short: true, run: restartWithData},
	{name: "wipe", short: true, run: wipeAndRejoin},
	{name: "rolling-restart", retry: true, run: rollingRestart},
	{name: "partition-minority", net: true, run: isolateFollower},
	{name: "partition-leader", short: true, net: true, run: isolateLeader},
	{name: "partition-bridge", net: true, run: bridge},
	{name: "partition-one-way", net: true, run: oneWay},
	{name: "grow-shrink", retry: true, flags: []string{"--merge-delay=2s"}, run: growAndShrink},
}

// Phases of every scenario: load alone, then the fault (load goes on), then load after the
// heal.
const (
	loadBefore = 3 * time.Second
	loadAfter  = 4 * time.Second
)

// failovers collects every failover measured in this run (for the summary line).
var (
	failoverMu  sync.Mutex
	allFailover []time.Duration
)

// TestChaos runs every fault against a fresh three-node cluster under load, for
// -chaos.seeds seeds (one in -short mode, where only the faults marked short run). Each run:
// load starts; the fault is injected and healed; load goes on; then load stops, the replicas
// must converge to the same applied index and state hash per partition, and each history
// must be linearizable under its model (NonceModel, ChallengeModel, ServerModel, and
// RelayerModel for the relayer's intents, which are also checked against the ledger of the
// scenario's fake NEAR node: each landed exactly once, nonces in order).
func TestChaos(t *testing.T) {
	seeds := *flagSeeds
	if testing.Short() {
		seeds = 1
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			if testing.Short() && !f.short {
				t.Skip("not part of the -short subset (make chaos runs it)")
			}
			if f.net {
				requireNetwork(t)
			}
			for i := range seeds {
				seed := *flagSeed + int64(i)
				t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runScenario(t, f, uint64(seed)) })
			}
		})
	}
	failoverMu.Lock()
	defer failoverMu.Unlock()
	if len(allFailover) > 0 {
		t.Log(failoverLine(allFailover))
	}
}

func failoverLine(ds []time.Duration) string {
	sorted := slices.Sorted(slices.Values(ds))
	var parts []string
	for _, d := range ds {
		parts = append(parts, fmt.Sprintf("%.2fs", d.Seconds()))
	}
	median := sorted[len(sorted)/2]
	if len(sorted)%2 == 0 {
		median = (sorted[len(sorted)/2-1] + sorted[len(sorted)/2]) / 2
	}
	return fmt.Sprintf("failover: median %.2fs over %d kills (%s)", median.Seconds(), len(ds), strings.Join(parts, " "))
}

// scenario is one run of a fault.
type scenario struct {
	t         *testing.T
	c         *cluster
	w         *workload
	rl        *relayerLoad // the relayer's load, over a fake NEAR node of the scenario
	rnd       *rand.Rand
	failovers []time.Duration
}

// startLoaded starts a cluster with flags, puts the oracle workload of seed on it (clients
// retry) and lets it run for loadBefore.
func startLoaded(t *testing.T, seed uint64, flags ...string) *scenario {
	c := startClusterBinding(t, false, flags...)
	s := &scenario{t: t, c: c, rnd: rand.New(rand.NewPCG(seed, 0))}
	s.w = newWorkload(c, seed, true)
	s.w.start()
	c.note("load started")
	time.Sleep(loadBefore)
	return s
}

func runScenario(t *testing.T, f fault, seed uint64) {
	begin := time.Now()
	env := startChaosRelayerEnv(t, seed)
	c := startClusterBinding(t, false, append(env.flags, f.flags...)...)
	s := &scenario{t: t, c: c, rnd: rand.New(rand.NewPCG(seed, 0))}
	s.w = newWorkload(c, seed, f.retry)
	s.rl = newRelayerLoad(c, env, seed)
	t.Cleanup(func() { healNetwork(t) })

	s.w.start()
	s.rl.start()
	c.note("load started")
	time.Sleep(loadBefore)
	f.run(s)
	healNetwork(t)
	c.note("healed; load goes on")
	before, relayerBefore := s.w.acked.Load(), s.rl.acked()
	time.Sleep(loadAfter)
	progress, relayerProgress := s.w.acked.Load()-before, s.rl.acked()-relayerBefore
	s.w.stopLoad()
	s.rl.stopLoad()
	c.note("load stopped")
	if progress == 0 {
		t.Errorf("no request got a definite answer in the %s after the heal", loadAfter)
	}
	if relayerProgress == 0 {
		t.Errorf("no relayer intent was answered in the %s after the heal", loadAfter)
	}
	s.rl.settle()

	s.finish(f.retry)
	if len(s.failovers) > 0 {
		t.Log(failoverLine(s.failovers))
		failoverMu.Lock()
		allFailover = append(allFailover, s.failovers...)
		failoverMu.Unlock()
	}
	t.Logf("scenario took %s", time.Since(begin).Round(time.Millisecond))
}

// finish waits for the replicas to converge, reads back, checks every history and reports
// answers no model allows; with retry, every logical request must have got an answer.
func (s *scenario) finish(retry bool) {
	t := s.t
	s.c.waitConverged(90*time.Second, true)
	s.finalReads()
	s.checkHistories()
	if s.rl != nil {
		s.rl.check()
	}
	t.Logf("operations: %s", s.w.statsLine())
	s.w.mu.Lock()
	for _, u := range s.w.unexpected {
		t.Errorf("unexpected answer (a server error, never a legal outcome): %s", u)
	}
	if retry {
		for _, p := range s.w.permanent {
			t.Errorf("request failed permanently: %s", p.msg)
		}
		if len(s.w.permanent) == 0 {
			t.Logf("no request failed permanently (clients retried 503/429 after Retry-After and refused connections on the next node)")
		}
	}
	s.w.mu.Unlock()
}

// finalReads reads back, after convergence, what the load touched: a sample of the nonces,
// every server registry through every node, and a replayed verify of a sample of the
// challenges. They join the histories, so an acknowledged write lost in the fault shows up
// as a violation.
func (s *scenario) finalReads() {
	w := s.w
	begin, acked := time.Now(), w.acked.Load()
	defer func() {
		s.t.Logf("final reads took %s (%d definite answers)", time.Since(begin).Round(time.Millisecond), w.acked.Load()-acked)
	}()
	wk := &worker{w: w, id: w.ids.New(), rnd: rand.New(rand.NewPCG(w.seed, 99))}
	seen := map[string]bool{}
	for _, op := range w.nonces.Ops() {
		in := op.Input.(Input)
		if in.Op == OpConsume && !seen[in.Key] && len(seen) < 300 {
			seen[in.Key] = true
			wk.getNonce(in.Key)
		}
	}
	for _, reg := range w.srvRegs {
		for range w.c.nodes {
			wk.listServers(reg)
		}
	}
	seen = map[string]bool{}
	for _, op := range w.challenges.Ops() {
		in := op.Input.(Input)
		if in.Op != OpChallenge || seen[in.Key] || len(seen) >= 150 {
			continue
		}
		seen[in.Key] = true
		parts := strings.SplitN(in.Key, "/", 3) // registry/device/nonce
		reg, devID, nonce := parts[0], parts[1], parts[2]
		i := slices.IndexFunc(w.devices[reg], func(d deviceKey) bool { return d.id == devID })
		wk.verify(reg, w.devices[reg][i], nonce, true) // a replay: 409 unless still pending
	}
}

// checkHistories checks each history against its model (cluster.checkHistory).
func (s *scenario) checkHistories() {
	for _, h := range []struct {
		name  string
		model porcupine.Model
		rec   *Recorder
	}{{"nonces", NonceModel, s.w.nonces}, {"challenges", ChallengeModel, s.w.challenges}, {"servers", ServerModel, s.w.servers}} {
		s.c.checkHistory(h.name, h.model, h.rec.Ops())
	}
}

// checkHistory checks ops against model and logs the verdict; a violation fails the test and
// writes porcupine's visualization next to the node logs.
func (c *cluster) checkHistory(name string, model porcupine.Model, ops []porcupine.Operation) {
	t := c.t
	unknown := 0
	for _, op := range ops {
		if op.Output.(Output).Unknown {
			unknown++
		}
	}
	start := time.Now()
	res := Check(model, ops, 2*time.Minute, filepath.Join(c.dir, name+".html"), c.annotations())
	took := time.Since(start).Round(time.Millisecond)
	switch res.Result {
	case porcupine.Ok:
		t.Logf("%s: %d operations (%d with unknown outcome) linearizable (checked in %s)", name, len(ops), unknown, took)
	case porcupine.Unknown:
		t.Logf("WARNING: %s: %d operations: the linearizability check timed out after %s (no violation found)", name, len(ops), took)
	default:
		t.Errorf("%s: history of %d operations is NOT linearizable: %d keys at fault %v\n%s",
			name, len(ops), len(res.Illegal), res.Illegal[:min(len(res.Illegal), 10)], res.Dump)
		if res.Visualization != "" {
			t.Errorf("%s: visualization: %s (node logs beside it)", name, res.Visualization)
		}
	}
}

// others returns the indexes of every node but v.
func (s *scenario) others(v int) []int {
	var out []int
	for i := range s.c.nodes {
		if i != v {
			out = append(out, i)
		}
	}
	return out
}

func (s *scenario) sleep(d time.Duration) { time.Sleep(d) }

// killLeader: SIGKILL of the node leading the most partitions, three times; each time the
// failover (until every partition serves again through the survivors) is measured, then the
// node restarts on its data.
func killLeader(s *scenario) {
	c := s.c
	for k := 1; k <= 3; k++ {
		v, counts := c.pickByLeadership(true)
		victim := c.nodes[v]
		var survivors []*proc.Node
		for _, i := range s.others(v) {
			survivors = append(survivors, c.nodes[i])
		}
		c.note("kill %d: SIGKILL %s (leaders: %v)", k, victim.Config.NodeID, counts)
		killed := time.Now()
		victim.Kill()
		d, slowest := c.measureFailover(survivors, killed)
		s.failovers = append(s.failovers, d)
		c.note("kill %d: every partition serves again %.2fs after the kill (slowest: partition %d)", k, d.Seconds(), slowest)
		s.sleep(time.Second)
		victim.Restart()
		victim.WaitReady(60 * time.Second)
		c.note("kill %d: %s restarted and ready", k, victim.Config.NodeID)
		c.waitLeaders(30 * time.Second)
		s.sleep(2 * time.Second)
	}
}

// killFollower: SIGKILL of the node leading the fewest partitions, down long enough for
// gossip to declare it dead, then restarted on its data.
func killFollower(s *scenario) {
	c := s.c
	v, counts := c.pickByLeadership(false)
	n := c.nodes[v]
	c.note("SIGKILL %s (leaders: %v)", n.Config.NodeID, counts)
	n.Kill()
	s.sleep(8 * time.Second)
	n.Restart()
	n.WaitReady(60 * time.Second)
	c.note("%s restarted and ready", n.Config.NodeID)
	c.waitLeaders(30 * time.Second)
}

// stopNode: SIGSTOP of a node (the one leading the most or the fewest partitions) for 3 s,
// ten election timeouts; then SIGCONT.
func stopNode(s *scenario, leader bool) {
	c := s.c
	v, counts := c.pickByLeadership(leader)
	n := c.nodes[v]
	c.note("SIGSTOP %s (leaders: %v)", n.Config.NodeID, counts)
	n.Stop()
	s.sleep(3 * time.Second)
	n.Cont()
	c.note("SIGCONT %s", n.Config.NodeID)
	c.waitLeaders(30 * time.Second)
}

// restartWithData: SIGKILL of a random node and an immediate restart on its data.
func restartWithData(s *scenario) {
	c := s.c
	n := c.nodes[s.rnd.IntN(len(c.nodes))]
	c.note("SIGKILL %s and restart at once", n.Config.NodeID)
	n.Kill()
	n.Restart()
	n.WaitReady(60 * time.Second)
	c.note("%s ready", n.Config.NodeID)
	c.waitLeaders(30 * time.Second)
}

// wipeAndRejoin: SIGKILL of a random node, its data directory wiped, restarted: it rejoins
// as a new replica (a new incarnation) of every Raft group. The other replicas have compacted
// their logs (nodeFlags), so it catches up from snapshots: at least one group must have
// been restored from one (the state hashes checked after the scenario cover their content).
func wipeAndRejoin(s *scenario) {
	c := s.c
	n := c.nodes[s.rnd.IntN(len(c.nodes))]
	c.note("SIGKILL %s and wipe its data directory", n.Config.NodeID)
	n.Kill()
	n.Wipe()
	s.sleep(time.Second)
	n.Restart()
	n.WaitReady(60 * time.Second)
	c.note("%s (wiped) restarted and ready", n.Config.NodeID)
	c.waitLeaders(30 * time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(n.Output(), "raft group restored from a snapshot") {
		if time.Now().After(deadline) {
			s.t.Errorf("%s (wiped) restored no raft group from a snapshot within 30 s of rejoining", n.Config.NodeID)
			return
		}
		s.sleep(100 * time.Millisecond)
	}
	c.note("%s restored %d raft groups from snapshots so far", n.Config.NodeID, strings.Count(n.Output(), "raft group restored from a snapshot"))
}

// rollingRestart: SIGTERM of every node in turn (exit 0 expected), each restarted and ready
// (every partition led) before the next.
func rollingRestart(s *scenario) {
	c := s.c
	for _, n := range c.nodes {
		c.note("SIGTERM %s", n.Config.NodeID)
		if code := n.Term(); code != 0 {
			s.t.Errorf("%s exited with code %d after SIGTERM, want 0", n.Config.NodeID, code)
		}
		c.note("%s exited", n.Config.NodeID)
		n.Restart()
		n.WaitReady(60 * time.Second)
		c.note("%s restarted and ready", n.Config.NodeID)
		c.waitLeaders(30 * time.Second)
		s.sleep(2 * time.Second)
	}
}

const partitionHold = 6 * time.Second

// isolate cuts node v off from every other node, both ways.
func (s *scenario) isolate(v int) {
	for _, o := range s.others(v) {
		dropLink(s.t, v, o)
		dropLink(s.t, o, v)
	}
}

func (s *scenario) heal() {
	healNetwork(s.t)
	s.c.note("network healed")
	s.c.waitLeaders(30 * time.Second)
}

// isolateFollower: the node leading the fewest partitions is cut off (a minority of one).
func isolateFollower(s *scenario) {
	v, counts := s.c.pickByLeadership(false)
	s.c.note("isolate %s from the others (leaders: %v)", s.c.nodes[v].Config.NodeID, counts)
	s.isolate(v)
	s.sleep(partitionHold)
	s.heal()
}

// isolateLeader: the node leading the most partitions is cut off; the majority side must
// elect new leaders for them, and the isolated node must not answer for them.
func isolateLeader(s *scenario) {
	v, counts := s.c.pickByLeadership(true)
	s.c.note("isolate %s from the others (leaders: %v)", s.c.nodes[v].Config.NodeID, counts)
	s.isolate(v)
	s.sleep(partitionHold)
	s.heal()
}

// bridge: two nodes cannot reach each other; the third reaches both (each side sees a
// majority through it).
func bridge(s *scenario) {
	v := s.rnd.IntN(len(s.c.nodes))
	o := s.others(v)
	s.c.note("cut %s ↔ %s (%s bridges)", s.c.nodes[o[0]].Config.NodeID, s.c.nodes[o[1]].Config.NodeID, s.c.nodes[v].Config.NodeID)
	dropLink(s.t, o[0], o[1])
	dropLink(s.t, o[1], o[0])
	s.sleep(partitionHold)
	s.heal()
}

// oneWay: packets from the node leading the most partitions to one other node are dropped;
// the other direction works.
func oneWay(s *scenario) {
	a, counts := s.c.pickByLeadership(true)
	o := s.others(a)
	b := o[s.rnd.IntN(len(o))]
	s.c.note("drop %s → %s only (leaders: %v)", s.c.nodes[a].Config.NodeID, s.c.nodes[b].Config.NodeID, counts)
	dropLink(s.t, a, b)
	s.sleep(partitionHold)
	s.heal()
}

// growAndShrink: two nodes join, which splits a Raft group (one per node is the aim) and
// moves replicas and leaderships onto them, with the relayer's intents and every workload
// running; then both are stopped (SIGTERM), one after the other, and the cluster is back to
// its three nodes, with five groups.
// growAndShrink grows the cluster to five nodes and back (growAndShrinkBack), then waits for
// its groups to merge back to one per node, under the relayer's intents.
func growAndShrink(s *scenario) {
	growAndShrinkBack(s, false)
	s.c.awaitGroupPerNode(s.c.nodes, 2*time.Minute, true)
	s.c.note("merged back to one group per node")
}

// growAndShrinkBack joins n4 and n5 and waits until the cluster has split to one Raft group
// per node, placed, every node mapping the partitions alike; then stops them (SIGTERM), the
// second as soon as the first has exited, and waits until the three left are placed again.
// With mustShare, the two must share a Raft group, or the test would not check the hand-over
// it means to: without it, the group they share would be left with one voter of three.
func growAndShrinkBack(s *scenario, mustShare bool) {
	c := s.c
	var extra []*proc.Node
	for i, ip := range growIPs {
		extra = append(extra, c.join("n"+strconv.Itoa(clusterSize+1+i), ip, graceFlags))
	}
	for _, n := range extra {
		n.WaitReady(60 * time.Second)
		s.w.addNode(n)
	}
	all := append(slices.Clone(c.nodes), extra...)
	c.awaitGroupPerNode(all, 90*time.Second, false)
	c.waitPlaced(all, 90*time.Second)
	c.samePartitionMap(all)
	if mustShare && len(c.sharedGroups(all, extra)) == 0 {
		s.t.Fatalf("the nodes that leave share no Raft group: the test would not check what it means to")
	}
	for i := len(extra) - 1; i >= 0; i-- {
		n := extra[i]
		s.w.removeNode(n.Config.NodeID)
		stopping := time.Now()
		if code := n.Term(); code != 0 {
			s.t.Errorf("%s exited %d after SIGTERM, want 0", n.Config.NodeID, code)
		}
		c.note("%s exited after %s", n.Config.NodeID, time.Since(stopping).Round(time.Millisecond))
	}
	c.waitPlaced(c.nodes, deadGrace+30*time.Second)
}

// probeRegistries holds, per partition, a server registry name that lives in it.
var probeRegistries = func() []string {
	out := make([]string, partitions)
	found := 0
	for i := 0; found < partitions; i++ {
		name := fmt.Sprintf("probe-%d", i)
		p := actors.PartitionOf(servers.KindName, name, partitions)
		if out[p] == "" {
			out[p] = name
			found++
		}
	}
	return out
}()

// measureFailover probes every partition through the survivors (a server heartbeat in a
// registry of that partition, a new attempt every 100 ms, each allowed 2 s) and returns the
// time from since until the last partition answered, and that partition.
func (c *cluster) measureFailover(survivors []*proc.Node, since time.Time) (time.Duration, uint32) {
	c.t.Helper()
	hc := &http.Client{Timeout: 2 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	served := make([]time.Duration, partitions)
	var wg sync.WaitGroup
	for p := range uint32(partitions) {
		wg.Go(func() {
			done := make(chan time.Duration, 1)
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for i := 0; ; i++ {
				n := survivors[i%len(survivors)]
				go func() {
					body := strings.NewReader(`{"address":"10.0.0.1:1"}`)
					req, _ := http.NewRequestWithContext(ctx, http.MethodPut, n.URL("/v1/servers/"+probeRegistries[p]+"/probe"), body)
					req.Header.Set("Content-Type", "application/json")
					resp, err := hc.Do(req)
					if err != nil {
						return
					}
					resp.Body.Close()
					if resp.StatusCode/100 == 2 {
						select {
						case done <- time.Since(since):
						default:
						}
					}
				}()
				select {
				case d := <-done:
					served[p] = d
					return
				case <-ctx.Done():
					served[p] = -1
					return
				case <-tick.C:
				}
			}
		})
	}
	wg.Wait()
	var worst time.Duration
	var slowest uint32
	for p, d := range served {
		if d < 0 {
			c.t.Errorf("partition %d did not serve within 30s of the kill", p)
			continue
		}
		if d > worst {
			worst, slowest = d, uint32(p)
		}
	}
	return worst, slowest
}
