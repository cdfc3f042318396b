package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/shardkeeper/shardkeeper/bench/internal/workload"
	"github.com/shardkeeper/shardkeeper/client"
)

// runFloor measures the oracle workload on the calibration server (bench/cmd/skfloor), twice:
// with every write fsynced (system "floor") and with nothing stored (system "floor-nofsync").
// It tells how much of a gap to Redis this machine imposes on any Go HTTP service with a
// durable write per request, before Raft, actors or replication. The floor not being
// buildable (skbench run outside the module) skips it with a message.
func runFloor(ctx context.Context, o options, tmp string, rows *[]row) error {
	bin := filepath.Join(tmp, "skfloor-bin")
	if err := runLogged(ctx, nil, "go", "build", "-o", bin, "github.com/shardkeeper/shardkeeper/bench/cmd/skfloor"); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		logf("SKIPPING the floor calibration: build skfloor: %v", err)
		return nil
	}
	for _, durable := range []bool{true, false} {
		system := sysFloor
		if !durable {
			system = sysFloorNoFsync
		}
		if err := measureFloor(ctx, o, bin, filepath.Join(tmp, system), durable, system, rows); err != nil {
			return err
		}
	}
	return nil
}

// measureFloor starts one skfloor and runs the oracle workload on it at every client count.
func measureFloor(ctx context.Context, o options, bin, dir string, durable bool, system string, rows *[]row) error {
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	p, err := startProcess(system, dir+".log", bin, "--addr", addr, "--dir", dir, "--durable="+strconv.FormatBool(durable))
	if err != nil {
		return err
	}
	defer p.stop(10 * time.Second)
	url := "http://" + addr
	probe, err := client.New([]string{url}, client.WithRetryPolicy(client.NoRetry))
	if err != nil {
		return err
	}
	if err := p.waitFor(ctx, 30*time.Second, "ready", probe.Readyz); err != nil {
		return err
	}
	logf("%s ready at %s (pid %d, durable %v)", system, url, p.cmd.Process.Pid, durable)
	c, err := benchClient([]string{url}, slices.Max(o.clients))
	if err != nil {
		return err
	}
	for _, n := range o.clients {
		r, err := measure(ctx, o, []*process{p}, workload.Names[workload.Oracle], system, workload.OracleOps(c, n))
		if err != nil {
			return fmt.Errorf("%s: %w", system, err)
		}
		*rows = append(*rows, r)
	}
	return nil
}
