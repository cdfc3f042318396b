package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
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
