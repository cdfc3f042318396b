package script

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tourBlock is one sh block of the README's tour, with the json block that follows it, if
// any: the output the README shows for it.
type tourBlock struct {
	line int    // of the block's first command in README.md
	code string // the commands, as written
	want string // the json block right after it ("" if none)
}

// tourPorts are the ports the tour's nodes and fakes listen on, all on 127.0.0.1: the node's
// HTTP, gossip (TCP and UDP), Raft and actor remoting defaults, the fake NEAR and Arweave
// nodes.
var tourPorts = []int{8080, 7946, 7000, 8090, 3030, 1984}

// TestReadmeTour runs the README's tour as a reader does: the sh blocks of its "A tour"
// section, in order, in one bash from the repository's root, each after the one before (they
// share shell variables), and fails at the first command of a block that fails (set -e,
// -u and pipefail stand for the reader who would stop there). The last JSON value each
// block prints must have the fields of the json block the README shows after it, and the same
// error code, verification and status where it shows one. The blocks start their nodes and
// fakes in the background themselves; the test ends whatever they left running by killing
// the process group. The tour listens on fixed ports: it runs in a network namespace of its
// own when unshare can make one (nothing else on the machine is in the way, and it is in no
// one's way), otherwise those ports must be free.
func TestReadmeTour(t *testing.T) {
	for _, tool := range []struct{ name, pkg string }{{"bash", "bash"}, {"curl", "curl"}, {"jq", "jq"}, {"openssl", "openssl"}, {"make", "make"}} {
		if _, err := exec.LookPath(tool.name); err != nil {
			t.Skipf("the README's tour needs %s, which is not installed (Debian package %s)", tool.name, tool.pkg)
		}
	}
	root := repoRoot(t)
	blocks := tourBlocks(t, filepath.Join(root, "README.md"))

	// Fill the build cache (and the module cache, from the network this process has) so that
	// the tour's builds only link.
	warm := exec.Command("go", "build", "./cmd/shardkeeper", "./test/fakenear/cmd/fakenear", "./test/fakearweave/cmd/fakearweave")
	warm.Dir = root
	if out, err := warm.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	script := filepath.Join(t.TempDir(), "tour.sh")
	if err := os.WriteFile(script, []byte(tourScript(blocks)), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var cmd *exec.Cmd
	if isolated() {
		cmd = exec.CommandContext(ctx, "unshare", "--user", "--map-root-user", "--net",
			"bash", "-c", `ip link set lo up && exec bash "$0"`, script)
	} else {
		t.Log("no network namespace (unshare --user --net, or ip, failed): the tour runs on this machine's loopback")
		for _, p := range tourPorts {
			if err := portFree(p); err != nil {
				t.Fatalf("the tour listens on 127.0.0.1:%d, which is in use (make run? a tour of your own?): %v", p, err)
			}
		}
		cmd = exec.CommandContext(ctx, "bash", script)
	}
	cmd.Dir = root
	cmd.Env = tourEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// Files, not pipes: the servers the blocks start in the background inherit them, and
	// would hold a pipe open, and Wait with it, until they end.
	stdout, stderr := createFile(t, "stdout"), createFile(t, "stderr")
	cmd.Stdout, cmd.Stderr = stdout, stderr
	t.Cleanup(func() { os.RemoveAll(filepath.Join(root, "tour")) })

	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	runErr := cmd.Wait()
	endGroup(t, cmd.Process.Pid)
	t.Logf("the tour's %d blocks ran in %v", len(blocks), time.Since(start).Round(time.Millisecond))
	if ctx.Err() != nil {
		t.Errorf("the tour did not finish within 3 minutes")
	}

	outputs, done := splitOutputs(readFile(stdout.Name()))

	errOut := readFile(stderr.Name())
	for i, b := range blocks {
		if !done[i] {
			t.Errorf("README.md line %d: the block failed (%v):\n%s\n--- its output:\n%s\n--- stderr, last lines:\n%s\n--- tour/node.log, last lines:\n%s",
				b.line, runErr, b.code, outputs[i], tail(errOut, 20), tail(readFile(filepath.Join(root, "tour", "node.log")), 20))
			return
		}
		if b.want != "" {
			checkOutput(t, b, outputs[i])
		}
	}
	if runErr != nil {
		t.Errorf("the tour's shell: %v\n%s", runErr, tail(errOut, 20))
	}
}

// tourBlocks returns the sh blocks of the README's "## A tour" section, each with the json
// block right after it.
func tourBlocks(t *testing.T, readme string) []tourBlock {
	t.Helper()
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var blocks []tourBlock
	in := false
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "## "):
			in = l == "## A tour"
			continue
		case !in || strings.TrimSpace(l) != "```sh":
			continue
		}
		body, end := fence(lines, i+1)
		blk := tourBlock{line: i + 2, code: body}
		if end+1 < len(lines) && strings.TrimSpace(lines[end+1]) == "```json" {
			blk.want, end = fence(lines, end+2)
		}
		blocks = append(blocks, blk)
		i = end
	}
	if len(blocks) < 8 {
		t.Fatalf("found %d sh blocks in the tour section of %s, want the whole tour", len(blocks), readme)
	}
	return blocks
}

// fence returns the lines from lines[from] up to the closing ``` and the closing line's index.
func fence(lines []string, from int) (string, int) {
	for j := from; j < len(lines); j++ {
		if strings.TrimSpace(lines[j]) == "```" {
			return strings.Join(lines[from:j], "\n"), j
		}
	}
	return strings.Join(lines[from:], "\n"), len(lines) - 1
}

// tourScript is the bash script of the blocks: each as written, between markers on stdout
// that say where its output starts and that it ran to its end.
func tourScript(blocks []tourBlock) string {
	var b strings.Builder
	b.WriteString("set -euo pipefail\n")
	for i, blk := range blocks {
		fmt.Fprintf(&b, "printf '\\n@@tour block %d@@\\n'\n", i)
		fmt.Fprintf(&b, "# README.md line %d\n%s\n", blk.line, blk.code)
		fmt.Fprintf(&b, "printf '\\n@@tour block %d done@@\\n'\n", i)
	}
	return b.String()
}

var marker = regexp.MustCompile(`(?m)^@@tour block (\d+)( done)?@@$`)

// splitOutputs returns each block's output and whether it ran to its end.
func splitOutputs(out string) (map[int]string, map[int]bool) {
	outputs, done := map[int]string{}, map[int]bool{}
	ms := marker.FindAllStringSubmatchIndex(out, -1)
	for k, m := range ms {
		i, _ := strconv.Atoi(out[m[2]:m[3]])
		if m[4] >= 0 {
			done[i] = true
			continue
		}
		end := len(out)
		if k+1 < len(ms) {
			end = ms[k+1][0]
		}
		outputs[i] = out[m[1]:end]
	}
	return outputs, done
}

// checkOutput compares the last JSON object a block printed with the README's.
func checkOutput(t *testing.T, b tourBlock, out string) {
	t.Helper()
	var want map[string]any
	if err := json.Unmarshal([]byte(b.want), &want); err != nil {
		t.Errorf("README.md line %d: the json block after it does not parse: %v", b.line, err)
		return
	}
	got := lastObject(out)
	if got == nil {
		t.Errorf("README.md line %d: the block printed no JSON object; the README shows %s\n--- its output:\n%s", b.line, b.want, out)
		return
	}
	if gk, wk := keys(got), keys(want); !slices.Equal(gk, wk) {
		t.Errorf("README.md line %d: the block printed the fields %v, the README shows %v\n--- printed:\n%s", b.line, gk, wk, out)
	}
	for _, k := range []string{"error", "verified", "status"} {
		if w, ok := want[k]; ok && fmt.Sprint(got[k]) != fmt.Sprint(w) {
			t.Errorf("README.md line %d: %s is %v, the README shows %v\n--- printed:\n%s", b.line, k, got[k], w, out)
		}
	}
}

// lastObject is the last JSON object in out, which may hold other text between values.
func lastObject(out string) map[string]any {
	var last map[string]any
	for i := 0; i < len(out); i++ {
		if out[i] != '{' {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(out[i:]))
		var v map[string]any
		if dec.Decode(&v) != nil {
			continue
		}
		last = v
		i += int(dec.InputOffset()) - 1
	}
	return last
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// isolated reports whether the tour can run in a network namespace of its own.
func isolated() bool {
	if _, err := exec.LookPath("unshare"); err != nil {
		return false
	}
	return exec.Command("unshare", "--user", "--map-root-user", "--net", "ip", "link", "set", "lo", "up").Run() == nil
}

// portFree reports, as an error, whether something listens on 127.0.0.1:port (TCP, and UDP
// for gossip's port).
func portFree(port int) error {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	ln.Close()
	if port == 7946 {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return err
		}
		pc.Close()
	}
	return nil
}

// tourEnv is this process's environment without SHARDKEEPER_* variables: the tour's nodes
// are configured by the README's flags alone, as in a reader's fresh shell.
func tourEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SHARDKEEPER_") {
			env = append(env, kv)
		}
	}
	return env
}

// endGroup ends every process left in the process group pgid (nodes and fakes the tour
// started in the background): SIGTERM, then SIGKILL for any still there after 30 seconds.
func endGroup(t *testing.T, pgid int) {
	t.Helper()
	if syscall.Kill(-pgid, syscall.SIGTERM) != nil {
		return // none left
	}
	deadline := time.Now().Add(30 * time.Second)
	for groupAlive(pgid) {
		if time.Now().After(deadline) {
			t.Logf("processes of the tour still running 30s after SIGTERM: killing them")
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			break
		}
		time.Sleep(20 * time.Millisecond) // polling the group until it is gone
	}
}

// groupAlive reports whether a process of group pgid is still running (zombies do not count:
// they are the children of a process that has exited, reaped by init).
func groupAlive(pgid int) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return syscall.Kill(-pgid, 0) == nil
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// "pid (comm) state ppid pgrp ...": comm may hold anything, the fields follow the last ")".
		s := string(stat)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) >= 3 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			return true
		}
	}
	return false
}

// createFile creates a file of that name in a temporary directory of t.
func createFile(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func repoRoot(t *testing.T) string {
	t.Helper()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(gomod)))
}

func readFile(path string) string {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "(none)"
	}
	return string(b)
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
