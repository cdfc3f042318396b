package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/shardkeeper/shardkeeper/test/proc"
)

// The chaos cluster's layout: 16 partitions in 4 Raft groups, so that a group holds several
// partitions and three nodes lead them unevenly (2, 1, 1), as balancing allows.
const (
	partitions = 16
	raftGroups = 4
)

// tlsDir holds the CA and node certificates of every cluster of the run (see TestMain).
var tlsDir string

// nodeFlags are given to every node. Short Raft timeouts (the failover goal needs them), a
// short request deadline so that a request without a leader fails fast with 503, and limits
// raised so that the load never meets them (every nonce and entry lives longer than a test).
// Snapshots every few dozen entries, keeping few after them, so that every fault also runs
// with logs compacted under load, and a replica that fell behind or lost its disk catches up
// through a snapshot (InstallSnapshot, FSM.Restore), as a long-running cluster does.
var nodeFlags = []string{
	"--partitions", strconv.Itoa(partitions), "--raft-groups", strconv.Itoa(raftGroups),
	"--raft-heartbeat-timeout", "300ms", "--raft-election-timeout", "300ms",
	"--snapshot-threshold", "32", "--snapshot-interval", "500ms", "--raft-trailing-logs", "16",
	"--request-timeout", "2s",
	"--max-pending-per-device", "100000",
	"--server-ttl", "1h", "--oracle-nonce-ttl", "1h", "--attest-nonce-ttl", "1h",
	"--log-level", "info",
	// Gossip encrypted, as in production: every fault runs with the keyring on.
	"--gossip-key", "c2hhcmRrZWVwZXItY2hhb3MtZ29zc2lwLWtleS0zMmI=",
}

// cluster is a three-node cluster of real shardkeeper processes, one loopback address each.
type cluster struct {
	t     *testing.T
	dir   string // output directory: node logs, visualizations
	nodes []*proc.Node
	hc    *http.Client
	start time.Time // time zero of the histories and annotations
	flags []string  // the scenario's flags after nodeFlags, which nodes that join run too

	mu    sync.Mutex
	notes []porcupine.Annotation
}

func startCluster(t *testing.T) *cluster { return startClusterBinding(t, false) }

// startClusterBinding is startCluster with the listeners binding every interface and each node
// advertising its own IP (--advertise-addr) when bindAll is set, and extra flags after
// nodeFlags (which they override).
func startClusterBinding(t *testing.T, bindAll bool, extra ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, dir: outDir(t), hc: &http.Client{Timeout: 2 * time.Second}, start: time.Now(), flags: extra}
	var gids []uint32
	if netReason == "" {
		for i := range clusterSize {
			gids = append(gids, nodeGID(i))
		}
	}
	begin := time.Now()
	c.nodes = proc.StartCluster(t, proc.ClusterConfig{
		Bin: proc.Build(t, "./cmd/shardkeeper"), Command: []string{"serve"}, N: clusterSize,
		IPs: nodeIPs[:clusterSize], GIDs: gids, Flags: append(slices.Clone(nodeFlags), extra...), LogDir: c.dir, BindAll: bindAll, TLSDir: tlsDir,
	})
	for _, n := range c.nodes {
		n.WaitReady(60 * time.Second)
	}
	c.waitConverged(60*time.Second, false)
	t.Logf("cluster of %d nodes ready and fully replicated in %s; logs in %s", len(c.nodes),
		time.Since(begin).Round(time.Millisecond), c.dir)
	return c
}

// note adds an annotation (a fault, a heal) to the visualizations, and logs it.
func (c *cluster) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	c.t.Logf("%s: %s", time.Since(c.start).Round(time.Millisecond), msg)
	c.mu.Lock()
	c.notes = append(c.notes, porcupine.Annotation{Tag: "faults", Start: int64(time.Since(c.start)), Description: msg})
	c.mu.Unlock()
}

func (c *cluster) annotations() []porcupine.Annotation {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.notes)
}

type partitionView struct {
	ID              uint32   `json:"id"`
	Group           uint32   `json:"group"`
	Leader          string   `json:"leader"`
	Replicas        []string `json:"replicas"`
	Voters          []string `json:"voters"`
	NonVoters       []string `json:"non_voters"`
	AppliedIndex    uint64   `json:"applied_index"`
	UnderReplicated bool     `json:"under_replicated"`
}

type clusterView struct {
	NodeID  string `json:"node_id"`
	Members []struct {
		NodeID     string `json:"node_id"`
		State      string `json:"state"`
		StateSince int64  `json:"state_since"`
		HTTPAddr   string `json:"http_addr"`
	} `json:"members"`
	Partitions []partitionView `json:"partitions"`
}

type hashView struct {
	NodeID     string `json:"node_id"`
	Partitions []struct {
		ID           uint32 `json:"id"`
		AppliedIndex uint64 `json:"applied_index"`
		Hash         string `json:"hash"`
	} `json:"partitions"`
}

func (c *cluster) getJSON(n *proc.Node, path string, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.URL(path), nil)
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s on %s: %s: %s", path, n.Config.NodeID, resp.Status, b)
	}
	return json.Unmarshal(b, out)
}

// leaderCounts counts the partitions each node leads, as node n sees it.
func (c *cluster) leaderCounts(n *proc.Node) map[string]int {
	c.t.Helper()
	var v clusterView
	if err := c.getJSON(n, "/v1/cluster", &v); err != nil {
		c.t.Fatalf("cluster view: %v", err)
	}
	counts := map[string]int{}
	for _, node := range c.nodes {
		counts[node.Config.NodeID] = 0
	}
	for _, p := range v.Partitions {
		if p.Leader != "" {
			counts[p.Leader]++
		}
	}
	return counts
}

// pickByLeadership returns the index of the running node leading the most (most = true) or
// the fewest partitions; ties go to the lower id.
func (c *cluster) pickByLeadership(most bool) (int, map[string]int) {
	c.t.Helper()
	var viewer *proc.Node
	for _, n := range c.nodes {
		if n.Running() {
			viewer = n
			break
		}
	}
	counts := c.leaderCounts(viewer)
	best := -1
	for i, n := range c.nodes {
		k := counts[n.Config.NodeID]
		if best < 0 || (most && k > counts[c.nodes[best].Config.NodeID]) || (!most && k < counts[c.nodes[best].Config.NodeID]) {
			best = i
		}
	}
	return best, counts
}

// waitConverged waits until every node sees every other alive, agrees on a leader for every
// partition, every partition is replicated on min(replicationFactor, nodes) of the nodes (its
// leader's configuration lists each once: on three nodes, every node), and all replicas of a
// partition report the same applied index; then it checks that they report the same state
// hash. Writes must have stopped. With check false it only waits.
func (c *cluster) waitConverged(timeout time.Duration, check bool) {
	c.t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	want := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		want[i] = n.Config.NodeID
	}
	var last string
	diverged := map[uint32]int{}
	for {
		views := map[string]clusterView{}
		hashes := map[string]hashView{}
		problem := ""
		for _, n := range c.nodes {
			var v clusterView
			var h hashView
			if err := c.getJSON(n, "/v1/cluster", &v); err != nil {
				problem = err.Error()
				break
			}
			if err := c.getJSON(n, "/v1/cluster/hashes", &h); err != nil {
				problem = err.Error()
				break
			}
			views[n.Config.NodeID], hashes[n.Config.NodeID] = v, h
		}
		var divergence []string
	members:
		for _, id := range want {
			if problem != "" {
				break
			}
			for _, m := range views[id].Members {
				if slices.Contains(want, m.NodeID) && m.State != "alive" {
					problem = fmt.Sprintf("%s sees %s %s", id, m.NodeID, m.State)
					break members
				}
			}
		}
		if problem == "" {
		parts:
			for p := range uint32(partitions) {
				leader := ""
				for _, id := range want {
					l := views[id].Partitions[p].Leader
					if l == "" || (leader != "" && l != leader) {
						problem = fmt.Sprintf("partition %d: leaders %s", p, leadersOf(views, want, p))
						break parts
					}
					leader = l
				}
				replicas := slices.Sorted(slices.Values(views[leader].Partitions[p].Replicas))
				if len(replicas) != min(replicationFactor, len(want)) || slices.ContainsFunc(replicas, func(r string) bool { return !slices.Contains(want, r) }) {
					problem = fmt.Sprintf("partition %d: replicas %v (leader %s), want %d of %v", p, replicas, leader, min(replicationFactor, len(want)), want)
					break
				}
				var idx []uint64
				hs := map[string][]string{}
				for _, id := range replicas {
					e := hashes[id].Partitions[p]
					idx = append(idx, e.AppliedIndex)
					hs[e.Hash] = append(hs[e.Hash], id)
				}
				if slices.Min(idx) != slices.Max(idx) {
					problem = fmt.Sprintf("partition %d: applied indexes %v on %v", p, idx, replicas)
					break
				}
				if len(hs) > 1 {
					diverged[p]++
					divergence = append(divergence, fmt.Sprintf("partition %d at applied index %d: hashes %v", p, idx[0], hs))
				} else {
					delete(diverged, p)
				}
			}
		}
		if problem == "" {
			if len(divergence) == 0 {
				c.t.Logf("converged in %s: every member alive, every partition led, replicated on %v, same applied index and state hash on every replica",
					time.Since(start).Round(time.Millisecond), want)
				return
			}
			stable := true
			for p := range diverged {
				stable = stable && diverged[p] >= 2
			}
			if stable && check {
				c.t.Errorf("replicas diverged (same applied index, different state):\n  %s", strings.Join(divergence, "\n  "))
				return
			}
			problem = strings.Join(divergence, "; ")
		}
		last = problem
		if time.Now().After(deadline) {
			c.t.Fatalf("cluster did not converge within %s: %s", timeout, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func leadersOf(views map[string]clusterView, ids []string, p uint32) string {
	var out []string
	for _, id := range ids {
		l := views[id].Partitions[p].Leader
		if l == "" {
			l = "-"
		}
		out = append(out, id+"→"+l)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// waitLeaders waits until every running node knows a leader for every partition.
func (c *cluster) waitLeaders(timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		missing := ""
		for _, n := range c.nodes {
			if !n.Running() {
				continue
			}
			var v clusterView
			if err := c.getJSON(n, "/v1/cluster", &v); err != nil {
				missing = err.Error()
				break
			}
			for _, p := range v.Partitions {
				if p.Leader == "" {
					missing = fmt.Sprintf("%s knows no leader of partition %d", n.Config.NodeID, p.ID)
					break
				}
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no leader everywhere after %s: %s", timeout, missing)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
