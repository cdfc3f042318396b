// Package proc runs shardkeeper nodes as separate processes for multi-process tests (crash,
// chaos). A node runs in its own process because protoactor's remote sets process-wide state,
// and because the faults these tests inject — SIGKILL, restart on the same data directory — only
// mean something for a real process.
//
// The contract:
//
//   - Build compiles a main package of the module once per test binary run and returns the path
//     of the binary; Cleanup (from TestMain, after m.Run) removes every binary built.
//   - FreeAddr picks a free loopback address by listening on 127.0.0.1:0 and closing again. The
//     port is free when picked, not reserved: another process may take it before the node
//     binds, which then fails to start (and the test fails, with the node's log).
//   - Start launches a node with fresh ports and the given flags and returns at once; WaitReady
//     polls GET /readyz until 200 (a condition with a deadline, never a fixed sleep). StartReady
//     does both.
//   - Kill sends SIGKILL and waits for the exit; Term sends SIGTERM and waits (up to a deadline)
//     and returns the exit code; Wait waits for an exit the process makes on its own. Restart
//     starts the same binary again with the same arguments, ports and data directory.
//   - The process's stdout and stderr go to one log file in a test temp directory (or
//     Config.LogDir); every start appends a header line. Output returns what the current run
//     wrote. When the test fails, the tail of the log is printed by a t.Cleanup, and any
//     process still running is killed.
//   - For fault injection: Config.IP binds a node's listeners to another loopback address
//     (FreeAddrOn picks ports there) and Config.GID runs it with its own group id, so that
//     firewall rules can single it out; Stop and Cont send SIGSTOP and SIGCONT; Wipe empties
//     the data directory of a node that is not running. StartCluster starts N nodes that form
//     one cluster (--bootstrap-expect N, --join the others).
//
// Every method must be called from the test goroutine (they may call t.Fatal).
package proc

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/pki"
)

var (
	buildMu  sync.Mutex
	buildDir string
	built    = map[string]string{} // package path → binary
)

// Build compiles the main package pkg, given relative to the module root (for example
// "./test/testnode" or "./cmd/shardkeeper"), and returns the binary's path. The module root
// is the directory of `go env GOMOD`. Each package is built at most once per test binary run;
// a build failure fails t with the compiler's output.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if bin, ok := built[pkg]; ok {
		return bin
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		t.Fatalf("proc.Build: no module found (go env GOMOD = %q): %v", gomod, err)
	}
	if buildDir == "" {
		if buildDir, err = os.MkdirTemp("", "shardkeeper-proc-"); err != nil {
			t.Fatalf("proc.Build: %v", err)
		}
	}
	bin := filepath.Join(buildDir, strings.NewReplacer("/", "_", ".", "_").Replace(pkg))
	start := time.Now()
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = filepath.Dir(gomod)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("proc.Build: go build %s: %v\n%s", pkg, err, out)
	}
	t.Logf("proc.Build: built %s in %s", pkg, time.Since(start).Round(time.Millisecond))
	built[pkg] = bin
	return bin
}

// Cleanup removes the binaries made by Build. Call it from TestMain after m.Run.
func Cleanup() {
	buildMu.Lock()
	defer buildMu.Unlock()
	if buildDir != "" {
		os.RemoveAll(buildDir)
		buildDir, built = "", map[string]string{}
	}
}

// FreeAddr returns a loopback host:port that was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return FreeAddrOn(t, "127.0.0.1")
}

// FreeAddrOn returns host:port on the local address ip (e.g. "127.0.0.12": all of 127/8 is
// loopback on Linux) whose port was free, for TCP and for UDP, a moment ago, and that no
// earlier call of this process returned: a port is not reserved until its node binds it, so
// without that the next pick, for another node, could return it again. With ip "0.0.0.0" the
// port was free on every interface (for nodes that bind all of them).
func FreeAddrOn(t testing.TB, ip string) string {
	t.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			t.Fatalf("proc.FreeAddrOn(%s): %v", ip, err)
		}
		addr := ln.Addr().String()
		_, port, _ := net.SplitHostPort(addr)
		// Gossip binds the same port for UDP: make sure that one is free too.
		pc, uerr := net.ListenPacket("udp", addr)
		ln.Close()
		if uerr != nil {
			continue
		}
		pc.Close()
		handedOutMu.Lock()
		dup := handedOut[port]
		handedOut[port] = true
		handedOutMu.Unlock()
		if !dup {
			return addr
		}
	}
	t.Fatalf("proc.FreeAddrOn(%s): no port free for both TCP and UDP", ip)
	return ""
}

// handedOut holds every port FreeAddrOn returned in this process.
var (
	handedOutMu sync.Mutex
	handedOut   = map[string]bool{}
)

// Config describes a node to start.
type Config struct {
	// Bin is the binary, usually from Build.
	Bin string
	// Command are the arguments before the flags, e.g. []string{"serve"} for cmd/shardkeeper;
	// empty for test/testnode.
	Command []string
	// NodeID is --node-id; default "n1".
	NodeID string
	// DataDir is --data-dir; default a new t.TempDir().
	DataDir string
	// Flags are appended after the flags proc sets (--node-id, --data-dir and the four
	// addresses), so they may override them.
	Flags []string
	// IP is the loopback address the node's four listeners bind (e.g. "127.0.0.11", so that
	// network faults can tell nodes apart); default 127.0.0.1.
	IP string
	// GossipAddr presets the gossip address (host:port), e.g. so that the members of a
	// cluster can be told each other's address before any starts; default a free port on IP.
	GossipAddr string
	// GID, when non-zero, runs the process with this group id (its uid unchanged; needs root).
	// Firewall rules can then tell the node's own sockets apart (nftables meta skgid).
	GID uint32
	// BindAll makes the four listeners bind every interface (0.0.0.0) on the picked ports,
	// with --advertise-addr IP; the Node's addresses stay IP:port, the addresses to dial.
	BindAll bool
	// LogDir is where the node's log file goes; default a new t.TempDir() (removed with the
	// test). Give a directory that outlives the test to keep the logs.
	LogDir string
	// TLSDir, when set, runs the node with mutual TLS on its peer ports: a node certificate
	// for NodeID is issued there by the CA of the directory (both made when missing, see
	// pki.WriteNodes).
	TLSDir string
}

// Node is one node process: its addresses, data directory and log. Its fields are read-only.
type Node struct {
	// Config is the configuration the node was started with, defaults filled in.
	Config Config
	// HTTPAddr, RaftAddr, GossipAddr and RemoteAddr are the node's loopback addresses; they
	// stay the same across restarts.
	HTTPAddr, RaftAddr, GossipAddr, RemoteAddr string
	// LogPath is the file that receives the stdout and stderr of every run.
	LogPath string

	t        testing.TB
	args     []string
	extra    []string // flags after args, from the last RestartWith
	cmd      *exec.Cmd
	exited   chan struct{} // closed when the current process has exited
	logStart int64         // offset in the log where the current run begins
	runs     int
}

// Start launches a node and returns without waiting for it to be ready.
func Start(t testing.TB, cfg Config) *Node {
	t.Helper()
	if cfg.NodeID == "" {
		cfg.NodeID = "n1"
	}
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.IP == "" {
		cfg.IP = "127.0.0.1"
	}
	if cfg.LogDir == "" {
		cfg.LogDir = t.TempDir()
	}
	// Ports come from FreeAddrOn, which never returns one twice; a node binding every
	// interface needs them free on all of them, not only on its IP.
	probe := cfg.IP
	if cfg.BindAll {
		probe = "0.0.0.0"
	}
	pick := func() string {
		_, port, _ := net.SplitHostPort(FreeAddrOn(t, probe))
		return net.JoinHostPort(cfg.IP, port)
	}
	if cfg.GossipAddr == "" {
		cfg.GossipAddr = pick()
	}
	n := &Node{t: t, Config: cfg, LogPath: filepath.Join(cfg.LogDir, cfg.NodeID+".log"),
		HTTPAddr: pick(), RaftAddr: pick(), GossipAddr: cfg.GossipAddr, RemoteAddr: pick()}
	listen := func(addr string) string {
		if !cfg.BindAll {
			return addr
		}
		_, port, _ := net.SplitHostPort(addr)
		return net.JoinHostPort("0.0.0.0", port)
	}
	n.args = append(append([]string(nil), cfg.Command...),
		// A small ballast: test nodes write little, and many of them start.
		"--disk-ballast", "1MiB",
		"--node-id", cfg.NodeID, "--data-dir", cfg.DataDir, "--http-addr", listen(n.HTTPAddr),
		"--raft-addr", listen(n.RaftAddr), "--gossip-addr", listen(n.GossipAddr), "--remote-addr", listen(n.RemoteAddr))
	if cfg.BindAll {
		n.args = append(n.args, "--advertise-addr", cfg.IP)
	}
	if cfg.TLSDir != "" {
		f := nodeTLS(t, cfg.TLSDir, cfg.NodeID)
		n.args = append(n.args, "--tls-ca", f.CA, "--tls-cert", f.Cert, "--tls-key", f.Key)
	}
	n.args = append(n.args, cfg.Flags...)
	// Registered after the temp dirs above, so it runs before they are removed.
	t.Cleanup(func() {
		if n.running() {
			n.cmd.Process.Kill()
			<-n.exited
		}
		if t.Failed() {
			t.Logf("proc: tail of %s log (%s):\n%s", cfg.NodeID, n.LogPath, n.tail(100))
		}
	})
	n.start()
	return n
}

// StartReady is Start followed by WaitReady(30s).
func StartReady(t testing.TB, cfg Config) *Node {
	t.Helper()
	n := Start(t, cfg)
	n.WaitReady(30 * time.Second)
	return n
}

func (n *Node) start() {
	n.t.Helper()
	if n.running() {
		n.t.Fatalf("proc: %s started while still running", n.Config.NodeID)
	}
	f, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		n.t.Fatalf("proc: log: %v", err)
	}
	defer f.Close()
	n.runs++
	fmt.Fprintf(f, "=== proc: run %d at %s: %s %s\n", n.runs, time.Now().Format(time.RFC3339Nano),
		n.Config.Bin, strings.Join(append(n.args, n.extra...), " "))
	if n.logStart, err = f.Seek(0, io.SeekEnd); err != nil {
		n.t.Fatalf("proc: log: %v", err)
	}
	cmd := exec.Command(n.Config.Bin, append(append([]string(nil), n.args...), n.extra...)...)
	cmd.Stdout, cmd.Stderr = f, f
	if n.Config.GID != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{
			Uid: uint32(os.Getuid()), Gid: n.Config.GID, NoSetGroups: true}}
	}
	if err := cmd.Start(); err != nil {
		n.t.Fatalf("proc: start %s: %v", n.Config.NodeID, err)
	}
	n.cmd, n.exited = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(n.exited)
}

func (n *Node) running() bool {
	if n.exited == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// URL is the node's HTTP API address followed by path (which starts with "/").
func (n *Node) URL(path string) string { return "http://" + n.HTTPAddr + path }

// WaitReady polls GET /readyz until it answers 200. It fails the test if the process exits
// first or the timeout passes.
func (n *Node) WaitReady(timeout time.Duration) {
	n.t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	client := &http.Client{Timeout: time.Second}
	last := "no answer"
	for {
		select {
		case <-n.exited:
			n.t.Fatalf("proc: %s exited with code %d before it was ready", n.Config.NodeID, n.cmd.ProcessState.ExitCode())
		default:
		}
		resp, err := client.Get(n.URL("/readyz"))
		if err == nil {
			var b bytes.Buffer
			_, _ = b.ReadFrom(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				n.t.Logf("proc: %s ready after %s", n.Config.NodeID, time.Since(start).Round(time.Millisecond))
				return
			}
			last = fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(b.String()))
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("proc: %s not ready after %s; last /readyz: %s", n.Config.NodeID, timeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Kill sends SIGKILL and waits for the process to be gone.
func (n *Node) Kill() {
	n.t.Helper()
	if !n.running() {
		n.t.Fatalf("proc: Kill: %s is not running", n.Config.NodeID)
	}
	_ = n.cmd.Process.Kill()
	<-n.exited
}

// Term sends SIGTERM, waits up to 30 s for the process to exit, and returns its exit code
// (-1 if a signal ended it). If it does not exit in time it is killed and the test fails.
func (n *Node) Term() int {
	n.t.Helper()
	if !n.running() {
		n.t.Fatalf("proc: Term: %s is not running", n.Config.NodeID)
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	code, ok := n.Wait(30 * time.Second)
	if !ok {
		n.Kill()
		n.t.Fatalf("proc: %s did not exit within 30s of SIGTERM", n.Config.NodeID)
	}
	return code
}

// Wait waits up to timeout for the process to exit on its own and returns its exit code and
// true, or false if it is still running.
func (n *Node) Wait(timeout time.Duration) (code int, exited bool) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	select {
	case <-n.exited:
		return n.cmd.ProcessState.ExitCode(), true
	case <-ctx.Done():
		return 0, false
	}
}

// Restart starts the node again, with the same binary, arguments, ports and data directory,
// after Kill, Term or an exit of its own. It does not wait for readiness.
func (n *Node) Restart() {
	n.t.Helper()
	n.start()
}

// RestartWith is Restart with flags added after the node's own (so they override them), for
// this run and the next ones; a later RestartWith replaces them.
func (n *Node) RestartWith(flags ...string) {
	n.t.Helper()
	n.extra = flags
	n.start()
}

// RestartReady is Restart followed by WaitReady(30s).
func (n *Node) RestartReady() {
	n.t.Helper()
	n.Restart()
	n.WaitReady(30 * time.Second)
}

// Output is what the current (or last) run of the process wrote to stdout and stderr so far.
func (n *Node) Output() string {
	b, err := os.ReadFile(n.LogPath)
	if err != nil || int64(len(b)) < n.logStart {
		return ""
	}
	return string(b[n.logStart:])
}

// tail is the last lines of the whole log.
func (n *Node) tail(lines int) string {
	b, err := os.ReadFile(n.LogPath)
	if err != nil {
		return err.Error()
	}
	s := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(s) > lines {
		s = s[len(s)-lines:]
	}
	return strings.Join(s, "\n")
}

// PID is the process id of the current run (0 before the first start).
func (n *Node) PID() int {
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Running reports whether the current run has not exited (a stopped process is running).
func (n *Node) Running() bool { return n.running() }

// Stop sends SIGSTOP: the process freezes (its sockets stay open, nothing answers) until
// Cont. Kill and the test's cleanup still end a stopped process.
func (n *Node) Stop() {
	n.t.Helper()
	n.signal("Stop", syscall.SIGSTOP)
}

// Cont sends SIGCONT to a process frozen by Stop.
func (n *Node) Cont() {
	n.t.Helper()
	n.signal("Cont", syscall.SIGCONT)
}

func (n *Node) signal(op string, sig syscall.Signal) {
	n.t.Helper()
	if !n.running() {
		n.t.Fatalf("proc: %s: %s is not running", op, n.Config.NodeID)
	}
	if err := n.cmd.Process.Signal(sig); err != nil {
		n.t.Fatalf("proc: %s %s: %v", op, n.Config.NodeID, err)
	}
}

// Wipe deletes everything in the node's data directory (the directory itself stays), as a
// lost disk would. The process must not be running.
func (n *Node) Wipe() {
	n.t.Helper()
	if n.running() {
		n.t.Fatalf("proc: Wipe: %s is still running", n.Config.NodeID)
	}
	entries, err := os.ReadDir(n.Config.DataDir)
	if err != nil {
		n.t.Fatalf("proc: Wipe %s: %v", n.Config.NodeID, err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(n.Config.DataDir, e.Name())); err != nil {
			n.t.Fatalf("proc: Wipe %s: %v", n.Config.NodeID, err)
		}
	}
}

// ClusterConfig describes a cluster of nodes started together by StartCluster.
type ClusterConfig struct {
	// Bin and Command as in Config.
	Bin     string
	Command []string
	// N is the number of nodes; their ids are "n1" … "nN".
	N int
	// IPs are the loopback addresses of the nodes, one per node; default all 127.0.0.1.
	IPs []string
	// GIDs are the group ids the nodes run with (see Config.GID), one per node; default none.
	GIDs []uint32
	// Flags are given to every node, after --bootstrap-expect N and --join (the gossip
	// addresses of all the other nodes).
	Flags []string
	// BindAll as in Config, for every node.
	BindAll bool
	// LogDir as in Config.
	LogDir string
	// TLSDir as in Config, for every node.
	TLSDir string
}

// StartCluster starts c.N nodes that form one cluster: each is started with
// --bootstrap-expect N and --join listing every other node's gossip address (so any of them
// can restart and rejoin alone). It returns without waiting for readiness (see WaitReady).
func StartCluster(t testing.TB, c ClusterConfig) []*Node {
	t.Helper()
	if c.N < 1 {
		t.Fatalf("proc.StartCluster: N = %d", c.N)
	}
	cfgs := make([]Config, c.N)
	gossip := make([]string, c.N)
	for i := range cfgs {
		cfgs[i] = Config{Bin: c.Bin, Command: c.Command, NodeID: fmt.Sprintf("n%d", i+1), IP: "127.0.0.1", LogDir: c.LogDir, BindAll: c.BindAll, TLSDir: c.TLSDir}
		if i < len(c.IPs) {
			cfgs[i].IP = c.IPs[i]
		}
		if i < len(c.GIDs) {
			cfgs[i].GID = c.GIDs[i]
		}
		probe := cfgs[i].IP
		if c.BindAll {
			probe = "0.0.0.0"
		}
		_, port, _ := net.SplitHostPort(FreeAddrOn(t, probe))
		gossip[i] = net.JoinHostPort(cfgs[i].IP, port)
		cfgs[i].GossipAddr = gossip[i]
	}
	nodes := make([]*Node, c.N)
	for i := range cfgs {
		var others []string
		for j, g := range gossip {
			if j != i {
				others = append(others, g)
			}
		}
		cfgs[i].Flags = []string{"--bootstrap-expect", strconv.Itoa(c.N)}
		if len(others) > 0 {
			cfgs[i].Flags = append(cfgs[i].Flags, "--join", strings.Join(others, ","))
		}
		cfgs[i].Flags = append(cfgs[i].Flags, c.Flags...)
		nodes[i] = Start(t, cfgs[i])
	}
	return nodes
}

var tlsMu sync.Mutex

// nodeTLS returns node id's TLS files in dir, issuing them on first use.
func nodeTLS(t testing.TB, dir, id string) pki.Files {
	t.Helper()
	tlsMu.Lock()
	defer tlsMu.Unlock()
	ca, _ := pki.CAFiles(dir)
	f := pki.Files{CA: ca, Cert: filepath.Join(dir, id+".pem"), Key: filepath.Join(dir, id+"-key.pem")}
	if _, err := os.Stat(f.Cert); err == nil {
		return f
	}
	files, err := pki.WriteNodes(dir, []string{"127.0.0.1", "localhost"}, 24*time.Hour, id)
	if err != nil {
		t.Fatalf("proc: TLS material for %s: %v", id, err)
	}
	return files[id]
}
