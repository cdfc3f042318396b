package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// CPU caps stand in for a fleet of small machines on a two-core one: each node runs in a
// cgroup (v1 cpu controller) allowed capPct % of one core, so that adding nodes adds CPU
// as adding machines would, and the load generator keeps the rest.

// cgroupRoot is where the cgroup v1 cpu controller is mounted.
const cgroupRoot = "/sys/fs/cgroup/cpu"

// cfsPeriod is the CFS period of a capped node: 10 ms, so that a node's quota comes in
// slices short enough not to stall a request for long.
const cfsPeriodUS = 10000

// cpuCaps is the benchmark's parent cgroup, holding one child per capped node.
type cpuCaps struct {
	dir    string
	capPct int
}

// newCPUCaps creates the parent cgroup; an error means the caps cannot be applied here (not
// root, no v1 cpu controller).
func newCPUCaps(capPct int) (*cpuCaps, error) {
	if capPct <= 0 || capPct > 100 {
		return nil, fmt.Errorf("cap %d%%: want 1..100", capPct)
	}
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cpu.cfs_quota_us")); err != nil {
		return nil, fmt.Errorf("no cgroup v1 cpu controller at %s: %w", cgroupRoot, err)
	}
	dir := filepath.Join(cgroupRoot, "skbench-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cgroup %s: %w", dir, err)
	}
	return &cpuCaps{dir: dir, capPct: capPct}, nil
}

// apply moves process pid into a new child cgroup named name, capped at capPct % of a core.
func (c *cpuCaps) apply(name string, pid int) error {
	dir := filepath.Join(c.dir, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create cgroup %s: %w", dir, err)
	}
	for _, w := range []struct{ file, value string }{
		{"cpu.cfs_period_us", strconv.Itoa(cfsPeriodUS)},
		{"cpu.cfs_quota_us", strconv.Itoa(cfsPeriodUS * c.capPct / 100)},
		{"cgroup.procs", strconv.Itoa(pid)},
	} {
		if err := os.WriteFile(filepath.Join(dir, w.file), []byte(w.value), 0o644); err != nil {
			return fmt.Errorf("cgroup %s: write %s: %w", dir, w.file, err)
		}
	}
	return nil
}

// weigh gives the parent the weight of nodes processes of their own (cpu.shares 1024 each).
// Under contention CFS divides the machine between the parent and its siblings — the load
// generator's threads, when skbench runs in the root cgroup as here — by weight: a parent
// of the default weight would leave nine nodes together the share of one thread, below
// their caps, where machines of their own would not. (Under a systemd slice the siblings
// are the slice's, and the weight weighs against those.) A failure leaves the weight as it
// was, and is only reported.
func (c *cpuCaps) weigh(nodes int) {
	shares := strconv.Itoa(min(1024*nodes, 262144))
	if err := os.WriteFile(filepath.Join(c.dir, "cpu.shares"), []byte(shares), 0o644); err != nil {
		logf("WARNING: the nodes' cgroup keeps its weight (%v): under contention %d nodes get less than their caps", err, nodes)
	}
}

// throttled is the share of CFS periods in which the cgroup of name was throttled so far,
// and how many periods there were.
func (c *cpuCaps) throttled(name string) (periods, throttled int64) {
	b, err := os.ReadFile(filepath.Join(c.dir, name, "cpu.stat"))
	if err != nil {
		return 0, 0
	}
	var key string
	var v int64
	for _, line := range strings.Split(string(b), "\n") {
		if _, err := fmt.Sscan(line, &key, &v); err != nil {
			continue
		}
		switch key {
		case "nr_periods":
			periods = v
		case "nr_throttled":
			throttled = v
		}
	}
	return periods, throttled
}

// remove deletes the cgroups (their processes must have exited).
func (c *cpuCaps) remove() {
	entries, _ := os.ReadDir(c.dir)
	for _, e := range entries {
		if e.IsDir() {
			_ = os.Remove(filepath.Join(c.dir, e.Name()))
		}
	}
	_ = os.Remove(c.dir)
}
