package config

import (
	"bytes"
	"errors"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// env returns a lookup function over m.
func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// writeFile writes a YAML file into a fresh temporary directory and returns its path.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "shardkeeper.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// base is Default with a node id that is valid whatever the host name of the test machine.
func base() Config {
	c := Default()
	c.NodeID = "node-1"
	return c
}

// baseArgs pins the node id on the command line, see base.
var baseArgs = []string{"--node-id", "node-1"}

func TestDefault(t *testing.T) {
	host, _ := os.Hostname()
	want := Config{
		NodeID:               host,
		DataDir:              "./data",
		HTTPAddr:             "127.0.0.1:8080",
		GossipAddr:           "127.0.0.1:7946",
		RaftAddr:             "127.0.0.1:7000",
		RemoteAddr:           "127.0.0.1:8090",
		Join:                 nil,
		BootstrapExpect:      1,
		Partitions:           16,
		Replicas:             3,
		AdminToken:           "",
		RequestTimeout:       5 * time.Second,
		ActorIdleTimeout:     2 * time.Minute,
		ShutdownDrain:        2 * time.Second,
		DeadMemberGrace:      30 * time.Second,
		LeaveTimeout:         2 * time.Minute,
		GroupsPerNode:        1,
		MergeDelay:           10 * time.Minute,
		RaftHeartbeatTimeout: 500 * time.Millisecond,
		RaftElectionTimeout:  500 * time.Millisecond,
		RaftCommitTimeout:    500 * time.Millisecond,
		SnapshotThreshold:    8192, SnapshotInterval: 2 * time.Minute, RaftTrailingLogs: 10240,
		LogLevel:     "info",
		LogFormat:    "json",
		ConfigFile:   "",
		HTTPMaxConns: 4096, HTTPMaxInFlight: 2048, HTTPReadTimeout: 30 * time.Second, HTTPIdleTimeout: time.Minute,
		DiskMinFree: 256 << 20, DiskBallast: 64 << 20, MaxRegistries: 10000,
	}
	if got := Default(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Default() =\n%+v\nwant\n%+v", got, want)
	}
	if err := base().Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}

	// With no flags, no environment and no file, Load returns the defaults.
	if !nodeIDPattern.MatchString(host) {
		t.Skipf("host name %q is not a valid node id", host)
	}
	got, err := Load(nil, env(nil), nil)
	if err != nil {
		t.Fatalf("Load with nothing set: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Load with nothing set =\n%+v\nwant\n%+v", got, want)
	}
	if _, err := Load(nil, nil, nil); err != nil {
		t.Fatalf("Load with a nil lookupEnv: %v", err)
	}
}

// samples holds, for every option settable from all sources, a non-default value in flag syntax
// and the change it makes to the configuration.
var samples = map[string]struct {
	in   string
	want func(*Config)
}{
	"node-id":                {"node-7", func(c *Config) { c.NodeID = "node-7" }},
	"data-dir":               {"/var/lib/sk", func(c *Config) { c.DataDir = "/var/lib/sk" }},
	"http-addr":              {"127.0.0.2:9080", func(c *Config) { c.HTTPAddr = "127.0.0.2:9080" }},
	"gossip-addr":            {"10.0.0.1:7947", func(c *Config) { c.GossipAddr = "10.0.0.1:7947" }},
	"raft-addr":              {"10.0.0.2:7001", func(c *Config) { c.RaftAddr = "10.0.0.2:7001" }},
	"remote-addr":            {"localhost:8091", func(c *Config) { c.RemoteAddr = "localhost:8091" }},
	"join":                   {"a:7946,b:7946", func(c *Config) { c.Join = []string{"a:7946", "b:7946"} }},
	"bootstrap-expect":       {"3", func(c *Config) { c.BootstrapExpect = 3 }},
	"partitions":             {"64", func(c *Config) { c.Partitions = 64 }},
	"raft-groups":            {"4", func(c *Config) { c.RaftGroups = 4 }},
	"groups-per-node":        {"3", func(c *Config) { c.GroupsPerNode = 3 }},
	"merge-delay":            {"90s", func(c *Config) { c.MergeDelay = 90 * time.Second }},
	"replicas":               {"5", func(c *Config) { c.Replicas = 5 }},
	"admin-token":            {"s3cret", func(c *Config) { c.AdminToken = "s3cret" }},
	"request-timeout":        {"1500ms", func(c *Config) { c.RequestTimeout = 1500 * time.Millisecond }},
	"actor-idle-timeout":     {"30s", func(c *Config) { c.ActorIdleTimeout = 30 * time.Second }},
	"shutdown-drain":         {"5s", func(c *Config) { c.ShutdownDrain = 5 * time.Second }},
	"dead-member-grace":      {"5s", func(c *Config) { c.DeadMemberGrace = 5 * time.Second }},
	"leave-timeout":          {"0s", func(c *Config) { c.LeaveTimeout = 0 }},
	"raft-heartbeat-timeout": {"100ms", func(c *Config) { c.RaftHeartbeatTimeout = 100 * time.Millisecond }},
	"raft-election-timeout":  {"1s", func(c *Config) { c.RaftElectionTimeout = time.Second }},
	"raft-commit-timeout":    {"50ms", func(c *Config) { c.RaftCommitTimeout = 50 * time.Millisecond }},
	"snapshot-threshold":     {"1024", func(c *Config) { c.SnapshotThreshold = 1024 }},
	"snapshot-interval":      {"10s", func(c *Config) { c.SnapshotInterval = 10 * time.Second }},
	"raft-trailing-logs":     {"16", func(c *Config) { c.RaftTrailingLogs = 16 }},
	"log-level":              {"debug", func(c *Config) { c.LogLevel = "debug" }},
	"log-format":             {"text", func(c *Config) { c.LogFormat = "text" }},
	"debug-addr":             {"127.0.0.1:6060", func(c *Config) { c.DebugAddr = "127.0.0.1:6060" }},
	"admin-addr":             {"127.0.0.1:9090", func(c *Config) { c.AdminAddr = "127.0.0.1:9090" }},
	"rate-limit":             {"50", func(c *Config) { c.RateLimit = 50 }},
	"gossip-key":             {"BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=", func(c *Config) { c.GossipKey = "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=" }},
	"rate-burst":             {"200", func(c *Config) { c.RateBurst = 200 }},
	"max-registries":         {"5", func(c *Config) { c.MaxRegistries = 5 }},
	"disk-min-free":          {"1GiB", func(c *Config) { c.DiskMinFree = 1 << 30 }},
	"disk-ballast":           {"0", func(c *Config) { c.DiskBallast = 0 }},
	"tls-ca":                 {"/etc/sk/ca.pem", func(c *Config) { c.TLSCA = "/etc/sk/ca.pem" }},
	"tls-cert":               {"/etc/sk/n1.pem", func(c *Config) { c.TLSCert = "/etc/sk/n1.pem" }},
	"tls-key":                {"/etc/sk/n1-key.pem", func(c *Config) { c.TLSKey = "/etc/sk/n1-key.pem" }},
	"http-max-conns":         {"100", func(c *Config) { c.HTTPMaxConns = 100 }},
	"http-max-in-flight":     {"0", func(c *Config) { c.HTTPMaxInFlight = 0 }},
	"http-read-timeout":      {"5s", func(c *Config) { c.HTTPReadTimeout = 5 * time.Second }},
	"http-idle-timeout":      {"90s", func(c *Config) { c.HTTPIdleTimeout = 90 * time.Second }},
	"advertise-addr":         {"10.0.0.7", func(c *Config) { c.AdvertiseAddr = "10.0.0.7" }},
}

// TestEachSourceSetsEachOption sets every option, one at a time, from each source.
func TestEachSourceSetsEachOption(t *testing.T) {
	for _, o := range coreOptions(&Config{}) {
		if _, ok := samples[o.Name]; !ok && !o.NoFile {
			t.Errorf("option --%s has no sample in the test", o.Name)
		}
	}
	for name, s := range samples {
		want := base()
		s.want(&want)
		if reflect.DeepEqual(want, base()) {
			t.Errorf("sample of --%s is the default", name)
		}
		t.Run(name+"/flag", func(t *testing.T) {
			got, err := Load(append(append([]string{}, baseArgs...), "--"+name, s.in), env(nil), nil)
			check(t, got, err, want)
		})
		t.Run(name+"/flag=", func(t *testing.T) {
			got, err := Load(append(append([]string{}, baseArgs...), "-"+name+"="+s.in), env(nil), nil)
			check(t, got, err, want)
		})
		t.Run(name+"/env", func(t *testing.T) {
			e := map[string]string{envName(name): s.in}
			if name != "node-id" {
				e["SHARDKEEPER_NODE_ID"] = "node-1"
			}
			got, err := Load(nil, env(e), nil)
			check(t, got, err, want)
		})
		t.Run(name+"/yaml", func(t *testing.T) {
			content := name + ": " + s.in + "\n"
			if name != "node-id" {
				content += "node-id: node-1\n"
			}
			path := writeFile(t, content)
			want := want
			want.ConfigFile = path
			got, err := Load([]string{"--config", path}, env(nil), nil)
			check(t, got, err, want)
		})
	}
}

func check(t *testing.T, got Config, err error, want Config) {
	t.Helper()
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Load =\n%+v\nwant\n%+v", got, want)
	}
}

func TestPrecedence(t *testing.T) {
	file := writeFile(t, "partitions: 32\nreplicas: 2\nnode-id: file-node\n")
	other := writeFile(t, "partitions: 48\n")
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		partitions int
		replicas   int
		nodeID     string
		configFile string
	}{
		{"default", nil, nil, 16, 3, "node-1", ""},
		{"file", []string{"--config", file}, nil, 32, 2, "file-node", file},
		{"file named by env", nil, map[string]string{"SHARDKEEPER_CONFIG": file}, 32, 2, "file-node", file},
		{"config flag beats config env", []string{"--config", other}, map[string]string{"SHARDKEEPER_CONFIG": file}, 48, 3, "node-1", other},
		{"env beats file", []string{"--config", file}, map[string]string{"SHARDKEEPER_PARTITIONS": "8"}, 8, 2, "file-node", file},
		{"flag beats env and file", []string{"--config", file, "--partitions", "4"}, map[string]string{"SHARDKEEPER_PARTITIONS": "8"}, 4, 2, "file-node", file},
		{"flag beats env", []string{"--partitions=4"}, map[string]string{"SHARDKEEPER_PARTITIONS": "8"}, 4, 3, "node-1", ""},
		{"flag before --config beats file", []string{"--node-id", "flag-node", "--config", file}, nil, 32, 2, "flag-node", file},
		{"last flag wins", []string{"--partitions", "4", "--partitions", "2"}, nil, 2, 3, "node-1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := map[string]string{"SHARDKEEPER_NODE_ID": "node-1"}
			if tt.nodeID == "file-node" || tt.nodeID == "flag-node" {
				delete(e, "SHARDKEEPER_NODE_ID")
			}
			for k, v := range tt.env {
				e[k] = v
			}
			got, err := Load(tt.args, env(e), nil)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if got.Partitions != tt.partitions || got.Replicas != tt.replicas || got.NodeID != tt.nodeID || got.ConfigFile != tt.configFile {
				t.Fatalf("got partitions=%d replicas=%d node-id=%q config=%q, want %d %d %q %q",
					got.Partitions, got.Replicas, got.NodeID, got.ConfigFile, tt.partitions, tt.replicas, tt.nodeID, tt.configFile)
			}
		})
	}
}

// TestEmptyEnvCounts checks that a set but empty variable is a value: it replaces the file's.
func TestEmptyEnvCounts(t *testing.T) {
	file := writeFile(t, "admin-token: from-file\nnode-id: file-node\n")
	c, err := Load([]string{"--config", file}, env(map[string]string{"SHARDKEEPER_ADMIN_TOKEN": ""}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.AdminToken != "" {
		t.Fatalf("AdminToken = %q, want the empty value of SHARDKEEPER_ADMIN_TOKEN", c.AdminToken)
	}
	_, err = Load([]string{"--config", file}, env(map[string]string{"SHARDKEEPER_NODE_ID": ""}), nil)
	if err == nil || !strings.Contains(err.Error(), "--node-id") {
		t.Fatalf("Load with empty SHARDKEEPER_NODE_ID = %v, want an error naming --node-id", err)
	}
}

// TestBadValueNamesFlag checks that a value that does not parse is reported with the flag name
// and the parser's own message, from every source.
func TestBadValueNamesFlag(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		yaml    string
		exact   string   // the whole message, when set
		contain []string // substrings of the message
	}{
		{name: "flag duration", args: []string{"--request-timeout", "abc"},
			exact: `invalid value "abc" for --request-timeout: time: invalid duration "abc"`},
		{name: "flag duration single dash", args: []string{"-request-timeout=abc"},
			exact: `invalid value "abc" for --request-timeout: time: invalid duration "abc"`},
		{name: "flag duration after good flags", args: []string{"--partitions", "8", "--actor-idle-timeout", "1d"},
			contain: []string{`invalid value "1d" for --actor-idle-timeout`, `time: unknown unit "d"`}},
		{name: "env duration", env: map[string]string{"SHARDKEEPER_REQUEST_TIMEOUT": "abc"},
			contain: []string{`invalid value "abc" for --request-timeout`, "SHARDKEEPER_REQUEST_TIMEOUT", `time: invalid duration "abc"`}},
		{name: "yaml duration", yaml: "partitions: 8\nrequest-timeout: abc\n",
			contain: []string{`invalid value "abc" for --request-timeout`, "line 2", `time: invalid duration "abc"`}},
		{name: "yaml number as duration", yaml: "snapshot-interval: 300\n",
			contain: []string{`invalid value "300" for --snapshot-interval`, "missing unit"}},
		{name: "flag int", args: []string{"--partitions", "abc"},
			exact: `invalid value "abc" for --partitions: not an integer`},
		{name: "flag int out of range", args: []string{"--partitions", "99999999999999999999"},
			exact: `invalid value "99999999999999999999" for --partitions: out of range for an integer`},
		{name: "env int", env: map[string]string{"SHARDKEEPER_BOOTSTRAP_EXPECT": "1e5"},
			exact: `invalid value "1e5" for --bootstrap-expect (from SHARDKEEPER_BOOTSTRAP_EXPECT): not an integer`},
		{name: "yaml int", yaml: "replicas: three\n",
			contain: []string{`invalid value "three" for --replicas`, "line 1", ": not an integer"}},
		{name: "flag uint", args: []string{"--raft-trailing-logs", "x"},
			exact: `invalid value "x" for --raft-trailing-logs: not a non-negative integer`},
		{name: "yaml float as int", yaml: "replicas: 2.5\n",
			contain: []string{`invalid value "2.5" for --replicas`}},
		{name: "negative uint", args: []string{"--snapshot-threshold", "-1"},
			exact: `invalid value "-1" for --snapshot-threshold: not a non-negative integer`},
		{name: "yaml list for scalar", yaml: "partitions: [1, 2]\n",
			contain: []string{`"partitions"`, "not a list"}},
		{name: "yaml mapping value", yaml: "node-id: {a: b}\n",
			contain: []string{`"node-id"`, "single value"}},
		{name: "flag error wins over env error", args: []string{"--raft-addr=x", "--partitions=x"},
			env:     map[string]string{"SHARDKEEPER_ACTOR_IDLE_TIMEOUT": "x"},
			contain: []string{`--partitions`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{}, tt.args...)
			if tt.yaml != "" {
				args = append(args, "--config", writeFile(t, tt.yaml))
			}
			_, err := Load(args, env(tt.env), nil)
			if err == nil {
				t.Fatal("Load succeeded, want an error")
			}
			if tt.exact != "" && err.Error() != tt.exact {
				t.Errorf("error = %q, want %q", err, tt.exact)
			}
			if strings.Contains(err.Error(), "strconv") {
				t.Errorf("error = %q names a Go function", err)
			}
			for _, s := range tt.contain {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error = %q, want it to contain %q", err, s)
				}
			}
		})
	}
}

// TestErrorsWrap checks that parse errors keep the underlying error.
func TestErrorsWrap(t *testing.T) {
	_, err := Load([]string{"--config", filepath.Join(t.TempDir(), "missing.yaml")}, env(nil), nil)
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing config file: error %v does not wrap os.ErrNotExist", err)
	}
	if !strings.Contains(err.Error(), "--config") {
		t.Fatalf("missing config file: error %q does not name --config", err)
	}
	_, err = Load([]string{"--request-timeout", "x"}, env(nil), nil)
	var inner interface{ Unwrap() error }
	if !errors.As(err, &inner) || inner.Unwrap() == nil {
		t.Fatalf("error %v does not wrap the parse error", err)
	}
}

func TestYAMLFile(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		wantErr []string // substrings; nil for success
		check   func(t *testing.T, c Config)
	}{
		{name: "unknown key", yaml: "partitions: 8\npartitons: 9\n", wantErr: []string{`unknown key "partitons"`, "line 2"}},
		{name: "env-style key", yaml: "request_timeout: 5s\n", wantErr: []string{`unknown key "request_timeout"`}},
		{name: "config key", yaml: "config: other.yaml\n", wantErr: []string{`"config"`, "cannot be set"}},
		{name: "duplicate key", yaml: "partitions: 8\npartitions: 9\n", wantErr: []string{`duplicate key "partitions"`}},
		{name: "not a mapping", yaml: "- partitions\n", wantErr: []string{"expected a mapping"}},
		{name: "syntax error", yaml: "partitions: [8\n", wantErr: []string{"config file"}},
		{name: "two documents", yaml: "partitions: 8\n---\nreplicas: 1\n", wantErr: []string{"single YAML document"}},
		{name: "empty file", yaml: "", check: func(t *testing.T, c Config) {
			if c.Partitions != 16 {
				t.Errorf("partitions = %d, want the default", c.Partitions)
			}
		}},
		{name: "comments only", yaml: "# nothing\n", check: func(t *testing.T, c Config) {
			if c.Partitions != 16 {
				t.Errorf("partitions = %d, want the default", c.Partitions)
			}
		}},
		{name: "typed scalars", yaml: "partitions: 0x20\nreplicas: \"2\"\nsnapshot-threshold: 100\nadmin-token: 12345\ndata-dir: 1.5\n",
			check: func(t *testing.T, c Config) {
				if c.Partitions != 32 || c.Replicas != 2 || c.SnapshotThreshold != 100 || c.AdminToken != "12345" || c.DataDir != "1.5" {
					t.Errorf("got %+v", c)
				}
			}},
		{name: "null clears a string", yaml: "admin-token: ~\n", check: func(t *testing.T, c Config) {
			if c.AdminToken != "" {
				t.Errorf("admin-token = %q, want empty", c.AdminToken)
			}
		}},
		{name: "unknown anchored key", yaml: "x-timeout: &t 7s\n", wantErr: []string{`unknown key "x-timeout"`}},
		{name: "alias value", yaml: "request-timeout: &t 7s\nactor-idle-timeout: *t\n", check: func(t *testing.T, c Config) {
			if c.RequestTimeout != 7*time.Second || c.ActorIdleTimeout != 7*time.Second {
				t.Errorf("got %s %s, want 7s 7s", c.RequestTimeout, c.ActorIdleTimeout)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, tt.yaml)
			c, err := Load(append([]string{"--config", path}, baseArgs...), env(nil), nil)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				tt.check(t, c)
				return
			}
			if err == nil {
				t.Fatal("Load succeeded, want an error")
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error = %q, want it to contain %q", err, s)
				}
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error = %q, want it to name the file %s", err, path)
			}
		})
	}
}

func TestJoin(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		yaml    string
		want    []string
		wantErr string
	}{
		{name: "none", want: nil},
		{name: "one", args: []string{"--join", "10.0.0.1:7946"}, want: []string{"10.0.0.1:7946"}},
		{name: "trimmed, empty dropped", args: []string{"--join", " a:1 , ,b:2,, "}, want: []string{"a:1", "b:2"}},
		{name: "only commas", args: []string{"--join", " , ,"}, want: nil},
		{name: "repeated flag appends", args: []string{"--join", "a:1", "--join", "b:2,c:3"}, want: []string{"a:1", "b:2", "c:3"}},
		{name: "ipv6", args: []string{"--join", "[fe80::1]:7946"}, want: []string{"[fe80::1]:7946"}},
		{name: "env", env: map[string]string{"SHARDKEEPER_JOIN": "a:1,b:2"}, want: []string{"a:1", "b:2"}},
		{name: "flag replaces env", args: []string{"--join", "c:3"}, env: map[string]string{"SHARDKEEPER_JOIN": "a:1,b:2"}, want: []string{"c:3"}},
		{name: "yaml string", yaml: "join: a:1, b:2\n", want: []string{"a:1", "b:2"}},
		{name: "yaml list", yaml: "join:\n  - a:1\n  - ' b:2 '\n  - ''\n", want: []string{"a:1", "b:2"}},
		{name: "yaml flow list", yaml: "join: [\"a:1\", \"b:2\"]\n", want: []string{"a:1", "b:2"}},
		{name: "yaml empty list", yaml: "join: []\n", env: map[string]string{}, want: nil},
		{name: "env replaces yaml", yaml: "join: [a:1]\n", env: map[string]string{"SHARDKEEPER_JOIN": "b:2"}, want: []string{"b:2"}},
		{name: "yaml nested list", yaml: "join: [[a:1]]\n", wantErr: "not a single value"},
		{name: "no port", args: []string{"--join", "a:1,nohost"}, wantErr: `invalid --join: "nohost"`},
		{name: "port not numeric", args: []string{"--join", "a:http"}, wantErr: `invalid --join: "a:http"`},
		{name: "no host", args: []string{"--join", ":7946"}, wantErr: `invalid --join: ":7946" has no host`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append(append([]string{}, baseArgs...), tt.args...)
			if tt.yaml != "" {
				args = append(args, "--config", writeFile(t, tt.yaml))
			}
			c, err := Load(args, env(tt.env), nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Load error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if !reflect.DeepEqual(c.Join, tt.want) {
				t.Fatalf("Join = %q, want %q", c.Join, tt.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Config)
		flag   string // the flag the error must name; "" for valid
	}{
		{"defaults", func(c *Config) {}, ""},
		{"partitions 0", func(c *Config) { c.Partitions = 0 }, "partitions"},
		{"partitions 5000", func(c *Config) { c.Partitions = 5000 }, "partitions"},
		{"partitions 4097", func(c *Config) { c.Partitions = 4097 }, "partitions"},
		{"partitions 1", func(c *Config) { c.Partitions = 1 }, ""},
		{"partitions 4096", func(c *Config) { c.Partitions = 4096 }, ""},
		{"partitions negative", func(c *Config) { c.Partitions = -1 }, "partitions"},
		{"raft-groups 16 of 16", func(c *Config) { c.RaftGroups = 16 }, ""},
		{"raft-groups 1", func(c *Config) { c.RaftGroups = 1 }, ""},
		{"raft-groups above partitions", func(c *Config) { c.RaftGroups = 17 }, "raft-groups"},
		{"raft-groups negative", func(c *Config) { c.RaftGroups = -1 }, "raft-groups"},
		{"groups-per-node 0", func(c *Config) { c.GroupsPerNode = 0 }, ""},
		{"groups-per-node negative", func(c *Config) { c.GroupsPerNode = -1 }, "groups-per-node"},
		{"merge-delay 0", func(c *Config) { c.MergeDelay = 0 }, ""},
		{"merge-delay negative", func(c *Config) { c.MergeDelay = -time.Second }, "merge-delay"},
		{"bootstrap-expect 0", func(c *Config) { c.BootstrapExpect = 0 }, "bootstrap-expect"},
		{"replicas 0", func(c *Config) { c.Replicas = 0 }, "replicas"},
		{"snapshot-threshold 0", func(c *Config) { c.SnapshotThreshold = 0 }, "snapshot-threshold"},
		{"snapshot-interval 0", func(c *Config) { c.SnapshotInterval = 0 }, "snapshot-interval"},
		{"raft-trailing-logs 0", func(c *Config) { c.RaftTrailingLogs = 0 }, "raft-trailing-logs"},
		{"raft-trailing-logs 1", func(c *Config) { c.RaftTrailingLogs = 1 }, ""},
		{"node-id empty", func(c *Config) { c.NodeID = "" }, "node-id"},
		{"node-id space", func(c *Config) { c.NodeID = "node 1" }, "node-id"},
		{"node-id slash", func(c *Config) { c.NodeID = "a/b" }, "node-id"},
		{"node-id 64 chars", func(c *Config) { c.NodeID = strings.Repeat("a", 64) }, ""},
		{"node-id 65 chars", func(c *Config) { c.NodeID = strings.Repeat("a", 65) }, "node-id"},
		{"node-id punctuation", func(c *Config) { c.NodeID = "A.b_c-9" }, ""},
		{"data-dir empty", func(c *Config) { c.DataDir = "" }, "data-dir"},
		{"http-addr no port", func(c *Config) { c.HTTPAddr = "127.0.0.1" }, "http-addr"},
		{"gossip-addr named port", func(c *Config) { c.GossipAddr = "127.0.0.1:gossip" }, "gossip-addr"},
		{"raft-addr port too big", func(c *Config) { c.RaftAddr = "127.0.0.1:70000" }, "raft-addr"},
		{"remote-addr empty", func(c *Config) { c.RemoteAddr = "" }, "remote-addr"},
		{"all interfaces", func(c *Config) { c.HTTPAddr, c.AdvertiseAddr = ":8080", "192.0.2.1" }, ""},
		{"ipv6", func(c *Config) { c.RaftAddr = "[::1]:7001" }, ""},
		{"same address twice", func(c *Config) { c.RemoteAddr = c.RaftAddr }, "remote-addr"},
		{"port 0 twice", func(c *Config) { c.RaftAddr, c.RemoteAddr = "127.0.0.1:0", "127.0.0.1:0" }, ""},
		{"join bad", func(c *Config) { c.Join = []string{"a:1", "b"} }, "join"},
		{"all interfaces, nothing advertised", func(c *Config) { c.HTTPAddr = "0.0.0.0:8080" }, "http-addr"},
		{"no host, nothing advertised", func(c *Config) { c.GossipAddr = ":7946" }, "gossip-addr"},
		{"[::], nothing advertised", func(c *Config) { c.RaftAddr = "[::]:7000" }, "raft-addr"},
		{"all interfaces, advertised", func(c *Config) {
			c.HTTPAddr, c.GossipAddr, c.RaftAddr, c.RemoteAddr = "0.0.0.0:8080", ":7946", "[::]:7000", "0.0.0.0:8090"
			c.AdvertiseAddr = "10.1.2.3"
		}, ""},
		{"advertise a host name", func(c *Config) { c.AdvertiseAddr = "node1.example" }, "advertise-addr"},
		{"advertise host:port", func(c *Config) { c.AdvertiseAddr = "10.1.2.3:7000" }, "advertise-addr"},
		{"advertise 0.0.0.0", func(c *Config) { c.AdvertiseAddr = "0.0.0.0" }, "advertise-addr"},
		{"advertise with remote port 0", func(c *Config) { c.AdvertiseAddr, c.RemoteAddr = "10.1.2.3", "0.0.0.0:0" }, "remote-addr"},
		{"request-timeout 0", func(c *Config) { c.RequestTimeout = 0 }, "request-timeout"},
		{"actor-idle-timeout 0", func(c *Config) { c.ActorIdleTimeout = 0 }, "actor-idle-timeout"},
		{"shutdown-drain negative", func(c *Config) { c.ShutdownDrain = -time.Second }, "shutdown-drain"},
		{"dead-member-grace zero", func(c *Config) { c.DeadMemberGrace = 0 }, "dead-member-grace"},
		{"leave-timeout negative", func(c *Config) { c.LeaveTimeout = -time.Second }, "leave-timeout"},
		{"raft-heartbeat-timeout 49ms", func(c *Config) { c.RaftHeartbeatTimeout = 49 * time.Millisecond }, "raft-heartbeat-timeout"},
		{"raft-heartbeat-timeout 50ms", func(c *Config) {
			c.RaftHeartbeatTimeout, c.RaftElectionTimeout = 50*time.Millisecond, 50*time.Millisecond
		}, ""},
		{"raft-election-timeout 10ms", func(c *Config) { c.RaftElectionTimeout = 10 * time.Millisecond }, "raft-election-timeout"},
		{"election below heartbeat", func(c *Config) { c.RaftElectionTimeout = 200 * time.Millisecond }, "raft-election-timeout"},
		{"raft-commit-timeout 0", func(c *Config) { c.RaftCommitTimeout = 0 }, "raft-commit-timeout"},
		{"raft-commit-timeout 500us", func(c *Config) { c.RaftCommitTimeout = 500 * time.Microsecond }, "raft-commit-timeout"},
		{"raft-commit-timeout 1ms", func(c *Config) { c.RaftCommitTimeout = time.Millisecond }, ""},
		{"log-level verbose", func(c *Config) { c.LogLevel = "verbose" }, "log-level"},
		{"log-level upper case", func(c *Config) { c.LogLevel = "INFO" }, "log-level"},
		{"log-level warn", func(c *Config) { c.LogLevel = "warn" }, ""},
		{"log-format text", func(c *Config) { c.LogFormat = "text" }, ""},
		{"log-format xml", func(c *Config) { c.LogFormat = "xml" }, "log-format"},
		{"log-format empty", func(c *Config) { c.LogFormat = "" }, "log-format"},
		{"log-format upper case", func(c *Config) { c.LogFormat = "JSON" }, "log-format"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base()
			tt.modify(&c)
			err := c.Validate()
			if tt.flag == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate succeeded, want an error naming --%s", tt.flag)
			}
			if !strings.Contains(err.Error(), "invalid --"+tt.flag+":") {
				t.Fatalf("Validate error = %q, want it to name --%s", err, tt.flag)
			}
		})
	}

	// Every violation is reported, not only the first.
	c := base()
	c.Partitions, c.Replicas = 0, 0
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "--partitions") || !strings.Contains(err.Error(), "--replicas") {
		t.Fatalf("Validate = %v, want errors naming --partitions and --replicas", err)
	}
}

// TestLoadValidates checks that Load rejects out-of-range values from each source.
func TestLoadValidates(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		yaml string
	}{
		{name: "flag 0", args: []string{"--partitions", "0"}},
		{name: "flag 5000", args: []string{"--partitions=5000"}},
		{name: "env 0", env: map[string]string{"SHARDKEEPER_PARTITIONS": "0"}},
		{name: "yaml 5000", yaml: "partitions: 5000\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append(append([]string{}, baseArgs...), tc.args...)
			if tc.yaml != "" {
				args = append(args, "--config", writeFile(t, tc.yaml))
			}
			_, err := Load(args, env(tc.env), nil)
			if err == nil || !strings.Contains(err.Error(), "--partitions") {
				t.Fatalf("Load = %v, want an error naming --partitions", err)
			}
		})
	}
}

func TestCommandLine(t *testing.T) {
	for _, tt := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"unknown flag", []string{"--partition", "8"}, "flag provided but not defined: -partition"},
		{"missing value", []string{"--partitions"}, "flag needs an argument: -partitions"},
		{"positional argument", []string{"--partitions", "8", "extra"}, `unexpected argument "extra"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			_, err := Load(tt.args, env(nil), &out)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Load = %v, want an error containing %q", err, tt.wantErr)
			}
			if errors.Is(err, flag.ErrHelp) {
				t.Fatalf("Load = %v, must not be flag.ErrHelp", err)
			}
			if out.Len() != 0 {
				t.Fatalf("Load printed %q on an error; the caller prints errors", out.String())
			}
		})
	}
}

func TestHelp(t *testing.T) {
	for _, arg := range []string{"-h", "--help", "-help"} {
		t.Run(arg, func(t *testing.T) {
			var out bytes.Buffer
			_, err := Load([]string{"--partitions", "8", arg}, env(nil), &out)
			if !errors.Is(err, flag.ErrHelp) {
				t.Fatalf("Load(%s) = %v, want flag.ErrHelp", arg, err)
			}
			usage := out.String()
			for _, o := range coreOptions(&Config{}) {
				if !strings.Contains(usage, "--"+o.Name+" ") {
					t.Errorf("usage does not list --%s", o.Name)
				}
				if !strings.Contains(usage, envName(o.Name)) {
					t.Errorf("usage does not list %s", envName(o.Name))
				}
			}
			if !strings.Contains(usage, `(default "5s")`) {
				t.Errorf("usage does not show the default of --request-timeout:\n%s", usage)
			}
			// The node id's default is computed at start: said once, in words.
			line := usageLine(t, usage, "--node-id ")
			if n := strings.Count(line, "default"); n != 1 || !strings.Contains(line, "(default: the host name)") {
				t.Errorf("--node-id usage states its default %d times: %q", n, line)
			}
			if line := usageLine(t, usage, "--log-format "); !strings.Contains(line, `(default "json")`) {
				t.Errorf("--log-format usage: %q", line)
			}
		})
	}
	// A nil usage writer is allowed.
	if _, err := Load([]string{"-h"}, nil, nil); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("Load(-h) with nil usage = %v, want flag.ErrHelp", err)
	}
}

// usageLine is the line of usage that starts with prefix (after indentation).
func usageLine(t *testing.T, usage, prefix string) string {
	t.Helper()
	for _, l := range strings.Split(usage, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), prefix) {
			return l
		}
	}
	t.Fatalf("usage has no line for %s:\n%s", prefix, usage)
	return ""
}

func TestEnvName(t *testing.T) {
	for flagName, want := range map[string]string{
		"attest-nonce-ttl":       "SHARDKEEPER_ATTEST_NONCE_TTL",
		"max-pending-per-device": "SHARDKEEPER_MAX_PENDING_PER_DEVICE",
		"config":                 "SHARDKEEPER_CONFIG",
		"join":                   "SHARDKEEPER_JOIN",
	} {
		if got := envName(flagName); got != want {
			t.Errorf("envName(%q) = %q, want %q", flagName, got, want)
		}
	}
}

func TestSlogLevel(t *testing.T) {
	for in, want := range map[string]slog.Level{
		"debug": slog.LevelDebug,
		"info":  slog.LevelInfo,
		"warn":  slog.LevelWarn,
		"error": slog.LevelError,
		"bogus": slog.LevelInfo,
	} {
		if got := (Config{LogLevel: in}).SlogLevel(); got != want {
			t.Errorf("SlogLevel(%q) = %v, want %v", in, got, want)
		}
	}
}

// TestLoadDoesNotAlias checks that two loads do not share the Join slice or other state.
func TestLoadDoesNotAlias(t *testing.T) {
	a, err := Load([]string{"--node-id", "n", "--join", "a:1"}, env(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Load([]string{"--node-id", "n", "--join", "b:2"}, env(nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.Join, []string{"a:1"}) || !reflect.DeepEqual(b.Join, []string{"b:2"}) {
		t.Fatalf("joins %q and %q", a.Join, b.Join)
	}
	if d := Default(); d.Join != nil {
		t.Fatalf("Default().Join = %q after loads", d.Join)
	}
}

// The sample of --gossip-key-file: a key file readable by its owner only.
func init() {
	f, err := os.CreateTemp("", "shardkeeper-gossip-key-")
	if err != nil {
		panic(err)
	}
	defer f.Close()
	const key = "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc="
	f.WriteString(key + "\n")
	path := f.Name()
	samples["gossip-key-file"] = struct {
		in   string
		want func(*Config)
	}{path, func(c *Config) { c.GossipKeyFile, c.GossipKey = path, key }}
}

// The sample of --admin-token-file: a token file readable by its owner only.
func init() {
	f, err := os.CreateTemp("", "shardkeeper-admin-token-")
	if err != nil {
		panic(err)
	}
	defer f.Close()
	f.WriteString("  file-token-0123456789abcdef0123456789\n")
	path := f.Name()
	samples["admin-token-file"] = struct {
		in   string
		want func(*Config)
	}{path, func(c *Config) { c.AdminTokenFile, c.AdminToken = path, "file-token-0123456789abcdef0123456789" }}
}

// A token file is refused when other users can access it, when empty, and beside a token
// flag; errors name the file, never its content.
func TestAdminTokenFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		return p
	}
	open := write("open", "supersecret-open-token", 0o644)
	empty := write("empty", " \n", 0o600)
	good := write("good", "supersecret-good-token", 0o600)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--admin-token-file", open}, "accessible by other users"},
		{[]string{"--admin-token-file", empty}, "empty"},
		{[]string{"--admin-token-file", good, "--admin-token", "x"}, "not both"},
		{[]string{"--admin-token-file", filepath.Join(dir, "missing")}, "no such file"},
	} {
		_, err := Load(append(append([]string{}, baseArgs...), c.args...), env(nil), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "supersecret") {
			t.Errorf("%v: %v, want an error saying %q without the token", c.args, err, c.want)
		}
	}
	if !WeakToken("short") || WeakToken("") || WeakToken(strings.Repeat("x", MinTokenBytes)) {
		t.Error("WeakToken")
	}
}

// A config file that sets a secret — a token, the gossip key, a domain's option named
// *-token or marked Secret — is refused when other users can access it, with an error
// naming the file, the key and the fix, never the secret; the same file readable by its
// owner only loads. A file without secrets, or with a secret key left empty, may be shared.
func TestConfigFileWithSecret(t *testing.T) {
	type domainOpts struct{ Token, Key, Name string }
	section := NewSection("test domain", func(o *domainOpts) []Option {
		return []Option{
			String(&o.Token, "widget-token", "", "a domain's bearer token"),
			String(&o.Key, "widget-key", "", "a domain's secret key").AsSecret(),
			String(&o.Name, "widget-name", "", "not a secret"),
		}
	})
	const secret = "supersecret-value-of-the-test"
	gossip := "Z29zc2lwLWtleS1vZi10aGUtc2VjcmV0cy10ZXN0ISE="
	load := func(content string, mode os.FileMode) (Config, string, error) {
		path := writeFile(t, content)
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		c, err := Load(append([]string{"--config", path}, baseArgs...), env(nil), nil, section)
		return c, path, err
	}
	for _, c := range []struct {
		yaml, key string
		mode      os.FileMode
	}{
		{"admin-token: " + secret + "\n", "admin-token", 0o644},
		{"partitions: 8\nadmin-token: " + secret + "\n", "admin-token", 0o640}, // group-readable
		{"admin-token: " + secret + "\n", "admin-token", 0o602},                // others may write it
		{"gossip-key: " + gossip + "\n", "gossip-key", 0o644},
		{"widget-token: " + secret + "\n", "widget-token", 0o604},
		{"widget-key: " + secret + "\n", "widget-key", 0o640},
	} {
		_, path, err := load(c.yaml, c.mode)
		if err == nil {
			t.Errorf("%q at mode %04o: loaded, want it refused", c.yaml, c.mode)
			continue
		}
		for _, want := range []string{path, `"` + c.key + `"`, "chmod 600", "other users"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q at mode %04o: %v, want it to say %q", c.yaml, c.mode, err, want)
			}
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), gossip) {
			t.Errorf("%q at mode %04o: the error shows the secret: %v", c.yaml, c.mode, err)
		}
	}

	cfg, _, err := load("admin-token: "+secret+"\ngossip-key: "+gossip+"\nwidget-token: "+secret+"\n", 0o600)
	if err != nil || cfg.AdminToken != secret || cfg.GossipKey != gossip || section.Get(cfg).Token != secret {
		t.Errorf("secrets in a file of its owner only: %v", err)
	}
	tokenFile := filepath.Join(t.TempDir(), "admin-token")
	if err := os.WriteFile(tokenFile, []byte(secret), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, shared := range []string{
		"partitions: 8\nadmin-token-file: " + tokenFile + "\nwidget-name: w\n",
		"admin-token: ~\nwidget-token: \"\"\n",
	} {
		if _, _, err := load(shared, 0o644); err != nil {
			t.Errorf("%q at mode 0644: %v, want it loaded", shared, err)
		}
	}
}
