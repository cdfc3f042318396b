package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shardkeeper/shardkeeper/bench/internal/httpconn"
	"github.com/shardkeeper/shardkeeper/bench/internal/workload"
)

// etcdCluster is a 3-member etcd cluster on loopback, each member with its own data
// directory and etcd's default fsync behaviour (every commit is fsynced).
type etcdCluster struct {
	members    []*process
	clientURLs []string
}

// startEtcdCluster starts n members of bin with their data under dir and waits until each
// answers /health with {"health":"true"}.
func startEtcdCluster(ctx context.Context, bin, dir string, n int) (*etcdCluster, error) {
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	var tok [6]byte
	_, _ = crand.Read(tok[:])
	token := "skbench-" + hex.EncodeToString(tok[:])
	name := func(i int) string { return "e" + strconv.Itoa(i+1) }
	clientURL := func(i int) string { return "http://127.0.0.1:" + strconv.Itoa(ports[2*i]) }
	peerURL := func(i int) string { return "http://127.0.0.1:" + strconv.Itoa(ports[2*i+1]) }
	var initial []string
	for i := range n {
		initial = append(initial, name(i)+"="+peerURL(i))
	}
	c := &etcdCluster{}
	for i := range n {
		args := []string{
			"--name", name(i),
			"--data-dir", filepath.Join(dir, name(i)),
			"--listen-client-urls", clientURL(i), "--advertise-client-urls", clientURL(i),
			"--listen-peer-urls", peerURL(i), "--initial-advertise-peer-urls", peerURL(i),
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new",
			"--initial-cluster-token", token,
		}
		p, err := startProcess("etcd "+name(i), filepath.Join(dir, name(i)+".log"), bin, args...)
		if err != nil {
			c.stop()
			return nil, err
		}
		c.members = append(c.members, p)
		c.clientURLs = append(c.clientURLs, clientURL(i))
	}
	hc := &http.Client{Timeout: time.Second}
	for i, p := range c.members {
		health := func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.clientURLs[i]+"/health", nil)
			if err != nil {
				return err
			}
			res, err := hc.Do(req)
			if err != nil {
				return err
			}
			defer res.Body.Close()
			var h struct {
				Health string `json:"health"`
			}
			b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<16))
			if err := json.Unmarshal(b, &h); err != nil || res.StatusCode != http.StatusOK || h.Health != "true" {
				return fmt.Errorf("/health: %d %s", res.StatusCode, strings.TrimSpace(string(b)))
			}
			return nil
		}
		if err := p.waitFor(ctx, 60*time.Second, "healthy", health); err != nil {
			c.stop()
			return nil, err
		}
	}
	pids := make([]string, len(c.members))
	for i, p := range c.members {
		pids[i] = strconv.Itoa(p.cmd.Process.Pid)
	}
	logf("etcd cluster healthy at %s (pids %s, data in %s)", strings.Join(c.clientURLs, ","), strings.Join(pids, ","), dir)
	return c, nil
}

// stop stops every member at once.
func (c *etcdCluster) stop() {
	stopAll(c.members, 10*time.Second)
}

// stopAll stops the processes concurrently and waits for them all.
func stopAll(ps []*process, grace time.Duration) {
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.stop(grace)
		}()
	}
	wg.Wait()
}

// etcdVersion is the server version the first member reports on /version ("" if unknown).
func etcdVersion(ctx context.Context, url string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/version", nil)
	if err != nil {
		return ""
	}
	res, err := (&http.Client{Timeout: 2 * time.Second}).Do(req)
	if err != nil {
		return ""
	}
	defer res.Body.Close()
	var v struct {
		Server string `json:"etcdserver"`
	}
	_ = json.NewDecoder(res.Body).Decode(&v)
	return v.Server
}

// etcdClient returns the workload's client of the cluster: one http.Client with keep-alive
// shared by every load client (over httpconn's lean transport, as for shardkeeper in
// benchClient), and the gateway prefix the installed version serves (probed with a
// maintenance status call: /v3 on 3.4+, /v3beta on 3.3, /v3alpha before).
func etcdClient(ctx context.Context, urls []string, maxClients int) (*workload.Etcd, error) {
	tr := &httpconn.Transport{MaxIdlePerHost: 2 * maxClients, DialTimeout: 5 * time.Second, IdleTimeout: 90 * time.Second}
	e := &workload.Etcd{URLs: urls, HC: &http.Client{Transport: tr}}
	var errs []error
	for _, prefix := range []string{"/v3", "/v3beta", "/v3alpha"} {
		e.Prefix = prefix
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := e.PostTo(cctx, urls[0], "/maintenance/status", struct{}{}, nil)
		cancel()
		if err == nil {
			return e, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", prefix, err))
	}
	return nil, fmt.Errorf("etcd: no JSON gateway answers: %w", errors.Join(errs...))
}

// runEtcd finds (or installs) etcd, starts a 3-member cluster and measures the oracle
// workload on it. etcd being unavailable is not an error: the comparison is skipped with a
// message.
func runEtcd(ctx context.Context, o options, tmp string, rows *[]row) error {
	bin, why := findOrInstall(ctx, "etcd", "etcd-server", "--skip-etcd")
	if bin == "" {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		logf("SKIPPING the etcd comparison: %s", why)
		return nil
	}
	dir := filepath.Join(tmp, "etcd")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ec, err := startEtcdCluster(ctx, bin, dir, 3)
	if err != nil {
		return err
	}
	defer func() {
		logf("stopping etcd")
		ec.stop()
	}()
	e, err := etcdClient(ctx, ec.clientURLs, slices.Max(o.clients))
	if err != nil {
		return err
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	lease, err := e.GrantLease(lctx, 3600)
	cancel()
	if err != nil {
		return fmt.Errorf("etcd: lease grant: %w", err)
	}
	logf("etcd %s: JSON gateway %s, lease %s (TTL 1 h) shared by every key", etcdVersion(ctx, ec.clientURLs[0]), e.Prefix, lease)
	for _, n := range o.clients {
		ops := workload.EtcdOracleOps(e, lease, n)
		r, err := measure(ctx, o, ec.members, workload.Names[workload.Oracle], sysEtcd, ops)
		if err != nil {
			return err
		}
		*rows = append(*rows, r)
	}
	return nil
}
