package crash

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/client"
	"github.com/shardkeeper/shardkeeper/services/servers"
	"github.com/shardkeeper/shardkeeper/test/await"
	"github.com/shardkeeper/shardkeeper/test/proc"
)

// On a three-node cluster: every node serves the same routing table, covering every partition
// with a leader's HTTP address; an answer a node got by forwarding names the leader
// (Shardkeeper-Leader) and counts in shardkeeper_requests_forwarded_total; and a client that
// keeps the table sends its requests where they run — none forwarded — where one that goes
// round robin has a node forward most of them.
func TestRoutingTable(t *testing.T) {
	nodes := proc.StartCluster(t, proc.ClusterConfig{Bin: proc.Build(t, "./cmd/shardkeeper"), Command: []string{"serve"}, N: 3,
		TLSDir: t.TempDir(), Flags: fastFlags})
	var urls []string
	byHTTP := map[string]*proc.Node{}
	for _, n := range nodes {
		n.WaitReady(60 * time.Second)
		urls = append(urls, "http://"+n.HTTPAddr)
		byHTTP[n.HTTPAddr] = n
	}
	waitSettled(t, nodes[0])
	ctx := context.Background()
	routesOf := func(n *proc.Node) *client.Routes {
		c, err := client.New([]string{"http://" + n.HTTPAddr})
		if err != nil {
			t.Fatal(err)
		}
		rt, err := c.GetRoutes(ctx)
		if err != nil {
			t.Fatalf("GET /v1/cluster/routes on %s: %v", n.Config.NodeID, err)
		}
		return rt
	}
	// Every node, the same table (leadership balancing may still move a group at first).
	var table *client.Routes
	await.True(t, 30*time.Second, "every node serves the same complete routing table", func() bool {
		table = routesOf(nodes[0])
		if table.Partitions != partitions || len(table.Groups) != groups {
			t.Fatalf("table of %d partitions in %d groups, want %d in %d: %+v", table.Partitions, len(table.Groups), partitions, groups, table)
		}
		next := uint32(0)
		for _, g := range table.Groups {
			if g.First != next || g.End <= g.First || byHTTP[g.LeaderHTTP] == nil || g.Leader != byHTTP[g.LeaderHTTP].Config.NodeID || g.Term == 0 {
				return false
			}
			next = g.End
		}
		if next != partitions {
			t.Fatalf("groups cover [0, %d), want [0, %d): %+v", next, partitions, table)
		}
		for _, n := range nodes[1:] {
			if other := routesOf(n); !slices.Equal(other.Groups, table.Groups) {
				return false
			}
		}
		return true
	})
	leaderOf := func(reg string) *proc.Node {
		p := actors.PartitionOf(servers.KindName, reg, partitions)
		for _, g := range table.Groups {
			if p >= g.First && p < g.End {
				return byHTTP[g.LeaderHTTP]
			}
		}
		t.Fatalf("partition %d of %s in no group", p, reg)
		return nil
	}

	// A request through a node that does not lead its partition is forwarded, and says where.
	// (A leadership that moves meanwhile spoils the probe: it is made again.)
	reg := "routes-probe"
	list := func(n *proc.Node) string {
		resp, err := http.Get(n.URL("/v1/servers/" + reg))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/servers/%s on %s: %s", reg, n.Config.NodeID, resp.Status)
		}
		return resp.Header.Get("Shardkeeper-Leader")
	}
	for attempt := 0; ; attempt++ {
		table = routesOf(nodes[0])
		leader := leaderOf(reg)
		var other *proc.Node
		for _, n := range nodes {
			if n != leader {
				other = n
			}
		}
		before, _ := metricSum(t, other, "shardkeeper_requests_forwarded_total")
		viaOther, viaLeader := list(other), list(leader)
		after, _ := metricSum(t, other, "shardkeeper_requests_forwarded_total")
		if !slices.Equal(routesOf(nodes[0]).Groups, table.Groups) && attempt < 3 {
			continue
		}
		if viaOther != leader.HTTPAddr {
			t.Errorf("through %s: Shardkeeper-Leader %q, want %s (%s)", other.Config.NodeID, viaOther, leader.HTTPAddr, leader.Config.NodeID)
		}
		if viaLeader != "" {
			t.Errorf("through the leader %s: Shardkeeper-Leader %q, want none", leader.Config.NodeID, viaLeader)
		}
		if after != before+1 {
			t.Errorf("%s forwarded %g requests for one, want 1", other.Config.NodeID, after-before)
		}
		break
	}

	// The same calls by a routing client and by a round-robin one, counted in the forwards of
	// every node. A leadership that moved meanwhile spoils a measurement: it is made again.
	registries := make([]string, 24)
	for i := range registries {
		registries[i] = fmt.Sprintf("routes-%d", i)
	}
	forwards := func() float64 {
		sum := 0.0
		for _, n := range nodes {
			v, _ := metricSum(t, n, "shardkeeper_requests_forwarded_total")
			sum += v
		}
		return sum
	}
	measure := func(opts ...client.Option) (float64, bool) {
		c, err := client.New(urls, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.RefreshRoutes(ctx); err != nil {
			t.Fatal(err)
		}
		start, was := forwards(), routesOf(nodes[0])
		for _, r := range registries {
			if _, err := c.ListServers(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		return forwards() - start, slices.Equal(routesOf(nodes[0]).Groups, was.Groups)
	}
	for attempt := 0; ; attempt++ {
		routed, stable1 := measure(client.WithRouting())
		plain, stable2 := measure()
		if !stable1 || !stable2 {
			if attempt == 3 {
				t.Fatalf("leadership kept moving during the measurements")
			}
			continue
		}
		t.Logf("%d calls: %g forwarded with the routing table, %g round robin", len(registries), routed, plain)
		if routed != 0 {
			t.Errorf("the routing client's calls were forwarded %g times, want 0", routed)
		}
		if plain < float64(len(registries))/3 {
			t.Errorf("round robin: %g of %d calls forwarded, want about two thirds", plain, len(registries))
		}
		break
	}
}
