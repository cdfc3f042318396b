package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// records decodes the JSON lines a slog handler wrote.
func records(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		out = append(out, m)
	}
	buf.Reset()
	return out
}

// The bridge writes hclog calls as slog records at the handler's level, with the component,
// the implied arguments of With and the name of Named.
func TestHclogBridge(t *testing.T) {
	var buf bytes.Buffer
	l := newHclog(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})), "raft")

	l.Debug("hidden", "k", 1)
	l.Trace("hidden too")
	if got := records(t, &buf); len(got) != 0 {
		t.Fatalf("below the handler's level: %v", got)
	}
	if l.IsDebug() || l.IsTrace() || !l.IsInfo() || !l.IsError() || l.GetLevel() != hclog.Info {
		t.Fatalf("levels: debug %v trace %v info %v error %v, GetLevel %v", l.IsDebug(), l.IsTrace(), l.IsInfo(), l.IsError(), l.GetLevel())
	}

	p := l.With("partition", 3).Named("net")
	p.Warn("failed to contact", "server-id", "n2", "error", errors.New("dial tcp: refused"))
	got := records(t, &buf)
	want := map[string]any{"level": "WARN", "msg": "failed to contact", "component": "raft", "partition": 3.0, "logger": "net",
		"server-id": "n2", "error": "dial tcp: refused"}
	if len(got) != 1 {
		t.Fatalf("records %v", got)
	}
	for k, v := range want {
		if got[0][k] != v {
			t.Errorf("%s = %v, want %v (record %v)", k, got[0][k], v, got[0])
		}
	}
	if p.Name() != "net" || p.Named("pipe").Name() != "net.pipe" || len(p.ImpliedArgs()) != 2 {
		t.Errorf("Name %q, Named %q, ImpliedArgs %v", p.Name(), p.Named("pipe").Name(), p.ImpliedArgs())
	}
	l.Info("entering follower state", "follower", node{Addr: "127.0.0.1:7000"}, "servers", hclog.Fmt("%+v", []int{1, 2}))
	got = records(t, &buf)
	if len(got) != 1 || got[0]["follower"] != "Node at 127.0.0.1:7000 [Follower]" || got[0]["servers"] != "[1 2]" {
		t.Fatalf("Stringer and hclog.Fmt values: %v", got)
	}
	l.Error("plain")
	if got := records(t, &buf); len(got) != 1 || got[0]["level"] != "ERROR" || got[0]["partition"] != nil {
		t.Fatalf("With changed its parent: %v", got)
	}
}

// memberlist logs through a standard *log.Logger: the level comes from the line's prefix.
func TestHclogBridgeStandardLogger(t *testing.T) {
	var buf bytes.Buffer
	l := newHclog(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), "memberlist")
	std := l.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})
	for _, tc := range []struct{ line, level, msg string }{
		{"[WARN] memberlist: Was able to connect to n2 over TCP but UDP probes failed", "WARN", "memberlist: Was able to connect to n2 over TCP but UDP probes failed"},
		{"[ERR] memberlist: Failed to send ping", "ERROR", "memberlist: Failed to send ping"},
		{"[DEBUG] memberlist: Stream connection from=127.0.0.1:4000", "DEBUG", "memberlist: Stream connection from=127.0.0.1:4000"},
		{"no level at all", "INFO", "no level at all"},
	} {
		std.Print(tc.line)
		got := records(t, &buf)
		if len(got) != 1 || got[0]["level"] != tc.level || got[0]["msg"] != tc.msg || got[0]["component"] != "memberlist" {
			t.Errorf("%q logged as %v, want level %s msg %q", tc.line, got, tc.level, tc.msg)
		}
	}
}

// node stands for *raft.Raft: a struct whose log form is its String.
type node struct{ Addr string }

func (n node) String() string { return "Node at " + n.Addr + " [Follower]" }

// A partition's first election (no leader ever known) is routine; losing a known leader is
// worth a warning.
func TestHclogBridgeFirstElection(t *testing.T) {
	var buf bytes.Buffer
	level := new(slog.LevelVar)
	l := newHclog(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: level})), "raft").With("partition", 7)

	// As hashicorp/raft v1.8.0 logs it on a fresh node: the last leader is empty.
	l.Warn(electionStarted, "last-leader-addr", raft.ServerAddress(""), "last-leader-id", raft.ServerID(""))
	if got := records(t, &buf); len(got) != 0 {
		t.Fatalf("first election logged at info level: %v", got)
	}
	level.Set(slog.LevelDebug)
	l.Warn(electionStarted, "last-leader-addr", raft.ServerAddress(""), "last-leader-id", raft.ServerID(""))
	if got := records(t, &buf); len(got) != 1 || got[0]["level"] != "DEBUG" || got[0]["partition"] != 7.0 {
		t.Fatalf("first election at debug level: %v", got)
	}

	level.Set(slog.LevelInfo)
	l.Warn(electionStarted, "last-leader-addr", raft.ServerAddress("127.0.0.1:7001#n2@ab"), "last-leader-id", raft.ServerID("n2@ab"))
	if got := records(t, &buf); len(got) != 1 || got[0]["level"] != "WARN" || got[0]["last-leader-id"] != "n2@ab" {
		t.Fatalf("election after losing a leader: %v", got)
	}
	// A message without the arguments (another raft version) keeps its level.
	l.Warn(electionStarted)
	if got := records(t, &buf); len(got) != 1 || got[0]["level"] != "WARN" {
		t.Fatalf("election without leader arguments: %v", got)
	}
}

// The other warnings of a fresh replica are routine; the same messages in another situation
// stay warnings.
func TestHclogBridgeFreshReplicaWarnings(t *testing.T) {
	var buf bytes.Buffer
	l := newHclog(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})), "raft")
	// As hashicorp/raft v1.8.0 logs them: a replica with no configuration, and one with an
	// empty log receiving its first append.
	l.Warn("no known peers, aborting election")
	l.Warn("failed to get previous log", "previous-index", uint64(1), "last-index", uint64(0), "error", raft.ErrLogNotFound)
	if got := records(t, &buf); len(got) != 0 {
		t.Fatalf("fresh replica's warnings logged at info level: %v", got)
	}
	// A replica with entries that misses one: its log diverged or was truncated.
	l.Warn("failed to get previous log", "previous-index", uint64(90), "last-index", uint64(41), "error", raft.ErrLogNotFound)
	if got := records(t, &buf); len(got) != 1 || got[0]["level"] != "WARN" || got[0]["last-index"] != 41.0 {
		t.Fatalf("missing entry of a replica with a log: %v", got)
	}
}

// fakeClock is a settable clock for the repeat limiter.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// An error repeated against the same peer is logged once, then once per interval with the
// number of lines dropped in between; other peers, messages and components have their own
// budget, and lines below warning or naming no peer are never dropped.
func TestHclogBridgeRepeatedErrors(t *testing.T) {
	var buf bytes.Buffer
	clock := &fakeClock{t: time.Unix(1700000000, 0)}
	limiter := newRepeatLimiter(10*time.Second, clock.now)
	base := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	raftLog := newHclogLimited(base, "raft", limiter)
	p0, p1 := raftLog.With("partition", 0), raftLog.With("partition", 1).Named("replication")
	other := newHclogLimited(base, "memberlist", limiter)

	heartbeat := func(l hclog.Logger, peer string) {
		l.Error("failed to heartbeat to", "peer", raft.ServerAddress(peer), "backoff time", 10*time.Millisecond,
			"error", errors.New("dial tcp "+peer+": connect: connection refused"))
	}
	msgs := func(got []map[string]any) []string {
		var out []string
		for _, r := range got {
			s := r["msg"].(string)
			if p, ok := r["peer"].(string); ok {
				s += " " + p
			}
			if n, ok := r["repeated"]; ok {
				s += fmt.Sprint(" repeated=", n)
			}
			out = append(out, s)
		}
		return out
	}

	heartbeat(p0, "n2")
	for range 5 {
		clock.advance(time.Second)
		heartbeat(p0, "n2")
		heartbeat(p1, "n2") // another partition, same peer: the same line
	}
	heartbeat(p0, "n3")                                                   // another peer
	p0.Error("failed to appendEntries to", "peer", raft.Server{ID: "n2"}) // another message
	other.Error("failed to heartbeat to", "peer", "n2")                   // another component
	p0.Info("failed to heartbeat to", "peer", "n2")                       // below warning
	p0.Error("failed to commit logs", "error", "disk")                    // no peer
	p0.Error("failed to commit logs", "error", "disk")
	got := msgs(records(t, &buf))
	want := []string{
		"failed to heartbeat to n2",
		"failed to heartbeat to n3",
		"failed to appendEntries to",
		"failed to heartbeat to n2",
		"failed to heartbeat to n2",
		"failed to commit logs",
		"failed to commit logs",
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("logged\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}

	// 5 s after the first line: still within the interval.
	heartbeat(p0, "n2")
	if got := records(t, &buf); len(got) != 0 {
		t.Fatalf("within the interval: %v", got)
	}
	// 10 s after the first line: one line with the 11 dropped since.
	clock.advance(5 * time.Second)
	heartbeat(p1, "n2")
	got = msgs(records(t, &buf))
	if len(got) != 1 || got[0] != "failed to heartbeat to n2 repeated=11" {
		t.Fatalf("after the interval: %v", got)
	}
	// The count restarts: the next line after another interval reports only what came since.
	clock.advance(time.Second)
	heartbeat(p0, "n2")
	clock.advance(10 * time.Second)
	heartbeat(p0, "n2")
	if got := msgs(records(t, &buf)); len(got) != 1 || got[0] != "failed to heartbeat to n2 repeated=1" {
		t.Fatalf("second interval: %v", got)
	}
	// After a quiet interval with nothing dropped, a line carries no count.
	clock.advance(time.Minute)
	heartbeat(p0, "n2")
	if got := msgs(records(t, &buf)); len(got) != 1 || got[0] != "failed to heartbeat to n2" {
		t.Fatalf("after a quiet spell: %v", got)
	}
}

// The limiter forgets idle keys rather than grow with every peer ever seen.
func TestRepeatLimiterBounded(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1700000000, 0)}
	l := newRepeatLimiter(10*time.Second, clock.now)
	for i := range 3 * maxRepeatKeys {
		if emit, _ := l.admit(repeatKey{"raft", "failed to contact", fmt.Sprint(i)}); !emit {
			t.Fatalf("first record of key %d dropped", i)
		}
		if i%100 == 0 {
			clock.advance(time.Second)
		}
	}
	if len(l.keys) > maxRepeatKeys {
		t.Fatalf("%d keys kept, bound %d", len(l.keys), maxRepeatKeys)
	}
}
