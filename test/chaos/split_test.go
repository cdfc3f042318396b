package chaos

import (
	"bufio"
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/test/proc"
)

// A fault that strikes a Raft group at the moment its leader decides to split it.
type splitFault struct {
	name  string
	short bool
	net   bool
	// run strikes: the group's leader is nodes[leader]; the group's voters are voters.
	run func(s *scenario, nodes []*proc.Node, leader int, voters []string)
}

var splitFaults = []splitFault{
	{name: "kill-leader", short: true, run: func(s *scenario, nodes []*proc.Node, leader int, _ []string) {
		killAndRestart(s, nodes[leader])
	}},
	{name: "kill-follower", run: func(s *scenario, nodes []*proc.Node, leader int, voters []string) {
		for i, n := range nodes {
			if i != leader && slices.Contains(voters, n.Config.NodeID) {
				killAndRestart(s, n)
				return
			}
		}
		s.t.Fatalf("the split group has no follower among the voters %v", voters)
	}},
	{name: "partition-leader", net: true, run: func(s *scenario, nodes []*proc.Node, leader int, _ []string) {
		for i := range nodes {
			if i != leader {
				dropLink(s.t, leader, i)
				dropLink(s.t, i, leader)
			}
		}
		s.c.note("%s cut off from the others", nodes[leader].Config.NodeID)
		s.sleep(partitionHold)
		s.heal()
	}},
}

func killAndRestart(s *scenario, n *proc.Node) {
	n.Kill()
	s.c.note("SIGKILL %s", n.Config.NodeID)
	s.sleep(3 * time.Second)
	n.Restart()
	n.WaitReady(60 * time.Second)
	s.c.note("%s restarted and ready", n.Config.NodeID)
}

// TestSplitUnderFaults grows a loaded cluster from three nodes to five, which splits one
// Raft group (one per node is the aim), and strikes the moment the group's leader decides
// the split: SIGKILL of that leader, SIGKILL of one of the group's followers, or the leader
// cut off from every other node. After the heal every node maps each partition to the same
// group (no partition is served by two), the five nodes hold one group each, placed where
// the placement says; then the cluster shrinks back to three, the replicas converge to the
// same state per partition, and the histories are linearizable.
func TestSplitUnderFaults(t *testing.T) { runSplitFaults(t, runSplitScenario) }

// runSplitFaults runs run once per fault of splitFaults, as a subtest.
func runSplitFaults(t *testing.T, run func(*testing.T, splitFault)) {
	for _, f := range splitFaults {
		t.Run(f.name, func(t *testing.T) {
			if testing.Short() && !f.short {
				t.Skip("not part of the -short subset (make chaos runs it)")
			}
			if f.net {
				requireNetwork(t)
			}
			run(t, f)
		})
	}
}

func runSplitScenario(t *testing.T, f splitFault) {
	s := startLoaded(t, 9, graceFlags...)
	c := s.c

	var all []*proc.Node
	all = append(all, c.nodes...)
	for i, ip := range growIPs {
		all = append(all, c.join("n"+strconv.Itoa(clusterSize+1+i), ip, graceFlags))
	}
	leader, group := awaitDecision(t, all, "splitting raft group", 90*time.Second)
	var voters []string
	var v clusterView
	if err := c.getJSON(all[(leader+1)%len(all)], "/v1/cluster", &v); err == nil {
		for _, p := range v.Partitions {
			if p.Group == group {
				voters = p.Voters
			}
		}
	}
	c.note("%s decided to split group %#x (voters %v)", all[leader].Config.NodeID, group, voters)
	f.run(s, all, leader, voters)

	for _, n := range all[clusterSize:] {
		n.WaitReady(60 * time.Second)
		s.w.addNode(n)
	}
	c.awaitGroupPerNode(all, 90*time.Second, false)
	c.waitPlaced(all, 90*time.Second)
	c.samePartitionMap(all)

	for i := len(all) - 1; i >= clusterSize; i-- {
		n := all[i]
		s.w.removeNode(n.Config.NodeID)
		if code := n.Term(); code != 0 {
			t.Errorf("%s exited %d after SIGTERM, want 0", n.Config.NodeID, code)
		}
		c.note("%s stopped", n.Config.NodeID)
	}
	c.waitPlaced(c.nodes, deadGrace+30*time.Second)
	time.Sleep(loadAfter)
	s.w.stopLoad()
	c.note("load stopped")
	s.finish(true)
}

// awaitDecision watches the nodes' logs until one logs msg ("splitting raft group", "merging
// raft groups"), and returns that node's index and the line's group.
func awaitDecision(t *testing.T, nodes []*proc.Node, msg string, timeout time.Duration) (int, uint32) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for i, n := range nodes {
			if g, ok := decisionLine(n.LogPath, msg); ok {
				return i, g
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("no node logged %q within %s", msg, timeout)
	return 0, 0
}

// decisionLine returns the group of the first line of the log at path whose message is msg.
func decisionLine(path, msg string) (uint32, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !strings.Contains(string(line), `"msg":"`+msg+`"`) {
			continue
		}
		var rec struct{ Group string }
		if json.Unmarshal(line, &rec) != nil {
			continue
		}
		g, err := strconv.ParseUint(rec.Group, 0, 32)
		return uint32(g), err == nil
	}
	return 0, false
}

// samePartitionMap fails the test unless every node maps every partition to the same Raft
// group: a partition is served by exactly one group.
func (c *cluster) samePartitionMap(nodes []*proc.Node) {
	c.t.Helper()
	var first []uint32
	for _, n := range nodes {
		var v clusterView
		if err := c.getJSON(n, "/v1/cluster", &v); err != nil {
			c.t.Fatal(err)
		}
		var groups []uint32
		for _, p := range v.Partitions {
			groups = append(groups, p.Group)
		}
		if first == nil {
			first = groups
		} else if !slices.Equal(groups, first) {
			c.t.Errorf("%s maps the partitions to groups %v, %s to %v", n.Config.NodeID, groups, nodes[0].Config.NodeID, first)
		}
	}
}

// groupOf returns the Raft group holding partition p, as the first node's view shows it.
func (c *cluster) groupOf(p uint32) uint32 {
	c.t.Helper()
	var v clusterView
	if err := c.getJSON(c.nodes[0], "/v1/cluster", &v); err != nil {
		c.t.Fatal(err)
	}
	return v.Partitions[p].Group
}
