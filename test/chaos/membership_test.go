package chaos

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	placement "github.com/shardkeeper/shardkeeper/cluster"
	"github.com/shardkeeper/shardkeeper/test/proc"
)

// deadGrace is how long a failed or departed member keeps its replicas in these tests
// (--dead-member-grace, 30 s by default).
const deadGrace = 5 * time.Second

// graceFlags give the nodes of these tests deadGrace.
var graceFlags = []string{"--dead-member-grace", deadGrace.String()}

// replicationFactor is R of the chaos cluster (--replicas' default).
const replicationFactor = 3

// A SIGKILLed member is shown failed by the survivors within 10 s, and within the grace
// period and 10 s more its replicas are gone from every partition: with two survivors of
// three, each partition keeps a leader and a quorum on them and says it is under-replicated.
func TestFailedMemberShownAndReplaced(t *testing.T) {
	c := startClusterBinding(t, false, graceFlags...)
	victim := c.nodes[2]
	killed := time.Now()
	victim.Kill()
	c.note("SIGKILL %s", victim.Config.NodeID)
	survivors := c.nodes[:2]

	for _, n := range survivors {
		c.awaitView(n, killed.Add(10*time.Second), "shows "+victim.Config.NodeID+" failed", func(v clusterView) string {
			for _, m := range v.Members {
				if m.NodeID == victim.Config.NodeID {
					if m.State == "failed" {
						return ""
					}
					return "state " + m.State
				}
			}
			return "not listed"
		})
	}
	t.Logf("%s shown failed on both survivors %s after the kill", victim.Config.NodeID, time.Since(killed).Round(time.Millisecond))

	for _, n := range survivors {
		c.awaitView(n, killed.Add(deadGrace+10*time.Second), "replaces "+victim.Config.NodeID, func(v clusterView) string {
			for _, p := range v.Partitions {
				switch {
				case p.Leader == "":
					return fmt.Sprintf("partition %d has no leader", p.ID)
				case slices.Contains(p.Replicas, victim.Config.NodeID):
					return fmt.Sprintf("partition %d still has replicas %v", p.ID, p.Replicas)
				case len(p.Voters) != 2 || !p.UnderReplicated:
					return fmt.Sprintf("partition %d: voters %v, under-replicated %v; want the two survivors, under-replicated",
						p.ID, p.Voters, p.UnderReplicated)
				}
			}
			return ""
		})
	}
	t.Logf("every partition on the two survivors, under-replicated, %s after the kill", time.Since(killed).Round(time.Millisecond))
}

// A cluster grows from three nodes to five and shrinks back to three under load, the second
// node stopped (SIGTERM) as soon as the first has exited, as a StatefulSet scales down: on five
// nodes a Raft group splits so that there is one per node, every node is ready and lists
// every partition with its leader and replicas, replicas are where the placement puts them;
// the two that leave share a Raft group, which keeps its quorum only because each leaving
// node waits until its replicas are on other nodes; and the histories of the whole run are
// linearizable with no request failing beyond what the clients' retries absorb.
func TestGrowAndShrinkUnderLoad(t *testing.T) {
	begin := time.Now()
	s := startLoaded(t, 7, graceFlags...)
	c := s.c

	growAndShrinkBack(s, true)
	time.Sleep(loadAfter)
	s.w.stopLoad()
	c.note("load stopped")
	s.finish(true)
	t.Logf("scenario took %s", time.Since(begin).Round(time.Millisecond))
}

// Two nodes of four that share a Raft group stopped at the same moment, so that fewer than R
// others are left to take their replicas: in each group holding both, one of them stays
// desired and may exit at once,
// and the other must then wait while its exit would take the group's quorum (the first is
// still listed until the dead-member grace removes it). The two left hold every group, and the
// histories are linearizable.
func TestRetireTwoAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("a fifth cluster start; the short run has TestGrowAndShrinkUnderLoad")
	}
	// No drain: the node the placement still wants exits the moment it is told to, before
	// the other's replicas could have moved in the meantime.
	flags := slices.Concat(graceFlags, []string{"--shutdown-drain", "0"})
	s := startLoaded(t, 8, flags...)
	c := s.c

	n4 := c.join("n4", "127.0.0.14", flags)
	n4.WaitReady(60 * time.Second)
	s.w.addNode(n4)
	c.waitPlaced(append(slices.Clone(c.nodes), n4), 90*time.Second)
	// n4 and a node it shares a Raft group with.
	var leaving []*proc.Node
	for _, n := range c.nodes {
		if len(c.sharedGroups(append(slices.Clone(c.nodes), n4), []*proc.Node{n, n4})) > 0 {
			leaving = []*proc.Node{n, n4}
			break
		}
	}
	if leaving == nil {
		t.Fatalf("n4 shares no Raft group with another node: the test would not check what it means to")
	}

	var wg sync.WaitGroup
	for _, n := range leaving {
		s.w.removeNode(n.Config.NodeID)
		wg.Add(1)
		go func() {
			defer wg.Done()
			stopping := time.Now()
			if code := n.Term(); code != 0 {
				t.Errorf("%s exited %d after SIGTERM, want 0", n.Config.NodeID, code)
			}
			c.note("%s exited %s after SIGTERM", n.Config.NodeID, time.Since(stopping).Round(time.Millisecond))
		}()
	}
	c.note("SIGTERM %s and n4 at once", leaving[0].Config.NodeID)
	wg.Wait()
	c.nodes = slices.DeleteFunc(c.nodes, func(n *proc.Node) bool { return n == leaving[0] })
	c.waitPlaced(c.nodes, deadGrace+30*time.Second)
	time.Sleep(loadAfter)
	s.w.stopLoad()
	c.note("load stopped")
	s.finish(true)
}

// join starts node id on ip, joining the cluster through its nodes' gossip addresses, with
// the chaos nodes' flags, the scenario's and extra.
func (c *cluster) join(id, ip string, extra []string) *proc.Node {
	c.t.Helper()
	var joins []string
	for _, n := range c.nodes {
		joins = append(joins, n.GossipAddr)
	}
	var gid uint32
	if i := slices.Index(nodeIPs, ip); i >= 0 && netReason == "" {
		gid = nodeGID(i) // network faults reach it too
	}
	n := proc.Start(c.t, proc.Config{Bin: proc.Build(c.t, "./cmd/shardkeeper"), Command: []string{"serve"},
		NodeID: id, IP: ip, LogDir: c.dir, TLSDir: tlsDir, GID: gid,
		Flags: slices.Concat([]string{"--bootstrap-expect", "3", "--join", strings.Join(joins, ",")}, nodeFlags, c.flags, extra)})
	c.note("started %s", id)
	return n
}

// sharedGroups returns the Raft groups that have every one of leaving among their voters, as
// nodes[0]'s view of the cluster shows them.
func (c *cluster) sharedGroups(nodes, leaving []*proc.Node) []uint32 {
	c.t.Helper()
	var v clusterView
	if err := c.getJSON(nodes[0], "/v1/cluster", &v); err != nil {
		c.t.Fatal(err)
	}
	var out []uint32
	for _, p := range v.Partitions {
		if slices.Contains(out, p.Group) {
			continue
		}
		if !slices.ContainsFunc(leaving, func(n *proc.Node) bool { return !slices.Contains(p.Voters, n.Config.NodeID) }) {
			out = append(out, p.Group)
		}
	}
	return out
}

// awaitView polls n's /v1/cluster until check finds nothing wrong (""), failing the test at
// deadline with the last problem.
func (c *cluster) awaitView(n *proc.Node, deadline time.Time, what string, check func(clusterView) string) {
	c.t.Helper()
	for {
		var v clusterView
		problem := ""
		if err := c.getJSON(n, "/v1/cluster", &v); err != nil {
			problem = err.Error()
		} else {
			problem = check(v)
		}
		if problem == "" {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s never %s: %s", n.Config.NodeID, what, problem)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitPlaced waits until every node of nodes is ready and agrees on every partition's leader,
// and each partition's replicas are exactly its rendezvous placement over nodes, all voters.
// (Equal state on the replicas is waitConverged's check, once writes have stopped.)
func (c *cluster) waitPlaced(nodes []*proc.Node, timeout time.Duration) {
	c.t.Helper()
	start := time.Now()
	var metas []placement.NodeMeta
	for _, n := range nodes {
		metas = append(metas, placement.NodeMeta{ID: n.Config.NodeID})
	}
	deadline := start.Add(timeout)
	for {
		problem := c.placementProblem(nodes, metas)
		if problem == "" {
			c.t.Logf("placed on %d nodes in %s: every node ready, every partition led and on its %d desired replicas",
				len(nodes), time.Since(start).Round(time.Millisecond), replicationFactor)
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("not placed on %d nodes within %s: %s", len(nodes), timeout, problem)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (c *cluster) placementProblem(nodes []*proc.Node, metas []placement.NodeMeta) string {
	views := map[string]clusterView{}
	for _, n := range nodes {
		var v clusterView
		var ready struct{}
		if err := c.getJSON(n, "/readyz", &ready); err != nil {
			return err.Error()
		}
		if err := c.getJSON(n, "/v1/cluster", &v); err != nil {
			return err.Error()
		}
		if len(v.Partitions) != partitions {
			return fmt.Sprintf("%s lists %d partitions", n.Config.NodeID, len(v.Partitions))
		}
		views[n.Config.NodeID] = v
	}
	var groups []uint32
	for _, pv := range views[nodes[0].Config.NodeID].Partitions {
		if !slices.Contains(groups, pv.Group) {
			groups = append(groups, pv.Group)
		}
	}
	placed := placement.Placement(groups, metas, replicationFactor)
	for p := range uint32(partitions) {
		leader := ""
		for _, n := range nodes {
			pv := views[n.Config.NodeID].Partitions[p]
			if pv.Leader == "" || (leader != "" && pv.Leader != leader) || len(pv.Voters) == 0 {
				return fmt.Sprintf("partition %d as %s sees it: leader %q, voters %v", p, n.Config.NodeID, pv.Leader, pv.Voters)
			}
			leader = pv.Leader
		}
		var want []string
		pv := views[leader].Partitions[p]
		for _, d := range placed[pv.Group] {
			want = append(want, d.ID)
		}
		slices.Sort(want)
		if got := slices.Sorted(slices.Values(pv.Voters)); !slices.Equal(got, want) || len(pv.NonVoters) > 0 {
			return fmt.Sprintf("partition %d: voters %v non-voters %v (leader %s), want %v", p, got, pv.NonVoters, leader, want)
		}
	}
	return ""
}

// A cluster grown from three nodes to nine under load (one Raft group per node, every node
// leading) shrinks back to three, each node stopped with SIGTERM as soon as the one before
// has exited: no group loses its quorum (every remaining node keeps answering, and the
// cluster is placed within the dead-member grace at the end), every node left leads, and
// the histories of the whole run are linearizable. Once the cluster has been small for the
// merge delay, its groups merge, two at a time, back to one per node, each node leading one.
func TestShrinkNineToThree(t *testing.T) { shrinkFromNine(t, clusterSize) }

// The same, shrinking to six: more nodes than replicas, so two neighbouring groups seldom
// share their voters, and placement must move the next pair together for it to merge; each
// node holds only some of the groups, and leadership must still reach every one.
func TestShrinkNineToSix(t *testing.T) { shrinkFromNine(t, 6) }

// shrinkFromNine grows a loaded three-node cluster to nine, then stops the last-joined nodes
// until `to` are left, and waits for one Raft group per node left, each leading.
func shrinkFromNine(t *testing.T, to int) {
	if testing.Short() {
		t.Skip("nine nodes: make chaos runs it")
	}
	begin := time.Now()
	// Groups merge back to one per node once the cluster has been small for 20 s.
	flags := append(slices.Clone(graceFlags), "--merge-delay=20s")
	s := startLoaded(t, 10, flags...)
	c := s.c

	var extra []*proc.Node
	for i, ip := range nodeIPs[clusterSize:] {
		n := c.join("n"+strconv.Itoa(clusterSize+1+i), ip, flags)
		n.WaitReady(60 * time.Second)
		s.w.addNode(n)
		extra = append(extra, n)
	}
	all := append(slices.Clone(c.nodes), extra...)
	c.awaitGroupPerNode(all, 3*time.Minute, true)
	c.waitPlaced(all, 2*time.Minute)
	c.note("grown to %d nodes, each leading", len(all))

	for i := len(extra) - 1; i >= to-clusterSize; i-- {
		n := extra[i]
		s.w.removeNode(n.Config.NodeID)
		stopping := time.Now()
		if code := n.Term(); code != 0 {
			t.Errorf("%s exited %d after SIGTERM, want 0", n.Config.NodeID, code)
		}
		c.note("%s exited after %s", n.Config.NodeID, time.Since(stopping).Round(time.Millisecond))
	}
	left := all[:to]
	c.awaitGroupPerNode(left, 4*time.Minute, true)
	c.note("merged back to one group per node")
	// Placed once no merge is due: while one is, placement steers the next pair together.
	c.waitPlaced(left, deadGrace+30*time.Second)
	time.Sleep(loadAfter)
	s.w.stopLoad()
	c.note("load stopped")
	c.nodes = left // the nodes the final reads and the convergence check ask
	s.finish(true)
	t.Logf("scenario took %s", time.Since(begin).Round(time.Millisecond))
}

// awaitGroupPerNode waits until the first node's view shows one Raft group per node of nodes
// (the splits growing to them asks for) and, with leading, every one of them leading.
func (c *cluster) awaitGroupPerNode(nodes []*proc.Node, timeout time.Duration, leading bool) {
	c.t.Helper()
	c.awaitView(nodes[0], time.Now().Add(timeout), "one Raft group per node", func(v clusterView) string {
		groups, leaders := map[uint32]bool{}, map[string]bool{}
		for _, p := range v.Partitions {
			groups[p.Group] = true
			leaders[p.Leader] = true
		}
		switch {
		case len(groups) != len(nodes):
			return fmt.Sprintf("%d Raft groups on %d nodes", len(groups), len(nodes))
		case leading && len(leaders) != len(nodes):
			return fmt.Sprintf("%d of %d nodes lead", len(leaders), len(nodes))
		}
		return ""
	})
}
