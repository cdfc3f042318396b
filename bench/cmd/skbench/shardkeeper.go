package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/shardkeeper/shardkeeper/bench/internal/httpconn"
	"github.com/shardkeeper/shardkeeper/client"
)

// shardkeeperNode is a one-node shardkeeper serving on loopback from a fresh data directory.
type shardkeeperNode struct {
	*process
	url   string
	debug string // base URL of its --debug-addr (Go profiles)
}

// buildShardkeeper builds the binary into dir (the benchmark runs from the module).
func buildShardkeeper(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "shardkeeper-bin")
	logf("building shardkeeper → %s", bin)
	if err := runLogged(ctx, nil, "go", "build", "-o", bin, "github.com/shardkeeper/shardkeeper/cmd/shardkeeper"); err != nil {
		return "", fmt.Errorf("build shardkeeper (run from the repository): %w", err)
	}
	return bin, nil
}

// limitArgs raise shardkeeper's limits out of the workloads' reach.
var limitArgs = []string{
	"--max-pending-per-device", "1000000",
	"--max-devices", "1000000",
	"--max-servers", "1000000",
}

// startShardkeeper starts `bin serve` in dir with limits large enough that the workloads
// never hit them, and extra flags, and waits until /readyz answers 200.
func startShardkeeper(ctx context.Context, bin, dir string, partitions int, extra ...string) (*shardkeeperNode, error) {
	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	args := []string{"serve",
		"--node-id", "bench",
		"--data-dir", filepath.Join(dir, "data"),
		"--http-addr", addr(0), "--gossip-addr", addr(1), "--raft-addr", addr(2), "--remote-addr", addr(3), "--debug-addr", addr(4),
		"--bootstrap-expect", "1",
		"--partitions", strconv.Itoa(partitions),
	}
	args = append(append(append(args, limitArgs...), extra...), "--log-level", "warn")
	p, err := startProcess("shardkeeper", filepath.Join(dir, "shardkeeper.log"), bin, args...)
	if err != nil {
		return nil, err
	}
	n := &shardkeeperNode{process: p, url: "http://" + addr(0), debug: "http://" + addr(4)}
	if err := n.waitReady(ctx); err != nil {
		p.stop(10 * time.Second)
		return nil, err
	}
	logf("shardkeeper ready at %s (pid %d, %d partitions, data in %s)", n.url, p.cmd.Process.Pid, partitions, dir)
	return n, nil
}

// startShardkeeperCluster starts n nodes n1..n<n> of `bin serve` on loopback, each with its
// own data directory under dir, forming one cluster (--bootstrap-expect n, all joining n1's
// gossip address), with the same limits as startShardkeeper and extra flags, and waits until every node's
// /readyz answers 200.
func startShardkeeperCluster(ctx context.Context, bin, dir string, partitions, n int, extra ...string) ([]*shardkeeperNode, error) {
	ports, err := freePorts(5 * n)
	if err != nil {
		return nil, err
	}
	addr := func(node, i int) string { return "127.0.0.1:" + strconv.Itoa(ports[5*node+i]) }
	var nodes []*shardkeeperNode
	stopStarted := func() { stopAll(nodeProcesses(nodes), 10*time.Second) }
	for i := range n {
		id := "n" + strconv.Itoa(i+1)
		args := []string{"serve",
			"--node-id", id,
			"--data-dir", filepath.Join(dir, id, "data"),
			"--http-addr", addr(i, 0), "--gossip-addr", addr(i, 1), "--raft-addr", addr(i, 2), "--remote-addr", addr(i, 3),
			"--debug-addr", addr(i, 4),
			"--bootstrap-expect", strconv.Itoa(n),
			"--join", addr(0, 1),
			"--partitions", strconv.Itoa(partitions),
		}
		args = append(append(append(args, limitArgs...), extra...), "--log-level", "warn")
		p, err := startProcess("shardkeeper "+id, filepath.Join(dir, id+".log"), bin, args...)
		if err != nil {
			stopStarted()
			return nil, err
		}
		nodes = append(nodes, &shardkeeperNode{process: p, url: "http://" + addr(i, 0), debug: "http://" + addr(i, 4)})
	}
	var urls, pids []string
	for _, node := range nodes {
		if err := node.waitReady(ctx); err != nil {
			stopStarted()
			return nil, err
		}
		urls = append(urls, node.url)
		pids = append(pids, strconv.Itoa(node.cmd.Process.Pid))
	}
	settleStart := time.Now()
	if err := waitSettled(ctx, urls[0], n); err != nil {
		if ctx.Err() != nil {
			stopStarted()
			return nil, ctx.Err()
		}
		logf("WARNING: %v; measuring anyway", err)
	} else {
		logf("shardkeeper cluster settled (every partition led, %d replicas each, leadership spread) %v after ready", min(3, n), time.Since(settleStart).Round(10*time.Millisecond))
	}
	logf("shardkeeper cluster ready at %s (pids %s, %d partitions, data in %s)", strings.Join(urls, ","), strings.Join(pids, ","), partitions, dir)
	return nodes, nil
}

// waitReady waits until the node's /readyz answers 200.
func (n *shardkeeperNode) waitReady(ctx context.Context) error {
	probe, err := client.New([]string{n.url}, client.WithRetryPolicy(client.NoRetry))
	if err != nil {
		return err
	}
	return n.waitFor(ctx, 60*time.Second, "ready", probe.Readyz)
}

// nodeProcesses is the processes of nodes.
func nodeProcesses(nodes []*shardkeeperNode) []*process {
	ps := make([]*process, len(nodes))
	for i, n := range nodes {
		ps[i] = n.process
	}
	return ps
}

// benchClient is the client the workloads use: no retries (every error is counted), and a
// connection pool large enough for every concurrent client to keep its connection. The
// transport is httpconn's lean one, as for etcd (etcdClient), so that both systems are driven
// by the same, cheap HTTP client.
func benchClient(urls []string, maxClients int) (*client.Client, error) {
	tr := &httpconn.Transport{MaxIdlePerHost: 2 * maxClients, DialTimeout: 5 * time.Second, IdleTimeout: 90 * time.Second}
	return client.New(urls, client.WithRetryPolicy(client.NoRetry), client.WithHTTPClient(&http.Client{Transport: tr}))
}

// waitSettled waits (up to 30 s) until the cluster, as the node at url sees it, has settled
// after bootstrap: n alive members, every partition with a leader and min(3, n) replicas, and
// leadership spread evenly (the reconciler moves leaders with leadership transfers, and a
// request forwarded across one fails with 503), the same for five polls in a row.
func waitSettled(ctx context.Context, url string, n int) error {
	c, err := client.New([]string{url}, client.WithRetryPolicy(client.NoRetry))
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	stable, last := 0, "no answer yet"
	for stable < 5 {
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster not settled after 30s: %s", last)
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := c.Cluster(cctx)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if why := unsettled(st, err, n); why != "" {
			stable, last = 0, why
		} else {
			stable++
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

// unsettled is why the cluster status st (or err) is not settled, or "".
func unsettled(st *client.ClusterStatus, err error, n int) string {
	if err != nil {
		return err.Error()
	}
	alive := 0
	for _, m := range st.Members {
		if m.State == "alive" {
			alive++
		}
	}
	if alive != n {
		return fmt.Sprintf("%d of %d members alive", alive, n)
	}
	leaders := map[string]int{} // Raft groups led, by node
	groups := map[uint32]bool{}
	for _, p := range st.Partitions {
		if p.Leader == "" {
			return fmt.Sprintf("partition %d has no leader", p.ID)
		}
		if len(p.Replicas) != min(3, n) {
			return fmt.Sprintf("partition %d has %d replicas", p.ID, len(p.Replicas))
		}
		if !groups[p.Group] {
			groups[p.Group] = true
			leaders[p.Leader]++
		}
	}
	hi := 0
	for _, c := range leaders {
		hi = max(hi, c)
	}
	if hi > (len(groups)+n-1)/n { // no node leads more than its share of groups, rounded up
		return fmt.Sprintf("leadership not spread yet (%v)", leaders)
	}
	return ""
}
