// Package crash holds multi-process tests that abuse a node: kills (SIGKILL) with a restart on
// the same data directory — no acknowledged write is lost or applied twice, durable alarms
// fire after the crash, and a data directory refuses a different partition count — and floods
// of connections that must be shed (flood_test.go).
package crash

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/test/await"
	"github.com/shardkeeper/shardkeeper/test/proc"
	"github.com/shardkeeper/shardkeeper/test/testkinds"
)

func TestMain(m *testing.M) {
	code := m.Run()
	proc.Cleanup()
	os.Exit(code)
}

// The crash tests' layout: four partitions in two Raft groups.
const (
	partitions = 4
	groups     = 2
)

// fastFlags make a one-node cluster elect itself quickly after a restart.
var fastFlags = []string{
	"--partitions", strconv.Itoa(partitions), "--raft-groups", strconv.Itoa(groups),
	"--raft-heartbeat-timeout", "200ms", "--raft-election-timeout", "200ms",
	"--request-timeout", "2s", "--log-level", "info",
}

func startTestNode(t *testing.T) *proc.Node {
	t.Helper()
	return proc.StartReady(t, proc.Config{Bin: proc.Build(t, "./test/testnode"), Flags: fastFlags})
}

// post sends one request to the counter actor id. err is a transport error (no status).
func post(hc *http.Client, n *proc.Node, id, method string, body []byte) (int, []byte, error) {
	resp, err := hc.Post(n.URL("/test/"+testkinds.CounterKind+"/"+id+"/"+method), "application/octet-stream", bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, b, nil
}

// mustCall calls a method until it answers 200, retrying transport errors and 503s for up to
// 10 s; any other status fails the test. Only for idempotent methods (get, fired, set-alarm).
func mustCall(t *testing.T, n *proc.Node, id, method string, body []byte) []byte {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, b, err := post(hc, n, id, method, body)
		switch {
		case err == nil && status == http.StatusOK:
			return b
		case err == nil && status != http.StatusServiceUnavailable:
			t.Fatalf("%s %s: %d %s", id, method, status, b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s: still failing after 10s: status %d, %s, %v", id, method, status, b, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tally is the client-side history of the increments of each counter.
type tally struct {
	mu       sync.Mutex
	acked    map[string]int              // 200 replies
	unknown  map[string]int              // outcome unknown: timeout, broken connection, 503, other status
	seen     map[string]map[int64]string // every value replied, and when (phase)
	dups     []string                    // values replied twice
	outcomes map[string]int              // class of every attempt, for the log
	phase    string
}

func newTally(ids []string) *tally {
	tl := &tally{acked: map[string]int{}, unknown: map[string]int{}, seen: map[string]map[int64]string{}, outcomes: map[string]int{}}
	for _, id := range ids {
		tl.seen[id] = map[int64]string{}
	}
	return tl
}

// record classifies one incr attempt and reports whether it was acknowledged.
func (tl *tally) record(id string, status int, body []byte, err error) bool {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	switch {
	case err == nil && status == http.StatusOK:
		v, perr := strconv.ParseInt(string(body), 10, 64)
		if perr != nil {
			tl.dups = append(tl.dups, fmt.Sprintf("%s: unparsable reply %q", id, body))
			return false
		}
		if prev, ok := tl.seen[id][v]; ok {
			tl.dups = append(tl.dups, fmt.Sprintf("%s: value %d replied in %s and again in %s", id, v, prev, tl.phase))
		}
		tl.seen[id][v] = tl.phase
		tl.acked[id]++
		tl.outcomes["200"]++
		return true
	case err == nil:
		tl.unknown[id]++
		tl.outcomes[strconv.Itoa(status)]++
	case isDialError(err):
		// The request never reached a process: certainly not applied.
		tl.outcomes["refused"]++
	default:
		tl.unknown[id]++
		tl.outcomes["transport error"]++
	}
	return false
}

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// load runs clients goroutines that send incr to ids until stop is closed; acked is closed once
// target acknowledgements have been counted since the start of this load.
func load(n *proc.Node, tl *tally, ids []string, clients, target int, stop <-chan struct{}) (acked <-chan struct{}, wait func()) {
	tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}
	hc := &http.Client{Timeout: 2 * time.Second, Transport: tr}
	reached := make(chan struct{})
	var count atomic.Int64
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := c; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := ids[i%len(ids)]
				status, body, err := post(hc, n, id, "incr", nil)
				if tl.record(id, status, body, err) && count.Add(1) == int64(target) {
					close(reached)
				}
			}
		})
	}
	return reached, func() { wg.Wait(); tr.CloseIdleConnections() }
}

// check reads every counter and compares it with the history: no acknowledged increment lost
// (acked ≤ V and every replied value ≤ V) and none applied twice or invented (V ≤ acked+unknown).
func check(t *testing.T, n *proc.Node, tl *tally, ids []string) map[string]int64 {
	t.Helper()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for _, d := range tl.dups {
		t.Errorf("value handed out twice: %s", d)
	}
	vals := map[string]int64{}
	for _, id := range ids {
		v, err := strconv.ParseInt(string(mustCall(t, n, id, "get", nil)), 10, 64)
		if err != nil {
			t.Fatalf("get %s: %v", id, err)
		}
		vals[id] = v
		acked, unknown := int64(tl.acked[id]), int64(tl.unknown[id])
		maxSeen := int64(0)
		for s := range tl.seen[id] {
			maxSeen = max(maxSeen, s)
		}
		t.Logf("%s %s: value %d, acked %d, unknown %d, largest reply %d", tl.phase, id, v, acked, unknown, maxSeen)
		if v < acked || v < maxSeen {
			t.Errorf("%s: acknowledged increments lost: value %d < acked %d (largest acknowledged value %d)", id, v, acked, maxSeen)
		}
		if v > acked+unknown {
			t.Errorf("%s: value %d > acked %d + unknown %d: an increment was applied twice", id, v, acked, unknown)
		}
	}
	t.Logf("%s outcomes: %v", tl.phase, tl.outcomes)
	return vals
}

func TestKillUnderLoadLosesNoAcknowledgedWrite(t *testing.T) {
	const clients, perCycle = 32, 2000
	n := startTestNode(t)
	ids := make([]string, 8)
	for i := range ids {
		ids[i] = fmt.Sprintf("c%d", i)
	}
	tl := newTally(ids)
	for cycle := 1; cycle <= 2; cycle++ {
		tl.mu.Lock()
		tl.phase = fmt.Sprintf("cycle %d", cycle)
		tl.mu.Unlock()
		stop := make(chan struct{})
		start := time.Now()
		acked, wait := load(n, tl, ids, clients, perCycle, stop)
		select {
		case <-acked:
		case <-time.After(30 * time.Second):
			close(stop)
			wait()
			t.Fatalf("cycle %d: fewer than %d increments acknowledged in 30s; outcomes %v", cycle, perCycle, tl.outcomes)
		}
		t.Logf("cycle %d: %d acks in %s; SIGKILL under load", cycle, perCycle, time.Since(start).Round(time.Millisecond))
		n.Kill()
		close(stop)
		wait()
		n.RestartReady()
		tl.mu.Lock()
		tl.phase = fmt.Sprintf("after restart %d", cycle)
		tl.mu.Unlock()
		vals := check(t, n, tl, ids)
		if t.Failed() {
			return
		}
		if cycle == 2 {
			// The counters go on from where they were: the next value is new.
			for _, id := range ids {
				status, body, err := post(http.DefaultClient, n, id, "incr", nil)
				if err != nil || status != http.StatusOK {
					t.Fatalf("incr %s after restart: %d %s %v", id, status, body, err)
				}
				if want := strconv.FormatInt(vals[id]+1, 10); string(body) != want {
					t.Errorf("incr %s after restart replied %s, want %s", id, body, want)
				}
			}
		}
	}
}

// idsIn returns count counter ids, "<prefix>-<i>", that fall in partition p.
func idsIn(prefix string, p uint32, count int) []string {
	var out []string
	for i := 0; len(out) < count; i++ {
		id := fmt.Sprintf("%s-%d", prefix, i)
		if actors.PartitionOf(testkinds.CounterKind, id, partitions) == p {
			out = append(out, id)
		}
	}
	return out
}

func TestAlarmFiresAfterKill(t *testing.T) {
	n := startTestNode(t)
	// x and z share a partition (z is x's neighbour in the alarm index), y is elsewhere.
	xz := idsIn("x", 0, 2)
	x, z, y := xz[0], xz[1], idsIn("y", 1, 1)[0]
	mustCall(t, n, z, "incr", nil) // z exists and has state, but no alarm
	due := time.Now().Add(1500 * time.Millisecond).UnixMilli()
	want := map[string][]string{x: {"a1"}, y: {"b1", "b2"}, z: nil}
	for _, id := range []string{x, y} {
		for _, name := range want[id] {
			body, _ := json.Marshal(testkinds.SetAlarm{Name: name, At: due})
			mustCall(t, n, id, "set-alarm", body)
		}
	}
	n.Kill()
	if left := time.Until(time.UnixMilli(due)); left < 0 {
		t.Logf("warning: the kill came %s after the alarms were due; they may have fired before it", -left)
	}
	n.RestartReady()

	deadline := time.Now().Add(20 * time.Second)
	for _, id := range []string{x, y} {
		for {
			var fired []testkinds.Firing
			if err := json.Unmarshal(mustCall(t, n, id, "fired", nil), &fired); err != nil {
				t.Fatalf("fired %s: %v", id, err)
			}
			if len(fired) >= len(want[id]) {
				var names []string
				for _, f := range fired {
					names = append(names, f.Name)
					if f.Scheduled != due || f.LateMS < 0 || f.FiredAt < f.Scheduled {
						t.Errorf("%s: firing %+v: want scheduled %d, fired_at ≥ scheduled, late_ms ≥ 0", id, f, due)
					}
				}
				if !slices.Equal(names, want[id]) {
					t.Errorf("%s fired %v, want %v", id, names, want[id])
				}
				t.Logf("%s fired %+v", id, fired)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: fired %+v after 20s, want %v", id, fired, want[id])
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// The firings are done: no alarm is pending any more, and z never had one.
	for _, id := range []string{x, y, z} {
		for {
			pending := strings.TrimSpace(string(mustCall(t, n, id, "alarms", nil)))
			if pending == "null" || pending == "[]" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: alarms still pending after firing: %s", id, pending)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if b := strings.TrimSpace(string(mustCall(t, n, z, "fired", nil))); b != "[]" {
		t.Errorf("%s had no alarm but fired %s", z, b)
	}

	// The metrics of the restarted process count the three firings.
	for _, name := range []string{"shardkeeper_alarm_lateness_seconds_count", "shardkeeper_alarms_fired_total"} {
		for {
			got, text := metricSum(t, n, name)
			if got >= 3 {
				t.Logf("%s = %g", name, got)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s = %g, want ≥ 3; /metrics:\n%s", name, got, grepLines(text, "shardkeeper_alarm"))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// The Go scheduler's latencies are exported for operators (a node whose goroutines wait
	// for a CPU); a process that has served requests has recorded some.
	if got, text := metricSum(t, n, "go_sched_latencies_seconds_count"); got <= 0 {
		t.Errorf("go_sched_latencies_seconds_count = %g; /metrics:\n%s", got, grepLines(text, "go_sched"))
	}
	// The operator's view: build info, this one-node cluster's Raft state and membership.
	for _, m := range []struct {
		name string
		want float64
	}{
		{"shardkeeper_build_info", 1},
		{"shardkeeper_raft_leader", float64(groups)},
		{`shardkeeper_members{state="alive"}`, 1},
		{`shardkeeper_members{state="failed"}`, 0},
		{"shardkeeper_partitions_without_leader", 0},
		{"shardkeeper_partitions_under_replicated", 0},
	} {
		if got, text := metricSum(t, n, m.name); got != m.want {
			t.Errorf("%s = %g, want %g; /metrics:\n%s", m.name, got, m.want, grepLines(text, "shardkeeper_"))
		}
	}
	if got, _ := metricSum(t, n, "shardkeeper_raft_commit_index"); got < float64(groups) {
		t.Errorf("shardkeeper_raft_commit_index sums to %g over %d raft groups, want at least one entry each", got, groups)
	}
}

// metricSum sums every sample of the metric name over its labels.
func metricSum(t *testing.T, n *proc.Node, name string) (float64, string) {
	t.Helper()
	resp, err := http.Get(n.URL("/metrics"))
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	sum := 0.0
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("/metrics line %q: %v", line, err)
		}
		sum += v
	}
	return sum, string(b)
}

func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestLayoutMismatchRefusesToStart: a data directory keeps the partition count and the
// Raft group count it was bootstrapped with; another value of either refuses to start and
// names both values. It also covers SIGTERM → exit 0 of the real binary.
func TestLayoutMismatchRefusesToStart(t *testing.T) {
	bin := proc.Build(t, "./cmd/shardkeeper")
	dir := t.TempDir()
	flags := func(extra ...string) []string {
		return append([]string{"--raft-heartbeat-timeout", "200ms", "--raft-election-timeout", "200ms"}, extra...)
	}
	// --raft-groups 0 (the default) in a new directory of 8 partitions: 3 groups.
	n := proc.StartReady(t, proc.Config{Bin: bin, Command: []string{"serve"}, DataDir: dir, Flags: flags("--partitions", "8")})
	if code := n.Term(); code != 0 {
		t.Fatalf("shardkeeper serve exited %d after SIGTERM, want 0", code)
	}

	for _, c := range []struct {
		flags       []string
		name        string // the flag the refusal names
		recorded, q string
	}{
		{[]string{"--partitions", "16"}, "partitions", "8", "16"},
		{[]string{"--partitions", "8", "--raft-groups", "5"}, "raft-groups", "3", "5"},
	} {
		bad := proc.Start(t, proc.Config{Bin: bin, Command: []string{"serve"}, DataDir: dir, Flags: flags(c.flags...)})
		code, exited := bad.Wait(20 * time.Second)
		if !exited {
			bad.Kill()
			t.Fatalf("shardkeeper serve %v on a directory bootstrapped with --%s=%s still runs after 20s", c.flags, c.name, c.recorded)
		}
		out := bad.Output()
		if code == 0 {
			t.Errorf("shardkeeper serve %v on a directory bootstrapped with --%s=%s exited 0", c.flags, c.name, c.recorded)
		}
		named := false
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "--"+c.name+"="+c.recorded+" ") && strings.Contains(line, "--"+c.name+"="+c.q+" ") {
				named = true
				t.Logf("exit %d: %s", code, line)
			}
		}
		if !named {
			t.Errorf("no line of the output (exit %d) names --%s=%s and %s:\n%s", code, c.name, c.recorded, c.q, out)
		}
	}

	// Refusing did not damage the directory: the recorded layout starts, named or by default.
	n.RestartReady()
	if code := n.Term(); code != 0 {
		t.Fatalf("shardkeeper serve exited %d after the second SIGTERM, want 0", code)
	}
	named := proc.StartReady(t, proc.Config{Bin: bin, Command: []string{"serve"}, DataDir: dir, Flags: flags("--partitions", "8", "--raft-groups", "3")})
	if code := named.Term(); code != 0 {
		t.Fatalf("shardkeeper serve --raft-groups 3 exited %d after SIGTERM, want 0", code)
	}
}

// TestJoinOtherLayoutRefused: a node asked to join a cluster of another Raft group count
// refuses to start and says which count to use; its data directory, which holds no Raft
// state yet, then starts with that count and joins.
func TestJoinOtherLayoutRefused(t *testing.T) {
	bin := proc.Build(t, "./cmd/shardkeeper")
	n1 := proc.StartReady(t, proc.Config{Bin: bin, Command: []string{"serve"}, Flags: fastFlags})
	join := append(append([]string{}, fastFlags...), "--join", n1.GossipAddr)
	n2 := proc.Start(t, proc.Config{Bin: bin, Command: []string{"serve"}, NodeID: "n2",
		Flags: append(append([]string{}, join...), "--raft-groups", "1")})
	code, exited := n2.Wait(20 * time.Second)
	if !exited {
		n2.Kill()
		t.Fatalf("a node of --raft-groups 1 joining a cluster of %d groups still runs after 20s", groups)
	}
	out := n2.Output()
	want := fmt.Sprintf("member n1 runs --raft-groups=%d but this node has --raft-groups=1", groups)
	if code == 0 || !strings.Contains(out, want) || !strings.Contains(out, fmt.Sprintf("start this node with --raft-groups=%d", groups)) {
		t.Fatalf("exit %d, output does not say %q and what to use:\n%s", code, want, out)
	}
	n2.RestartWith("--raft-groups", strconv.Itoa(groups))
	n2.WaitReady(30 * time.Second)
	await.True(t, 30*time.Second, "n2 a replica of every group", func() bool {
		v := clusterView(t, n1)
		for _, p := range v.Partitions {
			if !slices.Contains(p.Replicas, "n2") {
				return false
			}
		}
		return len(v.Partitions) == partitions
	})
}
