// Package script tests scripts/cluster.sh, the script behind make cluster: it starts,
// restarts and stops a real three-node cluster behind HAProxy, and checks that what the
// script says matches the processes.
package script

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/test/await"
	"github.com/shardkeeper/shardkeeper/test/proc"
)

func TestMain(m *testing.M) {
	code := m.Run()
	proc.Cleanup()
	os.Exit(code)
}

// cluster is one run of the script on a private directory and private ports.
type cluster struct {
	t        *testing.T
	script   string
	dir      string
	bin      string
	basePort int
	env      []string
}

// TestClusterScript: start; a node killed with SIGKILL; start again is refused and touches
// nothing; restarting another node is refused, for the quorum it would take, unless forced;
// restart brings the dead node back; a node whose peers are all dead is refused a restart,
// and they are brought back; stop leaves no process behind and every node exited 0; restart
// on the stopped cluster is refused and starts nothing.
func TestClusterScript(t *testing.T) {
	for _, tool := range []string{"haproxy", "curl", "setsid"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("scripts/cluster.sh needs %s, which is not installed (Debian package %s)", tool,
				map[string]string{"haproxy": "haproxy", "curl": "curl", "setsid": "util-linux"}[tool])
		}
	}
	c := newCluster(t)

	out, code := c.run("start")
	if code != 0 {
		t.Fatalf("start: exit %d\n%s", code, out)
	}
	pids := map[string]int{}
	for _, name := range []string{"n1", "n2", "n3", "haproxy"} {
		pids[name] = c.pid(name)
		if !running(pids[name]) {
			t.Fatalf("after start, %s (pid %d) is not running\n%s", name, pids[name], out)
		}
	}
	c.checkStartLogs()
	c.checkDataDirLocked()

	// A node dies without a word.
	if err := syscall.Kill(pids["n2"], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	await.True(t, 10*time.Second, "n2's exit status file", func() bool { return c.exitStatus("n2") != "" })
	if got := c.exitStatus("n2"); got != "137" {
		t.Errorf("n2.exit after SIGKILL = %q, want 137", got)
	}

	// Starting again over the survivors is refused and changes nothing.
	out, code = c.run("start")
	if code == 0 {
		t.Fatalf("start over a running cluster succeeded:\n%s", out)
	}
	for _, want := range []string{"already running", fmt.Sprintf("n1 pid %d", pids["n1"]), fmt.Sprintf("haproxy pid %d", pids["haproxy"]), "n2 (pid"} {
		if !strings.Contains(out, want) {
			t.Errorf("refused start does not say %q:\n%s", want, out)
		}
	}
	for _, name := range []string{"n1", "n3", "haproxy"} {
		if got := c.pid(name); got != pids[name] || !running(got) {
			t.Errorf("after the refused start, %s.pid = %d (running %v), want the live %d", name, got, running(got), pids[name])
		}
	}
	if _, err := os.Stat(filepath.Join(c.dir, "n2.pid")); !os.IsNotExist(err) {
		t.Errorf("the stale n2.pid is still there (%v)", err)
	}
	for _, name := range []string{"n1", "n2", "n3"} {
		if n := c.starts(name); n != 1 {
			t.Errorf("%s was started %d times, want once", name, n)
		}
	}

	// With n2 dead, restarting n1 would leave n3 alone, short of a quorum: refused, saying
	// why, and n1 keeps running untouched.
	out, code = c.run("restart", "n1")
	if code == 0 {
		t.Fatalf("restart n1 while n2 is dead succeeded:\n%s", out)
	}
	for _, want := range []string{"refusing to restart n1", "n2 is not running", "quorum", "--force"} {
		if !strings.Contains(out, want) {
			t.Errorf("refused restart does not say %q:\n%s", want, out)
		}
	}
	if got := c.pid("n1"); got != pids["n1"] || !running(got) || c.starts("n1") != 1 {
		t.Errorf("after the refused restart, n1.pid = %d (running %v, started %d times), want the live %d started once",
			got, running(got), c.starts("n1"), pids["n1"])
	}

	// --force restarts it anyway: n1 is stopped, killed when it is still running
	// STOP_TIMEOUT after SIGTERM (here it cannot act on SIGTERM: it is stopped with SIGSTOP),
	// and serves again with n3.
	if err := syscall.Kill(pids["n1"], syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	out, code = c.runEnv([]string{"STOP_TIMEOUT=1"}, "restart", "n1", "--force")
	if code != 0 {
		t.Fatalf("restart n1 --force: exit %d\n%s", code, out)
	}
	for _, want := range []string{"--force: restarting n1 while n2 is not running", "--force: killing n1", "n1 was killed by signal KILL"} {
		if !strings.Contains(out, want) {
			t.Errorf("forced restart does not say %q:\n%s", want, out)
		}
	}
	n1 := c.pid("n1")
	if n1 == pids["n1"] || !running(n1) || running(pids["n1"]) {
		t.Fatalf("after restart --force, n1.pid = %d (running %v), old pid %d (running %v)\n%s", n1, running(n1), pids["n1"], running(pids["n1"]), out)
	}
	c.awaitReady("n1", c.basePort+1)
	pids["n1"] = n1

	// restart brings n2 back on its data: its peers run.
	out, code = c.run("restart", "n2")
	if code != 0 {
		t.Fatalf("restart n2: exit %d\n%s", code, out)
	}
	n2 := c.pid("n2")
	if n2 == pids["n2"] || !running(n2) {
		t.Fatalf("after restart, n2.pid = %d (running %v), old pid %d\n%s", n2, running(n2), pids["n2"], out)
	}
	c.awaitReady("n2", c.basePort+2)
	pids["n2"] = n2

	// n1 and n3 die: n2 alone is refused a restart (it would never serve), but either dead
	// node is brought back, since with n2 it makes a quorum again.
	for _, name := range []string{"n1", "n3"} {
		if err := syscall.Kill(pids[name], syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		await.True(t, 10*time.Second, name+"'s exit status file", func() bool { return c.exitStatus(name) != "" })
	}
	out, code = c.run("restart", "n2")
	if code == 0 || !strings.Contains(out, "its peers n1 and n3 are not running") || c.pid("n2") != pids["n2"] || c.starts("n2") != 2 {
		t.Errorf("restart n2 without its peers: exit %d, n2.pid %d (was %d), started %d times\n%s", code, c.pid("n2"), pids["n2"], c.starts("n2"), out)
	}
	for _, name := range []string{"n1", "n3"} {
		if out, code = c.run("restart", name); code != 0 {
			t.Fatalf("restart %s with n2 running: exit %d\n%s", name, code, out)
		}
		pids[name] = c.pid(name)
	}

	// stop: every process gone, every node exited 0.
	out, code = c.run("stop")
	for name, pid := range pids {
		if running(pid) {
			t.Errorf("after stop, %s (pid %d) still runs", name, pid)
		}
	}
	for _, name := range []string{"n1", "n2", "n3"} {
		if got := c.exitStatus(name); got != "0" {
			t.Errorf("%s exited with status %q, want 0; its log ends:\n%s", name, got, c.logTail(name, 5))
		}
	}
	if code != 0 {
		t.Errorf("stop: exit %d", code)
	}
	if t.Failed() {
		t.Logf("stop printed:\n%s", out)
	}

	// restart on the stopped cluster is refused: a lone node would wait for its peers.
	out, code = c.run("restart", "n2")
	if code == 0 {
		t.Errorf("restart n2 on a stopped cluster succeeded:\n%s", out)
	}
	for _, want := range []string{"the cluster is not running", "scripts/cluster.sh start"} {
		if !strings.Contains(out, want) {
			t.Errorf("restart on a stopped cluster does not say %q:\n%s", want, out)
		}
	}
	if pid := c.pid("n2"); running(pid) || c.starts("n2") != 2 {
		t.Errorf("restart on a stopped cluster left n2.pid = %d (running %v), started %d times (want 2: start, restart)",
			pid, running(pid), c.starts("n2"))
	}
}

func newCluster(t *testing.T) *cluster {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	c := &cluster{
		t:      t,
		script: filepath.Join(filepath.Dir(strings.TrimSpace(string(gomod))), "scripts", "cluster.sh"),
		dir:    t.TempDir(),
		bin:    proc.Build(t, "./cmd/shardkeeper"),
	}
	var port int
	c.basePort, port = freePorts(t)
	c.env = append(os.Environ(),
		"CLUSTER_DIR="+c.dir, "BIN="+c.bin,
		"BASE_PORT="+strconv.Itoa(c.basePort), "PORT="+strconv.Itoa(port),
		"START_TIMEOUT=60", "STOP_TIMEOUT=30",
		// Checked in checkStartLogs: the nodes read it from the environment.
		"SHARDKEEPER_LOG_FORMAT=text")
	t.Cleanup(c.cleanup)
	return c
}

// run runs the script with args and returns its combined output and exit status.
func (c *cluster) run(args ...string) (string, int) {
	c.t.Helper()
	return c.runEnv(nil, args...)
}

// runEnv is run with the environment entries env ("NAME=value") added.
func (c *cluster) runEnv(env []string, args ...string) (string, int) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.script, args...)
	cmd.Env = append(append([]string(nil), c.env...), env...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	c.t.Logf("cluster.sh %s: %v, exit %d", strings.Join(args, " "), time.Since(start).Round(time.Millisecond), cmd.ProcessState.ExitCode())
	if ctx.Err() != nil {
		c.t.Fatalf("cluster.sh %s did not finish in time:\n%s", strings.Join(args, " "), out)
	}
	if err != nil && cmd.ProcessState == nil {
		c.t.Fatalf("cluster.sh %s: %v", strings.Join(args, " "), err)
	}
	return string(out), cmd.ProcessState.ExitCode()
}

// pid is the pid in name's pid file, 0 if there is none.
func (c *cluster) pid(name string) int {
	b, err := os.ReadFile(filepath.Join(c.dir, name+".pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// exitStatus is the content of node name's exit status file, "" while there is none.
func (c *cluster) exitStatus(name string) string {
	b, _ := os.ReadFile(filepath.Join(c.dir, name+".exit"))
	return strings.TrimSpace(string(b))
}

func (c *cluster) log(name string) string {
	b, _ := os.ReadFile(filepath.Join(c.dir, name+".log"))
	return string(b)
}

// starts counts the script's start markers in node name's log.
func (c *cluster) starts(name string) int {
	return strings.Count(c.log(name), "cluster.sh starts "+name)
}

func (c *cluster) logTail(name string, n int) string {
	lines := strings.Split(strings.TrimRight(c.log(name), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// awaitReady waits for a restarted node's /readyz to answer 200. The script returned once it
// did; it may fail for a moment since, while the leadership of a Raft group is handed to the
// node that came back (its partitions wait for the new leader's Barrier).
func (c *cluster) awaitReady(name string, port int) {
	c.t.Helper()
	await.True(c.t, 10*time.Second, name+"'s /readyz", func() bool { return c.get(port, "/readyz") == http.StatusOK })
}

func (c *cluster) get(port int, path string) int {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
	if err != nil {
		c.t.Errorf("GET %s on port %d: %v", path, port, err)
		return 0
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		c.t.Logf("GET %s on port %d: %d %s", path, port, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return resp.StatusCode
}

// checkStartLogs: the nodes log in the text format they were given, and a fresh cluster's
// start logs none of the warnings every fresh replica used to log once per partition.
func (c *cluster) checkStartLogs() {
	c.t.Helper()
	for _, name := range []string{"n1", "n2", "n3"} {
		text := false
		for _, line := range strings.Split(c.log(name), "\n") {
			switch {
			case strings.HasPrefix(line, "{"):
				c.t.Errorf("%s logged JSON despite SHARDKEEPER_LOG_FORMAT=text: %s", name, line)
			case strings.HasPrefix(line, "time=") && strings.Contains(line, `msg="shardkeeper node started"`):
				text = true
			}
			if !strings.Contains(line, "level=WARN") {
				continue
			}
			// A heartbeat timeout after a real leader (a slow machine) is a fair warning; one
			// without any leader known is the routine first election.
			if strings.Contains(line, `last-leader-id=""`) || strings.Contains(line, `msg="no known peers, aborting election"`) ||
				(strings.Contains(line, `msg="failed to get previous log"`) && strings.Contains(line, "last-index=0 ")) {
				c.t.Errorf("%s warns about a fresh replica's routine: %s", name, line)
			}
		}
		if !text {
			c.t.Errorf("%s's log has no text-format start line:\n%s", name, c.logTail(name, 5))
		}
	}
}

// checkDataDirLocked: a second process on a live node's data directory says that the
// directory is in use.
func (c *cluster) checkDataDirLocked() {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, "serve", "--node-id", "n1", "--data-dir", filepath.Join(c.dir, "n1"),
		"--http-addr", proc.FreeAddr(c.t), "--gossip-addr", proc.FreeAddr(c.t),
		"--raft-addr", proc.FreeAddr(c.t), "--remote-addr", proc.FreeAddr(c.t))
	cmd.Env = c.env
	out, err := cmd.CombinedOutput()
	want := "data directory " + filepath.Join(c.dir, "n1", "pebble") + " is in use by another process"
	if err == nil || !strings.Contains(string(out), want) {
		c.t.Errorf("a second process on n1's data directory: %v, output:\n%s\nwant it to say %q", err, out, want)
	}
}

// cleanup leaves no process behind whatever happened: the script's stop, then SIGKILL for
// anything that survived it.
func (c *cluster) cleanup() {
	var alive []int
	for _, name := range []string{"n1", "n2", "n3", "haproxy"} {
		if pid := c.pid(name); pid > 0 && running(pid) {
			alive = append(alive, pid)
		}
	}
	if len(alive) == 0 {
		return
	}
	if out, code := c.run("stop"); code != 0 {
		c.t.Logf("cleanup: stop: exit %d\n%s", code, out)
	}
	for _, pid := range alive {
		if running(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// running reports whether pid is a live process (a zombie is not).
func running(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// "pid (comm) state ...": comm may hold spaces and parentheses, the state follows the last ")".
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// freePorts picks the script's BASE_PORT and HAProxy's PORT: every port the cluster will use
// (BASE_PORT+N, +10+N, +20+N for TCP and UDP, +30+N) was free a moment ago. They are chosen
// below Linux's ephemeral range (32768 up), where other tests' :0 listeners land.
func freePorts(t *testing.T) (base, port int) {
	t.Helper()
	for range 50 {
		base = 20000 + 100*rand.IntN(120)
		port = base + 50
		ports := []int{port}
		for _, off := range []int{0, 10, 20, 30} {
			for i := 1; i <= 3; i++ {
				ports = append(ports, base+off+i)
			}
		}
		if allFree(ports, base+20) {
			return base, port
		}
	}
	t.Fatal("no free block of ports for the cluster")
	return 0, 0
}

// allFree reports whether every port is free for TCP on 127.0.0.1, and for UDP too in the
// block from udpFrom+1 to udpFrom+3 (gossip).
func allFree(ports []int, udpFrom int) bool {
	for _, p := range ports {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return false
		}
		ln.Close()
		if p > udpFrom && p <= udpFrom+3 {
			pc, err := net.ListenPacket("udp", addr)
			if err != nil {
				return false
			}
			pc.Close()
		}
	}
	return true
}
