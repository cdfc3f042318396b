// Package config holds the typed configuration of `shardkeeper serve`.
//
// Every setting is a command-line flag (`--partitions 32` or `-partitions=32`), an environment
// variable (SHARDKEEPER_ followed by the flag name in upper case with '-' replaced by '_', e.g.
// SHARDKEEPER_ATTEST_NONCE_TTL) and a key of the YAML file named by --config (the flag name
// exactly, e.g. `attest-nonce-ttl: 5m`). When a setting comes from several sources the flag wins
// over the environment, the environment over the file, and the file over the default.
//
// All three sources are parsed by the same code, one table of options, so a value means the same
// thing wherever it is written: durations use Go syntax (`1500ms`, `5m`, `2160h`), integers are
// decimal (or 0x… hexadecimal), and lists are comma-separated. Any invalid value — one that does
// not parse or one that Validate rejects — is an error naming the flag; the caller prints it and
// exits with status 2.
package config

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"go.yaml.in/yaml/v3"
)

// envPrefix is the prefix of every environment variable read by Load.
const envPrefix = "SHARDKEEPER_"

// Config is the configuration of one `shardkeeper serve` process. The comment of each field
// names its flag and default.
type Config struct {
	NodeID              string        // --node-id, default the host name: stable node identity
	DataDir             string        // --data-dir ./data: Pebble and Raft data
	HTTPAddr            string        // --http-addr 127.0.0.1:8080: public HTTP API
	GossipAddr          string        // --gossip-addr 127.0.0.1:7946: memberlist (UDP+TCP)
	RaftAddr            string        // --raft-addr 127.0.0.1:7000: Raft transport
	RemoteAddr          string        // --remote-addr 127.0.0.1:8090: actor remoting
	AdvertiseAddr       string        // --advertise-addr, default "": IP other nodes and clients reach this node at
	Join                []string      // --join, comma-separated gossip addresses of existing members, default none
	BootstrapExpect     int           // --bootstrap-expect 1: members to wait for before the first bootstrap, >= 1
	Partitions          int           // --partitions 16: P, fixed at bootstrap, 1..4096
	Replicas            int           // --replicas 3: R (capped by cluster size), >= 1
	AdminToken          string        // --admin-token, default "" (admin endpoints disabled)
	AttestNonceTTL      time.Duration // --attest-nonce-ttl 5m: device challenge lifetime
	MaxPendingPerDevice int           // --max-pending-per-device 5: unexpired challenges per device, >= 1
	MaxDevices          int           // --max-devices 100000: devices per registry, >= 1
	DeviceTTL           time.Duration // --device-ttl 2160h: devices not seen for this long are removed
	ServerTTL           time.Duration // --server-ttl 5m: servers not seen for this long are not listed
	MaxServers          int           // --max-servers 1000: live servers per registry, >= 1
	OracleNonceTTL      time.Duration // --oracle-nonce-ttl 1h: lifetime of an oracle nonce

	// Runtime tuning (our extensions of the contract):

	RequestTimeout       time.Duration // --request-timeout 5s: deadline of one request incl. commit
	ActorIdleTimeout     time.Duration // --actor-idle-timeout 2m: idle activations passivate after this
	ShutdownDrain        time.Duration // --shutdown-drain 2s: on SIGTERM, serve with Connection: close and fail /readyz this long first
	RaftHeartbeatTimeout time.Duration // --raft-heartbeat-timeout 500ms, >= 50ms
	RaftElectionTimeout  time.Duration // --raft-election-timeout 500ms, >= 50ms and >= the heartbeat timeout
	RaftCommitTimeout    time.Duration // --raft-commit-timeout 500ms, >= 1ms: idle time before a leader tells followers its commit index
	SnapshotThreshold    uint64        // --snapshot-threshold 8192: raft log entries between snapshots, >= 1
	SnapshotInterval     time.Duration // --snapshot-interval 2m: how often the threshold is checked, > 0
	RaftTrailingLogs     uint64        // --raft-trailing-logs 10240: log entries kept after a snapshot, >= 1
	LogLevel             string        // --log-level info: debug|info|warn|error
	DebugAddr            string        // --debug-addr, default "" (off): host:port serving /debug/pprof/
	ConfigFile           string        // --config, path of the YAML file (not itself settable from YAML)
}

// value is a flag.Value bound to one field of a Config. typ names the syntax in the usage text.
type value interface {
	flag.Value
	typ() string
}

// option is one row of the option table: the flag name, its default (in the syntax of the flag),
// its usage text, and how to bind it to a field of a Config. Flags, environment variables and
// YAML keys are all derived from this table.
type option struct {
	name   string
	def    string
	usage  string
	bind   func(c *Config) value
	noFile bool // not settable from the YAML file
}

// options is the table of every setting, in the order shown by --help.
var options = []option{
	strOpt("node-id", hostname(), "stable node identity: 1 to 64 of A-Z a-z 0-9 _ . - (default: the host name)", func(c *Config) *string { return &c.NodeID }),
	strOpt("data-dir", "./data", "directory of the Pebble and Raft data", func(c *Config) *string { return &c.DataDir }),
	strOpt("http-addr", "127.0.0.1:8080", "host:port of the public HTTP API", func(c *Config) *string { return &c.HTTPAddr }),
	strOpt("gossip-addr", "127.0.0.1:7946", "host:port of memberlist gossip (UDP+TCP)", func(c *Config) *string { return &c.GossipAddr }),
	strOpt("raft-addr", "127.0.0.1:7000", "host:port of the Raft transport", func(c *Config) *string { return &c.RaftAddr }),
	strOpt("remote-addr", "127.0.0.1:8090", "host:port of actor remoting", func(c *Config) *string { return &c.RemoteAddr }),
	strOpt("advertise-addr", "", "IP address other nodes (and /v1/cluster readers) reach this node at, with each listener's port; required when a listen address binds every interface (0.0.0.0, [::] or no host); default: each listen address's own host", func(c *Config) *string { return &c.AdvertiseAddr }),
	{name: "join", usage: "comma-separated gossip host:port addresses of existing members (repeatable)",
		bind: func(c *Config) value { return &listValue{p: &c.Join} }},
	intOpt("bootstrap-expect", "1", "members to wait for before the first cluster bootstraps (>= 1)", func(c *Config) *int { return &c.BootstrapExpect }),
	intOpt("partitions", "16", "number of partitions P, fixed at bootstrap (1..4096)", func(c *Config) *int { return &c.Partitions }),
	intOpt("replicas", "3", "replication factor R, capped by the cluster size (>= 1)", func(c *Config) *int { return &c.Replicas }),
	strOpt("admin-token", "", "bearer token of the admin endpoints; empty disables them", func(c *Config) *string { return &c.AdminToken }),
	durOpt("attest-nonce-ttl", "5m", "lifetime of a device challenge nonce", func(c *Config) *time.Duration { return &c.AttestNonceTTL }),
	intOpt("max-pending-per-device", "5", "unexpired challenges one device may hold (>= 1)", func(c *Config) *int { return &c.MaxPendingPerDevice }),
	intOpt("max-devices", "100000", "devices per attestation registry (>= 1)", func(c *Config) *int { return &c.MaxDevices }),
	durOpt("device-ttl", "2160h", "devices not seen for this long are removed", func(c *Config) *time.Duration { return &c.DeviceTTL }),
	durOpt("server-ttl", "5m", "servers not seen for this long are no longer listed", func(c *Config) *time.Duration { return &c.ServerTTL }),
	intOpt("max-servers", "1000", "live servers per server registry (>= 1)", func(c *Config) *int { return &c.MaxServers }),
	durOpt("oracle-nonce-ttl", "1h", "lifetime of an oracle nonce", func(c *Config) *time.Duration { return &c.OracleNonceTTL }),
	durOpt("request-timeout", "5s", "deadline of one request, commit included", func(c *Config) *time.Duration { return &c.RequestTimeout }),
	durOpt("actor-idle-timeout", "2m", "idle actor activations are passivated after this", func(c *Config) *time.Duration { return &c.ActorIdleTimeout }),
	durOpt("shutdown-drain", "2s", "on SIGTERM, keep serving this long with /readyz failing and connections closed after each response, so that clients and load balancers move away before the listener closes (0 disables)", func(c *Config) *time.Duration { return &c.ShutdownDrain }),
	durOpt("raft-heartbeat-timeout", "500ms", "Raft heartbeat timeout (>= 50ms)", func(c *Config) *time.Duration { return &c.RaftHeartbeatTimeout }),
	durOpt("raft-election-timeout", "500ms", "Raft election timeout (>= 50ms, >= --raft-heartbeat-timeout)", func(c *Config) *time.Duration { return &c.RaftElectionTimeout }),
	durOpt("raft-commit-timeout", "500ms", "how long a partition's leader lets replication to a follower idle before it sends the follower its commit index anyway (>= 1ms); each partition does this for each follower, so shorter costs CPU on an idle cluster", func(c *Config) *time.Duration { return &c.RaftCommitTimeout }),
	{name: "snapshot-threshold", def: "8192", usage: "Raft log entries between snapshots (>= 1)",
		bind: func(c *Config) value { return uint64Value{&c.SnapshotThreshold} }},
	durOpt("snapshot-interval", "2m", "how often each partition checks --snapshot-threshold (randomized up to twice this)", func(c *Config) *time.Duration { return &c.SnapshotInterval }),
	{name: "raft-trailing-logs", def: "10240", usage: "Raft log entries kept after a snapshot, so that a follower that fell behind by fewer catches up from the log instead of a snapshot",
		bind: func(c *Config) value { return uint64Value{&c.RaftTrailingLogs} }},
	strOpt("log-level", "info", "log level: debug, info, warn or error", func(c *Config) *string { return &c.LogLevel }),
	strOpt("debug-addr", "", "host:port serving Go profiles at /debug/pprof/ on a listener of its own; empty disables it (keep it off public interfaces)", func(c *Config) *string { return &c.DebugAddr }),
	{name: "config", usage: "path of a YAML file of settings, keyed by flag name", noFile: true,
		bind: func(c *Config) value { return stringValue{&c.ConfigFile} }},
}

func strOpt(name, def, usage string, field func(*Config) *string) option {
	return option{name: name, def: def, usage: usage, bind: func(c *Config) value { return stringValue{field(c)} }}
}

func intOpt(name, def, usage string, field func(*Config) *int) option {
	return option{name: name, def: def, usage: usage, bind: func(c *Config) value { return intValue{field(c)} }}
}

func durOpt(name, def, usage string, field func(*Config) *time.Duration) option {
	return option{name: name, def: def, usage: usage, bind: func(c *Config) value { return durationValue{field(c)} }}
}

// hostname is the default node id: the host name, or "" (rejected by Validate) when unknown.
func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	return h
}

// lookupOption returns the option named name.
func lookupOption(name string) (option, bool) {
	for _, o := range options {
		if o.name == name {
			return o, true
		}
	}
	return option{}, false
}

// envName is the environment variable of the flag name: SHARDKEEPER_ATTEST_NONCE_TTL for
// attest-nonce-ttl.
func envName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Default returns the configuration with every default filled in. NodeID defaults to the host
// name; Join and AdminToken default to empty.
func Default() Config {
	var c Config
	for _, o := range options {
		if err := o.bind(&c).Set(o.def); err != nil {
			panic(fmt.Sprintf("config: bad default %q for --%s: %v", o.def, o.name, err))
		}
	}
	return c
}

// Load builds the configuration from args (without the program/subcommand name, e.g.
// os.Args[2:]), the environment given as a lookup function (os.LookupEnv in production, a map
// in tests; nil means an empty environment), and the YAML file named by --config or
// SHARDKEEPER_CONFIG if any. Precedence is flag > environment > file > default. The result is
// validated with Validate.
//
// An environment variable that is set counts even when empty. A repeated --join adds to the
// list; otherwise a later occurrence of a flag replaces an earlier one.
//
// Errors name the flag, e.g. `invalid value "abc" for --attest-nonce-ttl: time: invalid
// duration "abc"`, plus the environment variable or file position when the value came from
// there. `-h`/`--help` prints the usage to usage and returns flag.ErrHelp; other errors print
// nothing (the caller prints the error and exits 2).
func Load(args []string, lookupEnv func(string) (string, bool), usage io.Writer) (Config, error) {
	if lookupEnv == nil {
		lookupEnv = func(string) (string, bool) { return "", false }
	}
	if usage == nil {
		usage = io.Discard
	}

	// Parse the flags once on their own, to report their errors first and to learn --config.
	scratch := Default()
	fs, err := parseFlags(&scratch, args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(usage, fs)
		return Config{}, flag.ErrHelp
	}
	if err != nil {
		return Config{}, err
	}
	file := scratch.ConfigFile
	if !isSet(fs, "config") {
		file, _ = lookupEnv(envName("config"))
	}

	// Then build the result from the lowest precedence up: default, file, environment, flags.
	c := Default()
	if file != "" {
		if err := applyFile(&c, file); err != nil {
			return Config{}, err
		}
	}
	for _, o := range options {
		env := envName(o.name)
		if s, ok := lookupEnv(env); ok {
			if err := o.bind(&c).Set(s); err != nil {
				return Config{}, invalidValue(o.name, s, "from "+env, err)
			}
		}
	}
	c.ConfigFile = file
	if _, err := parseFlags(&c, args); err != nil {
		return Config{}, err // not reached: the same args parsed above
	}

	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// setError records the first failed Set of a flag, so that Load can report it in its own words
// rather than the flag package's.
type setError struct{ err error }

// trackedValue wraps a value to record a failed Set into errp.
type trackedValue struct {
	value
	name string
	errp *setError
}

func (v trackedValue) Set(s string) error {
	err := v.value.Set(s)
	if err != nil && v.errp.err == nil {
		v.errp.err = invalidValue(v.name, s, "", err)
	}
	return err
}

// parseFlags parses args into c. It returns the FlagSet (for usage and Visit) and an error
// naming the flag. It prints nothing.
func parseFlags(c *Config, args []string) (*flag.FlagSet, error) {
	fs := flag.NewFlagSet("shardkeeper serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var setErr setError
	for _, o := range options {
		fs.Var(trackedValue{value: o.bind(c), name: o.name, errp: &setErr}, o.name, o.usage)
	}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return fs, err
	case setErr.err != nil:
		return fs, setErr.err
	case err != nil:
		return fs, fmt.Errorf("%w (see --help)", err)
	case fs.NArg() > 0:
		return fs, fmt.Errorf("unexpected argument %q (see --help)", fs.Arg(0))
	}
	return fs, nil
}

// isSet reports whether the flag name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

// invalidValue is the error for a value that does not parse: it names the flag and, in from,
// where the value came from when it was not the command line.
func invalidValue(name, s, from string, err error) error {
	if from != "" {
		return fmt.Errorf("invalid value %q for --%s (%s): %w", s, name, from, err)
	}
	return fmt.Errorf("invalid value %q for --%s: %w", s, name, err)
}

// printUsage writes the help text of `shardkeeper serve` to w.
func printUsage(w io.Writer, fs *flag.FlagSet) {
	var b bytes.Buffer
	b.WriteString("Usage: shardkeeper serve [flags]\n\n")
	b.WriteString("Each flag can also be set by the environment variable " + envPrefix + "<FLAG> (upper case,\n")
	b.WriteString("'-' replaced by '_') or by a key of the same name in the YAML file given by --config.\n")
	b.WriteString("Precedence: flag > environment > file > default. Durations use Go syntax (1500ms, 5m).\n\n")
	b.WriteString("Flags:\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, o := range options {
		f := fs.Lookup(o.name)
		typ := ""
		if v, ok := f.Value.(value); ok {
			typ = v.typ()
		}
		def := ""
		if o.def != "" {
			def = fmt.Sprintf(" (default %q)", o.def)
		}
		fmt.Fprintf(tw, "  --%s %s\t%s\t%s%s\n", o.name, typ, envName(o.name), o.usage, def)
	}
	_ = tw.Flush()
	_, _ = w.Write(b.Bytes())
}

// applyFile sets the keys of the YAML file path into c. The file holds one mapping whose keys
// are flag names; values are scalars in the syntax of the flag (YAML numbers are taken in their
// written form), or for --join also a list. An empty file sets nothing.
func applyFile(c *Config, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading --config file: %w", err)
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil
	} else if err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return fmt.Errorf("config file %s: expected a single YAML document", path)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil
		}
		root = root.Content[0]
	}
	root = resolveAlias(root)
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		return nil // a file of comments only
	}
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("config file %s: line %d: expected a mapping of flag names to values", path, root.Line)
	}
	seen := make(map[string]bool)
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := resolveAlias(root.Content[i]), resolveAlias(root.Content[i+1])
		at := fmt.Sprintf("config file %s: line %d", path, k.Line)
		if k.Kind != yaml.ScalarNode {
			return fmt.Errorf("%s: key is not a string", at)
		}
		o, ok := lookupOption(k.Value)
		if !ok {
			return fmt.Errorf("%s: unknown key %q", at, k.Value)
		}
		if o.noFile {
			return fmt.Errorf("%s: key %q cannot be set in the config file", at, k.Value)
		}
		if seen[k.Value] {
			return fmt.Errorf("%s: duplicate key %q", at, k.Value)
		}
		seen[k.Value] = true
		s, err := nodeString(o, v)
		if err != nil {
			return fmt.Errorf("%s: key %q: %w", at, k.Value, err)
		}
		if err := o.bind(c).Set(s); err != nil {
			return invalidValue(o.name, s, fmt.Sprintf("from config file %s line %d", path, v.Line), err)
		}
	}
	return nil
}

// nodeString is the flag syntax of a YAML value: a scalar's text (null is empty), or for a list
// option its elements joined by commas.
func nodeString(o option, n *yaml.Node) (string, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return "", nil
		}
		return n.Value, nil
	case yaml.SequenceNode:
		if _, ok := o.bind(&Config{}).(*listValue); !ok {
			return "", fmt.Errorf("expected a single value, not a list")
		}
		elems := make([]string, 0, len(n.Content))
		for _, e := range n.Content {
			e = resolveAlias(e)
			if e.Kind != yaml.ScalarNode {
				return "", fmt.Errorf("line %d: list element is not a single value", e.Line)
			}
			elems = append(elems, e.Value)
		}
		return strings.Join(elems, ","), nil
	default:
		return "", fmt.Errorf("expected a single value")
	}
}

func resolveAlias(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

var nodeIDPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// minRaftTimeout is the smallest Raft heartbeat and election timeout accepted.
const minRaftTimeout = 50 * time.Millisecond

// maxPartitions is the largest number of partitions accepted.
const maxPartitions = 4096

// Validate checks ranges and cross-field rules: every duration > 0; Partitions in 1..4096;
// BootstrapExpect, Replicas, MaxPendingPerDevice, MaxDevices, MaxServers and SnapshotThreshold
// >= 1; NodeID matching `^[A-Za-z0-9_.-]{1,64}$`; DataDir non-empty; the four addresses
// host:port with a numeric port, and pairwise different; every Join entry host:port with a
// non-empty host and a numeric port; both Raft timeouts >= 50ms and the election timeout >= the
// heartbeat timeout (hashicorp/raft requires it); LogLevel one of debug, info, warn, error.
// It reports every violation (joined with errors.Join), each naming its flag.
func (c Config) Validate() error {
	var errs []error
	bad := func(name, format string, args ...any) {
		errs = append(errs, fmt.Errorf("invalid --%s: %s", name, fmt.Sprintf(format, args...)))
	}

	if !nodeIDPattern.MatchString(c.NodeID) {
		bad("node-id", "%q does not match %s", c.NodeID, nodeIDPattern)
	}
	if c.DataDir == "" {
		bad("data-dir", "must not be empty")
	}

	addrs := []struct {
		name, addr string
	}{
		{"http-addr", c.HTTPAddr},
		{"gossip-addr", c.GossipAddr},
		{"raft-addr", c.RaftAddr},
		{"remote-addr", c.RemoteAddr},
	}
	if c.AdvertiseAddr != "" {
		if ip := net.ParseIP(c.AdvertiseAddr); ip == nil || ip.IsUnspecified() {
			bad("advertise-addr", "%q is not an IP address other nodes can dial", c.AdvertiseAddr)
		}
	}
	for i, a := range addrs {
		port, err := checkAddr(a.addr)
		if err != nil {
			bad(a.name, "%v", err)
			continue
		}
		if host, _, _ := net.SplitHostPort(a.addr); c.AdvertiseAddr == "" && unspecifiedHost(host) {
			bad(a.name, "%q listens on every interface, which other nodes cannot dial: set --advertise-addr", a.addr)
		}
		if a.name == "remote-addr" && c.AdvertiseAddr != "" && port == 0 {
			bad(a.name, "port 0 cannot be advertised: give a fixed port with --advertise-addr")
		}
		for _, b := range addrs[:i] {
			if port != 0 && a.addr == b.addr {
				bad(a.name, "%q is also --%s", a.addr, b.name)
			}
		}
	}
	for _, j := range c.Join {
		if _, err := checkAddr(j); err != nil {
			bad("join", "%v", err)
		} else if host, _, _ := net.SplitHostPort(j); host == "" {
			bad("join", "%q has no host", j)
		}
	}

	ints := []struct {
		name string
		v    int
	}{
		{"bootstrap-expect", c.BootstrapExpect},
		{"replicas", c.Replicas},
		{"max-pending-per-device", c.MaxPendingPerDevice},
		{"max-devices", c.MaxDevices},
		{"max-servers", c.MaxServers},
	}
	for _, n := range ints {
		if n.v < 1 {
			bad(n.name, "must be at least 1, got %d", n.v)
		}
	}
	if c.Partitions < 1 || c.Partitions > maxPartitions {
		bad("partitions", "must be between 1 and %d, got %d", maxPartitions, c.Partitions)
	}
	if c.SnapshotThreshold < 1 {
		bad("snapshot-threshold", "must be at least 1, got %d", c.SnapshotThreshold)
	}
	if c.RaftTrailingLogs < 1 {
		bad("raft-trailing-logs", "must be at least 1, got %d", c.RaftTrailingLogs)
	}

	durs := []struct {
		name string
		v    time.Duration
	}{
		{"attest-nonce-ttl", c.AttestNonceTTL},
		{"device-ttl", c.DeviceTTL},
		{"server-ttl", c.ServerTTL},
		{"oracle-nonce-ttl", c.OracleNonceTTL},
		{"request-timeout", c.RequestTimeout},
		{"actor-idle-timeout", c.ActorIdleTimeout},
		{"raft-heartbeat-timeout", c.RaftHeartbeatTimeout},
		{"raft-election-timeout", c.RaftElectionTimeout},
		{"raft-commit-timeout", c.RaftCommitTimeout},
		{"snapshot-interval", c.SnapshotInterval},
	}
	if c.ShutdownDrain < 0 {
		bad("shutdown-drain", "must not be negative, got %s", c.ShutdownDrain)
	}
	for _, d := range durs {
		if d.v <= 0 {
			bad(d.name, "must be positive, got %s", d.v)
		}
	}
	if c.RaftHeartbeatTimeout > 0 && c.RaftHeartbeatTimeout < minRaftTimeout {
		bad("raft-heartbeat-timeout", "must be at least %s, got %s", minRaftTimeout, c.RaftHeartbeatTimeout)
	}
	if c.RaftElectionTimeout > 0 && c.RaftElectionTimeout < minRaftTimeout {
		bad("raft-election-timeout", "must be at least %s, got %s", minRaftTimeout, c.RaftElectionTimeout)
	}
	if c.RaftCommitTimeout > 0 && c.RaftCommitTimeout < time.Millisecond {
		bad("raft-commit-timeout", "must be at least 1ms, got %s", c.RaftCommitTimeout)
	}
	if c.RaftElectionTimeout >= minRaftTimeout && c.RaftElectionTimeout < c.RaftHeartbeatTimeout {
		bad("raft-election-timeout", "%s is less than --raft-heartbeat-timeout %s", c.RaftElectionTimeout, c.RaftHeartbeatTimeout)
	}

	if _, ok := logLevels[c.LogLevel]; !ok {
		bad("log-level", "%q is not one of debug, info, warn, error", c.LogLevel)
	}
	return errors.Join(errs...)
}

// checkAddr checks that addr is host:port with a numeric port (0..65535) and returns the port.
func checkAddr(addr string) (uint64, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, fmt.Errorf("%q is not host:port: %w", addr, err)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("%q: port %q is not a number in 0..65535", addr, port)
	}
	return p, nil
}

var logLevels = map[string]slog.Level{
	"debug": slog.LevelDebug,
	"info":  slog.LevelInfo,
	"warn":  slog.LevelWarn,
	"error": slog.LevelError,
}

// SlogLevel returns LogLevel as a slog.Level; an unknown level (rejected by Validate) is
// slog.LevelInfo.
func (c Config) SlogLevel() slog.Level {
	if l, ok := logLevels[c.LogLevel]; ok {
		return l
	}
	return slog.LevelInfo
}

// The flag.Value implementations. Set parses one value in flag syntax into the field; String
// formats the field back in the same syntax (and tolerates a zero value, as flag requires).

type stringValue struct{ p *string }

func (v stringValue) Set(s string) error { *v.p = s; return nil }
func (stringValue) typ() string          { return "string" }
func (v stringValue) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

type intValue struct{ p *int }

func (v intValue) Set(s string) error {
	n, err := strconv.ParseInt(s, 0, strconv.IntSize)
	if err != nil {
		return err
	}
	*v.p = int(n)
	return nil
}
func (intValue) typ() string { return "int" }
func (v intValue) String() string {
	if v.p == nil {
		return "0"
	}
	return strconv.Itoa(*v.p)
}

type uint64Value struct{ p *uint64 }

func (v uint64Value) Set(s string) error {
	n, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return err
	}
	*v.p = n
	return nil
}
func (uint64Value) typ() string { return "uint" }
func (v uint64Value) String() string {
	if v.p == nil {
		return "0"
	}
	return strconv.FormatUint(*v.p, 10)
}

type durationValue struct{ p *time.Duration }

func (v durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*v.p = d
	return nil
}
func (durationValue) typ() string { return "duration" }
func (v durationValue) String() string {
	if v.p == nil {
		return "0s"
	}
	return v.p.String()
}

// listValue is a comma-separated list: entries are trimmed and empty ones dropped. The first Set
// through one listValue replaces the list, later ones append, so a repeated flag accumulates
// while a flag still replaces a list that came from the environment or the file.
type listValue struct {
	p   *[]string
	set bool
}

func (v *listValue) Set(s string) error {
	var list []string
	if v.set {
		list = *v.p
	}
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			list = append(list, e)
		}
	}
	*v.p = list
	v.set = true
	return nil
}
func (*listValue) typ() string { return "host:port,..." }
func (v *listValue) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return strings.Join(*v.p, ",")
}

// unspecifiedHost reports whether a listen host binds every interface.
func unspecifiedHost(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// Advertised returns a bound address (host:port) as other nodes should dial it: with the host
// replaced by AdvertiseAddr when that is set.
func (c Config) Advertised(bound string) string {
	if c.AdvertiseAddr == "" {
		return bound
	}
	_, port, err := net.SplitHostPort(bound)
	if err != nil {
		return bound
	}
	return net.JoinHostPort(c.AdvertiseAddr, port)
}
