package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is a child process (shardkeeper or redis-server) whose output goes to a log file.
// Children get SIGKILL when the benchmark dies (Pdeathsig, on Linux), and stop() is deferred
// by whoever starts them, so neither a Ctrl-C nor a crash of the benchmark leaves one behind.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has exited
	err     error         // its exit status, valid after done
}

// startProcess starts bin with args, its stdout and stderr appended to logPath.
func startProcess(name, logPath, bin string, args ...string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: log file: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// stop sends SIGTERM, waits up to grace for the exit, then kills. It is idempotent.
func (p *process) stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		logf("%s did not exit %v after SIGTERM; killing it", p.name, grace)
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// exitedEarly is the error of a process that exited while it should be serving, with the
// end of its log.
func (p *process) exitedEarly() error {
	return fmt.Errorf("%s exited: %v; end of %s:\n%s", p.name, p.err, p.logPath, logTail(p.logPath, 20))
}

// waitFor polls check every 20 ms until it succeeds, p exits, ctx ends or timeout passes.
func (p *process) waitFor(ctx context.Context, timeout time.Duration, what string, check func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		err := check(cctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			return p.exitedEarly()
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not %s after %v: %v; end of %s:\n%s", p.name, what, timeout, err, p.logPath, logTail(p.logPath, 20))
		}
	}
}

// logTail is the last n lines of the file at path.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// freePorts returns n distinct loopback ports that are free for TCP and UDP right now (gossip
// needs both). They are drawn below the kernel's ephemeral range, so that the thousands of
// client connections a run opens never take one between this check and the child's bind.
// Another process could still bind one first; the child then fails to start and says so.
func freePorts(n int) ([]int, error) {
	lo, hi := 10000, ephemeralStart()
	if hi-lo < 100*n {
		lo, hi = 0, 0 // no room below: let the kernel pick
	}
	handedOut.Lock()
	defer handedOut.Unlock()
	var ports []int
	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	for tries := 0; len(ports) < n; tries++ {
		if tries > 1000 {
			return nil, errors.New("find a free port: none free after 1000 tries")
		}
		port := 0
		if hi > lo {
			port = lo + rand.IntN(hi-lo)
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			if port == 0 {
				return nil, fmt.Errorf("find a free port: %w", err)
			}
			continue
		}
		held = append(held, l)
		port = l.Addr().(*net.TCPAddr).Port
		if handedOut.ports[port] {
			continue // free now, but a child started a moment ago may not have bound it yet
		}
		u, err := net.ListenPacket("udp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue // UDP side taken: keep the TCP listener held and try another
		}
		_ = u.Close()
		ports = append(ports, port)
		handedOut.ports[port] = true
	}
	return ports, nil
}

// handedOut is every port freePorts has returned: none is returned twice in one run.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// ephemeralStart is the first port of the kernel's ephemeral range (Linux), 32768 when it
// cannot be read.
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	v, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return v
}

// runLogged runs a short command (go build, apt-get) with its output on our stderr.
func runLogged(ctx context.Context, env []string, bin string, args ...string) error {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = childAttr()
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return fmt.Errorf("%s %v: %w", bin, args, err)
		}
		return err
	}
	return nil
}
