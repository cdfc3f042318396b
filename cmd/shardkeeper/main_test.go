package main

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/buildinfo"
)

// clusterBody is a /v1/cluster answer with every field, plus one this binary does not know.
const clusterBody = `{"node_id":"n1",
 "members":[
  {"node_id":"n1","server_id":"n1@aa","state":"alive","state_since":1700000000000,"http_addr":"127.0.0.1:18081"},
  {"node_id":"n2","server_id":"n2@bb","state":"failed","state_since":1700000176000,"http_addr":"127.0.0.1:18082"},
  {"node_id":"n3","state":"suspect","http_addr":"127.0.0.1:18083"}],
 "partitions":[
  {"id":0,"group":0,"leader":"n1","replicas":["n1","n2","n3"],"voters":["n1","n2"],"non_voters":["n3"],"applied_index":42,"lag":{"n3":7},"under_replicated":true},
  {"id":1,"group":0,"leader":"","replicas":["n1","n2","n3"],"voters":["n1","n2","n3"],"applied_index":9},
  {"id":2,"leader":"n3","replicas":["n3","n1"],"applied_index":5}],
 "future_field":{"x":1}}`

// now is 3m10s after n1's state_since and 14s after n2's.
var now = time.UnixMilli(1700000190000)

func serveCluster(t *testing.T, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/cluster" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// fields splits out into lines of whitespace-separated fields, so that checks do not depend
// on column widths.
func fields(out string) [][]string {
	var rows [][]string
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		rows = append(rows, strings.Fields(l))
	}
	return rows
}

func TestStatusTables(t *testing.T) {
	addr := serveCluster(t, clusterBody)
	var out bytes.Buffer
	if err := status([]string{"--addr", addr}, &out, func() time.Time { return now }); err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"view", "of", "node", "n1"},
		{},
		{"NODE", "STATE", "FOR", "HTTP"},
		{"n1", "alive", "3m10s", "127.0.0.1:18081"},
		{"n2", "failed", "14s", "127.0.0.1:18082"},
		{"n3", "suspect", "-", "127.0.0.1:18083"},
		{},
		{"ID", "GROUP", "LEADER", "VOTERS", "NON-VOTERS", "APPLIED"},
		{"0", "0", "n1", "n1,n2", "n3", "42", "under-replicated"},
		{"1", "0", "-", "n1,n2,n3", "-", "9"},
		{"2", "-", "n3", "n3,n1", "-", "5"}, // no voters or group field: the replicas stand in
	}
	checkRows(t, out.String(), want)
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.TrimRight(l, " ") != l {
			t.Errorf("trailing blanks in %q", l)
		}
	}
	// Columns line up: every member row's HTTP column starts where its header does.
	lines := strings.Split(out.String(), "\n")
	col := strings.Index(lines[2], "HTTP")
	for _, l := range lines[3:6] {
		if !strings.HasPrefix(l[col:], "127.0.0.1:") {
			t.Errorf("HTTP column not aligned at %d in %q", col, l)
		}
	}
}

func TestStatusMembers(t *testing.T) {
	addr := serveCluster(t, clusterBody)
	var out bytes.Buffer
	// The view name may come before or after the flags.
	for _, args := range [][]string{{"members", "--addr", addr}, {"--addr", addr, "members"}} {
		out.Reset()
		if err := status(args, &out, func() time.Time { return now }); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		checkRows(t, out.String(), [][]string{
			{"NODE", "STATE", "FOR", "HTTP"},
			{"n1", "alive", "3m10s", "127.0.0.1:18081"},
			{"n2", "failed", "14s", "127.0.0.1:18082"},
			{"n3", "suspect", "-", "127.0.0.1:18083"},
		})
	}
}

func TestStatusJSON(t *testing.T) {
	addr := serveCluster(t, clusterBody)
	var out bytes.Buffer
	if err := status([]string{"--addr", addr, "--json"}, &out, time.Now); err != nil {
		t.Fatal(err)
	}
	// As received: the same document, fields unknown to this binary included, indented.
	var got, want any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	_ = json.Unmarshal([]byte(clusterBody), &want)
	if gb, _ := json.Marshal(got); string(gb) != string(mustMarshal(want)) {
		t.Errorf("--json printed\n%s\nwant the body as received", out.String())
	}
	if !strings.Contains(out.String(), "\n  \"future_field\": {") {
		t.Errorf("--json output is not indented:\n%s", out.String())
	}

	out.Reset()
	if err := status([]string{"members", "--json", "--addr", addr}, &out, time.Now); err != nil {
		t.Fatal(err)
	}
	var members []map[string]any
	if err := json.Unmarshal(out.Bytes(), &members); err != nil || len(members) != 3 || members[1]["server_id"] != "n2@bb" {
		t.Errorf("members --json printed %s (%v)", out.String(), err)
	}
}

// A node of an older version sends fewer fields; nothing breaks.
func TestStatusToleratesAbsentFields(t *testing.T) {
	addr := serveCluster(t, `{"node_id":"n1","members":[{"node_id":"n1","state":"alive"}],"partitions":[{"id":0}]}`)
	var out bytes.Buffer
	if err := status([]string{"--addr", addr}, &out, time.Now); err != nil {
		t.Fatal(err)
	}
	checkRows(t, out.String(), [][]string{
		{"view", "of", "node", "n1"}, {},
		{"NODE", "STATE", "FOR", "HTTP"},
		{"n1", "alive", "-", "-"}, {},
		{"ID", "GROUP", "LEADER", "VOTERS", "NON-VOTERS", "APPLIED"},
		{"0", "-", "-", "-", "-", "0"},
	})
}

func TestStatusErrors(t *testing.T) {
	// A port nobody listens on: taken, then released.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()

	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"error":"unavailable"}`, http.StatusServiceUnavailable)
	}))
	defer failing.Close()
	garbage := serveCluster(t, `<html>`)

	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--addr", closed}, []string{"no node is listening at " + closed, "connection refused"}},
		{[]string{"--addr", strings.TrimPrefix(failing.URL, "http://")}, []string{"answered 503 Service Unavailable", "unavailable"}},
		{[]string{"--addr", garbage}, []string{"node at " + garbage + " sent an unreadable /v1/cluster body"}},
	} {
		var out bytes.Buffer
		err := status(tc.args, &out, time.Now)
		if err == nil {
			t.Errorf("%v: no error", tc.args)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q does not say %q", tc.args, err, w)
			}
		}
	}
}

func TestRun(t *testing.T) {
	addr := serveCluster(t, clusterBody)
	for _, tc := range []struct {
		args       []string
		code       int
		stdout     []string // substrings
		stderr     []string
		notInHelp  string
		wantStdout string // exact, when set
	}{
		{args: []string{"--version"}, wantStdout: buildinfo.Get().String() + "\n"},
		{args: []string{"version"}, wantStdout: buildinfo.Get().String() + "\n"},
		{args: []string{"-v"}, wantStdout: buildinfo.Get().String() + "\n"},
		{args: []string{"version", "--help"}, stdout: []string{"Usage: shardkeeper version", "-v"}},
		{args: []string{"help", "status"}, stdout: []string{"Usage: shardkeeper status"}},
		{args: []string{"help", "frobnicate"}, code: 2, stderr: []string{`unknown command "frobnicate"`}},
		{args: []string{"status", "--help"}, stdout: []string{"--addr host:port", "--json", "status [members]"}, notInHelp: "  -addr"},
		{args: []string{"status", "--addr", addr, "members"}, stdout: []string{"NODE", "n2"}},
		{args: []string{"status", "--addr", addr, "partitions"}, code: 2, stderr: []string{`unexpected argument "partitions"`, "shardkeeper status --help"}},
		{args: []string{"status", "--bogus"}, code: 2, stderr: []string{"bogus"}},
		{args: []string{"status", "--addr", "127.0.0.1:1"}, code: 1, stderr: []string{"127.0.0.1:1"}},
		{args: []string{"version", "extra"}, code: 2, stderr: []string{"version takes no arguments", "see shardkeeper --help"}},
		{args: []string{"help"}, stdout: []string{"serve", "status", "version"}},
		{args: []string{"frobnicate"}, code: 2, stderr: []string{`unknown command "frobnicate"`}},
		{args: nil, code: 2, stderr: []string{"usage: shardkeeper"}},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		if code != tc.code {
			t.Errorf("%v: exit %d, want %d (stderr %q)", tc.args, code, tc.code, stderr.String())
		}
		if tc.wantStdout != "" && stdout.String() != tc.wantStdout {
			t.Errorf("%v: printed %q, want %q", tc.args, stdout.String(), tc.wantStdout)
		}
		for _, s := range tc.stdout {
			if !strings.Contains(stdout.String(), s) {
				t.Errorf("%v: stdout %q lacks %q", tc.args, stdout.String(), s)
			}
		}
		for _, s := range tc.stderr {
			if !strings.Contains(stderr.String(), s) {
				t.Errorf("%v: stderr %q lacks %q", tc.args, stderr.String(), s)
			}
		}
		if tc.notInHelp != "" && strings.Contains(stdout.String(), tc.notInHelp) {
			t.Errorf("%v: help shows single-dash flags:\n%s", tc.args, stdout.String())
		}
	}
}

// Every command and subcommand prints its usage on stdout for -h and --help, and exits 0.
func TestEveryCommandHasHelp(t *testing.T) {
	for _, cmd := range [][]string{
		{"serve"}, {"status"}, {"status", "members"}, {"gossip-key"}, {"gossip-key", "generate"},
		{"gossip-key", "list"}, {"gossip-key", "install"}, {"gossip-key", "use"}, {"gossip-key", "remove"},
		{"tls"}, {"tls", "ca"}, {"tls", "node"}, {"tls", "client"},
		{"chain"}, {"chain", "verify"}, {"chain", "proof"}, {"chain", "log-key"}, {"chain", "signer-key"}, {"version"},
	} {
		for _, help := range []string{"--help", "-h"} {
			args := append(append([]string(nil), cmd...), help)
			var stdout, stderr bytes.Buffer
			code := run(args, &stdout, &stderr)
			want := "Usage: shardkeeper " + cmd[0]
			if code != 0 || !strings.Contains(stdout.String(), want) {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 0 and %q on stdout", args, code, stdout.String(), stderr.String(), want)
			}
		}
	}
}

// serve warns, in the format of the node's logs, about each SHARDKEEPER_* variable that sets
// no option, naming the option it likely misspells; never a value.
func TestServeWarnsUnknownEnv(t *testing.T) {
	environ := []string{"SHARDKEEPER_DATADIR=/srv/sk", "SHARDKEEPER_TOKEN_ADMIN=hunter2-secret", "SHARDKEEPER_COLOR=blue", "HOME=/root"}
	// --partitions 0 stops the node at its configuration, after the warnings.
	var stdout, stderr bytes.Buffer
	if err := serve([]string{"--partitions", "0"}, environ, &stdout, &stderr); err == nil || !strings.Contains(err.Error(), "partitions") {
		t.Fatalf("serve --partitions 0: %v", err)
	}
	type line struct {
		Level, Msg, Variable string
		DidYouMean           string `json:"did_you_mean"`
	}
	var got []line
	for _, l := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		var v line
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("not a JSON log line: %q", l)
		}
		got = append(got, v)
	}
	want := []struct{ variable, closest string }{
		{"SHARDKEEPER_COLOR", ""}, {"SHARDKEEPER_DATADIR", "SHARDKEEPER_DATA_DIR"}, {"SHARDKEEPER_TOKEN_ADMIN", "SHARDKEEPER_ADMIN_TOKEN"},
	}
	if len(got) != len(want) {
		t.Fatalf("logged %d lines, want %d:\n%s", len(got), len(want), stderr.String())
	}
	for i, w := range want {
		if g := got[i]; g.Level != "WARN" || g.Variable != w.variable || g.DidYouMean != w.closest || !strings.Contains(g.Msg, "sets no option") {
			t.Errorf("line %d: %+v, want a warning about %s (did you mean %q)", i, g, w.variable, w.closest)
		}
	}
	if strings.Contains(stderr.String(), "hunter2") || strings.Contains(stderr.String(), "/srv/sk") {
		t.Errorf("a warning shows a variable's value:\n%s", stderr.String())
	}

	// In the format the node logs in: here text, from the environment itself.
	stderr.Reset()
	_ = serve([]string{"--partitions", "0"}, append(environ, "SHARDKEEPER_LOG_FORMAT=text"), &stdout, &stderr)
	if !strings.Contains(stderr.String(), "level=WARN") || !strings.Contains(stderr.String(), "did_you_mean=SHARDKEEPER_DATA_DIR") {
		t.Errorf("text-format warnings:\n%s", stderr.String())
	}
	// Nothing to say: nothing said.
	stderr.Reset()
	_ = serve([]string{"--partitions", "0"}, []string{"SHARDKEEPER_DATA_DIR=/srv/sk"}, &stdout, &stderr)
	if stderr.Len() != 0 {
		t.Errorf("warnings about known variables:\n%s", stderr.String())
	}
}

func checkRows(t *testing.T, out string, want [][]string) {
	t.Helper()
	got := fields(out)
	if len(got) != len(want) {
		t.Fatalf("printed %d lines, want %d:\n%s", len(got), len(want), out)
	}
	for i := range want {
		if strings.Join(got[i], " ") != strings.Join(want[i], " ") {
			t.Errorf("line %d: %q, want %q\n%s", i, strings.Join(got[i], " "), strings.Join(want[i], " "), out)
		}
	}
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
