package chaos

import (
	"bufio"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/test/proc"
)

// mergeSeed seeds the merge scenarios' load.
const mergeSeed = 12

// TestMergeUnderFaults starts a loaded three-node cluster of nine Raft groups, under the
// relayer's intents too, with a merge delay of two seconds: the groups merge, two at a time,
// back to one per node. The first merge is struck the moment its coordinator decides it:
// SIGKILL of the coordinator, SIGKILL of one of the groups' followers, or the coordinator
// cut off from every other node. After the heal the cluster must get to three groups, every
// node leading one; every node must map each partition to the same group (no partition is
// served by two); the replicas must hold the same state per partition; the histories must
// be linearizable; and every relayer intent must land exactly once (its retries are alarms:
// none lost).
func TestMergeUnderFaults(t *testing.T) { runSplitFaults(t, runMergeScenario) }

func runMergeScenario(t *testing.T, f splitFault) {
	begin := time.Now()
	env := startChaosRelayerEnv(t, mergeSeed)
	// Nine groups over 16 partitions: some hold one partition, whose commands name none.
	flags := append(env.flags, "--raft-groups=9", "--merge-delay=2s")
	c := startClusterBinding(t, false, flags...)
	s := &scenario{t: t, c: c, rnd: rand.New(rand.NewPCG(mergeSeed, 0))}
	s.w = newWorkload(c, mergeSeed, true)
	s.rl = newRelayerLoad(c, env, mergeSeed)
	t.Cleanup(func() { healNetwork(t) })
	s.w.start()
	s.rl.start()
	c.note("load started")

	leader, group := awaitDecision(t, c.nodes, "merging raft groups", 90*time.Second)
	var voters []string
	for _, n := range c.nodes {
		voters = append(voters, n.Config.NodeID)
	}
	c.note("%s decided to merge group %#x", c.nodes[leader].Config.NodeID, group)
	f.run(s, c.nodes, leader, voters)
	healNetwork(t)

	c.awaitGroupPerNode(c.nodes, 3*time.Minute, true)
	c.note("merged to one group per node")
	logMergeLines(t, c.nodes)
	c.waitPlaced(c.nodes, deadGrace+30*time.Second)
	c.samePartitionMap(c.nodes)
	time.Sleep(loadAfter)
	s.w.stopLoad()
	s.rl.stopLoad()
	c.note("load stopped")
	s.rl.settle()
	s.finish(true)
	t.Logf("scenario took %s", time.Since(begin).Round(time.Millisecond))
}

// logMergeLines logs what each node's log says of the merges, so that a run shows where the
// fault struck: mid-merge (an abandoned merge, a frozen group settled) or around it.
func logMergeLines(t *testing.T, nodes []*proc.Node) {
	for _, n := range nodes {
		f, err := os.Open(n.LogPath)
		if err != nil {
			continue
		}
		counts := map[string]int{}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			for _, msg := range []string{"merging raft groups", "raft groups merged", "merge raft groups",
				"raft group merged into another", "merge abandoned; raft group reopened", "settle a frozen raft group",
				"raft group taken in by a merge, from a snapshot"} {
				if strings.Contains(line, `"msg":"`+msg+`"`) {
					counts[msg]++
				}
			}
		}
		f.Close()
		t.Logf("%s: %v", n.Config.NodeID, counts)
	}
}
