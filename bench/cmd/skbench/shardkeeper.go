package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	"github.com/shardkeeper/shardkeeper/client"
)

// shardkeeperNode is a one-node shardkeeper serving on loopback from a fresh data directory.
type shardkeeperNode struct {
	*process
	url string
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

// startShardkeeper starts `bin serve` in dir with limits large enough that the workloads
// never hit them, and waits until /readyz answers 200.
func startShardkeeper(ctx context.Context, bin, dir string, partitions int) (*shardkeeperNode, error) {
	ports, err := freePorts(4)
	if err != nil {
		return nil, err
	}
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	args := []string{"serve",
		"--node-id", "bench",
		"--data-dir", filepath.Join(dir, "data"),
		"--http-addr", addr(0), "--gossip-addr", addr(1), "--raft-addr", addr(2), "--remote-addr", addr(3),
		"--bootstrap-expect", "1",
		"--partitions", strconv.Itoa(partitions),
		"--max-pending-per-device", "1000000",
		"--max-devices", "1000000",
		"--max-servers", "1000000",
		"--log-level", "warn",
	}
	p, err := startProcess("shardkeeper", filepath.Join(dir, "shardkeeper.log"), bin, args...)
	if err != nil {
		return nil, err
	}
	n := &shardkeeperNode{process: p, url: "http://" + addr(0)}
	probe, err := client.New([]string{n.url}, client.WithRetryPolicy(client.NoRetry))
	if err != nil {
		p.stop(10 * time.Second)
		return nil, err
	}
	if err := p.waitFor(ctx, 60*time.Second, "ready", probe.Readyz); err != nil {
		p.stop(10 * time.Second)
		return nil, err
	}
	logf("shardkeeper ready at %s (pid %d, %d partitions, data in %s)", n.url, p.cmd.Process.Pid, partitions, dir)
	return n, nil
}

// benchClient is the client the workloads use: no retries (every error is counted), and a
// connection pool large enough for every concurrent client to keep its connection.
func benchClient(urls []string, maxClients int) (*client.Client, error) {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        2 * maxClients,
		MaxIdleConnsPerHost: 2 * maxClients,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return client.New(urls, client.WithRetryPolicy(client.NoRetry), client.WithHTTPClient(&http.Client{Transport: tr}))
}
