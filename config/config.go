// Package config holds the typed configuration of `shardkeeper serve`.
//
// Every setting is a command-line flag (`--partitions 32` or `-partitions=32`), an environment
// variable (SHARDKEEPER_ followed by the flag name in upper case with '-' replaced by '_', e.g.
// SHARDKEEPER_ATTEST_NONCE_TTL) and a key of the YAML file named by --config (the flag name
// exactly, e.g. `attest-nonce-ttl: 5m`). When a setting comes from several sources the flag wins
// over the environment, the environment over the file, and the file over the default.
//
// The core settings are the fields of Config. A service declares its own settings as a Section
// of a typed struct of its own; Load parses them exactly like the core ones and keeps them in
// the Config it returns.
//
// All three sources are parsed by the same code, one table of options, so a value means the same
// thing wherever it is written: durations use Go syntax (`1500ms`, `5m`, `2160h`), integers are
// decimal (or 0x… hexadecimal), and lists are comma-separated. Any invalid value — one that does
// not parse or one that Validate rejects — is an error naming the flag; the caller prints it and
// exits with status 2.
package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Config is the configuration of one `shardkeeper serve` process. The comment of each field
// names its flag and default.
type Config struct {
	NodeID          string        // --node-id, default the host name: stable node identity
	DataDir         string        // --data-dir ./data: Pebble and Raft data
	HTTPAddr        string        // --http-addr 127.0.0.1:8080: public HTTP API
	GossipAddr      string        // --gossip-addr 127.0.0.1:7946: memberlist (UDP+TCP)
	RaftAddr        string        // --raft-addr 127.0.0.1:7000: Raft transport
	RemoteAddr      string        // --remote-addr 127.0.0.1:8090: actor remoting
	AdvertiseAddr   string        // --advertise-addr, default "": IP other nodes and clients reach this node at
	Join            []string      // --join, comma-separated gossip addresses of existing members, default none
	BootstrapExpect int           // --bootstrap-expect 1: members to wait for before the first bootstrap, >= 1
	Partitions      int           // --partitions 16: P, fixed at bootstrap, 1..4096
	RaftGroups      int           // --raft-groups 0: G, the Raft groups the partitions share, fixed at bootstrap; 0: the data directory's, or 3 (at most P) in a new one
	GroupsPerNode   int           // --groups-per-node 1: Raft groups split online until there are this many per live node (at most P); 0: never split
	MergeDelay      time.Duration // --merge-delay 10m: groups merge back to --groups-per-node per live node once the cluster has been that small this long; 0: never merge
	Replicas        int           // --replicas 3: R (capped by cluster size), >= 1
	AdminToken      string        // --admin-token, default "" (admin endpoints disabled)
	AdminTokenFile  string        // --admin-token-file: AdminToken read from this file

	// Runtime tuning (our extensions of the contract):

	RequestTimeout       time.Duration // --request-timeout 5s: deadline of one request incl. commit
	ActorIdleTimeout     time.Duration // --actor-idle-timeout 2m: idle activations passivate after this
	ShutdownDrain        time.Duration // --shutdown-drain 2s: on SIGTERM, serve with Connection: close and fail /readyz this long first
	DeadMemberGrace      time.Duration // --dead-member-grace 30s: how long a failed or departed member keeps its replicas, > 0
	LeaveTimeout         time.Duration // --leave-timeout 2m: on SIGTERM, wait at most this long for the node's replicas to move to others (0: stop without retiring)
	RaftHeartbeatTimeout time.Duration // --raft-heartbeat-timeout 500ms, >= 50ms
	RaftElectionTimeout  time.Duration // --raft-election-timeout 500ms, >= 50ms and >= the heartbeat timeout
	RaftCommitTimeout    time.Duration // --raft-commit-timeout 500ms, >= 1ms: idle time before a leader tells followers its commit index
	SnapshotThreshold    uint64        // --snapshot-threshold 8192: raft log entries between snapshots, >= 1
	SnapshotInterval     time.Duration // --snapshot-interval 2m: how often the threshold is checked, > 0
	RaftTrailingLogs     uint64        // --raft-trailing-logs 10240: log entries kept after a snapshot, >= 1
	LogLevel             string        // --log-level info: debug|info|warn|error
	LogFormat            string        // --log-format json: json|text, the format of the logs on stderr
	DebugAddr            string        // --debug-addr, default "" (off): host:port serving /debug/pprof/
	AdminAddr            string        // --admin-addr, default "" (off): host:port of the operator's listener
	GossipKey            string        // --gossip-key: base64 of the 32-byte gossip encryption key
	GossipKeyFile        string        // --gossip-key-file: GossipKey read from this file
	HTTPMaxConns         int           // --http-max-conns 4096: open connections of the HTTP API, 0: no bound
	HTTPMaxInFlight      int           // --http-max-in-flight 2048: requests served at once, 0: no bound
	HTTPReadTimeout      time.Duration // --http-read-timeout 30s: a whole request, body included
	HTTPIdleTimeout      time.Duration // --http-idle-timeout 60s: a keep-alive connection between requests
	RateLimit            int           // --rate-limit 0 (off): requests per second per client (token or IP)
	RateBurst            int           // --rate-burst 0 (= --rate-limit): requests a client may send at once
	MaxRegistries        int           // --max-registries 10000: registry names of each kind in the cluster
	DiskMinFree          uint64        // --disk-min-free 256MiB: below it, writes are refused
	DiskBallast          uint64        // --disk-ballast 64MiB: space reserved for a full disk's recovery
	TLSCA                string        // --tls-ca: PEM file of the cluster CA
	TLSCert              string        // --tls-cert: PEM file of this node's certificate
	TLSKey               string        // --tls-key: PEM file of its key, readable by its owner only
	ConfigFile           string        // --config, path of the YAML file (not itself settable from YAML)

	// sections holds the loaded value (*T) of each Section, read with Section.Get.
	sections map[Group]any
}

// coreOptions is the table of the core settings bound to the fields of c, in the order --help
// shows them.
func coreOptions(c *Config) []Option {
	nodeID := String(&c.NodeID, "node-id", hostname(), "stable node identity: 1 to 64 of A-Z a-z 0-9 _ . -")
	nodeID.DefaultText = "the host name"
	return []Option{
		nodeID,
		String(&c.DataDir, "data-dir", "./data", "directory of the Pebble and Raft data"),
		String(&c.HTTPAddr, "http-addr", "127.0.0.1:8080", "host:port of the public HTTP API"),
		String(&c.GossipAddr, "gossip-addr", "127.0.0.1:7946", "host:port of memberlist gossip (UDP+TCP)"),
		String(&c.RaftAddr, "raft-addr", "127.0.0.1:7000", "host:port of the Raft transport"),
		String(&c.RemoteAddr, "remote-addr", "127.0.0.1:8090", "host:port of actor remoting"),
		String(&c.AdvertiseAddr, "advertise-addr", "", "IP address other nodes (and /v1/cluster readers) reach this node at, with each listener's port; required when a listen address binds every interface (0.0.0.0, [::] or no host); default: each listen address's own host"),
		{Name: "join", Usage: "comma-separated gossip host:port addresses of existing members (repeatable)", Value: &listValue{p: &c.Join}},
		Int(&c.BootstrapExpect, "bootstrap-expect", "1", "members to wait for before the first cluster bootstraps (>= 1)"),
		Int(&c.Partitions, "partitions", "16", "number of partitions P, fixed at bootstrap (1..4096)"),
		Int(&c.RaftGroups, "raft-groups", "0", "number of Raft groups G the partitions are spread over: each is one Raft log, leader and round for all of its partitions; fixed at bootstrap (1..partitions; 0: the data directory's, or min(3, partitions) in a new one)"),
		Int(&c.GroupsPerNode, "groups-per-node", "1", "Raft groups split online, one at a time, until the cluster has this many per live node (at most --partitions), so that every node leads its share as the cluster grows; 0: never split"),
		Duration(&c.MergeDelay, "merge-delay", "10m", "Raft groups merge, two at a time, back to --groups-per-node per live node once the cluster has had that few live nodes for this long (so that a restart or a shrink followed by a growth does not merge and split back); 0: never merge"),
		Int(&c.Replicas, "replicas", "3", "replication factor R, capped by the cluster size (>= 1)"),
		String(&c.AdminToken, "admin-token", "", "bearer token of the admin endpoints; empty disables them (prefer --admin-token-file: a flag shows in ps)"),
		String(&c.AdminTokenFile, "admin-token-file", "", "file holding the admin token, readable by its owner only").Checked(c.loadAdminToken),
		Duration(&c.RequestTimeout, "request-timeout", "5s", "deadline of one request, commit included"),
		Duration(&c.ActorIdleTimeout, "actor-idle-timeout", "2m", "idle actor activations are passivated after this"),
		Duration(&c.ShutdownDrain, "shutdown-drain", "2s", "on SIGTERM, keep serving this long with /readyz failing and connections closed after each response, so that clients and load balancers move away before the listener closes (0 disables)"),
		Duration(&c.LeaveTimeout, "leave-timeout", "2m", "on SIGTERM, retire: wait at most this long, before exiting, until the Raft groups this node replicates have a replica on another node in its place (when there are enough other nodes) and none would lose its quorum with it; 0: stop without retiring, keeping the replicas for when the node comes back (restarts)"),
		Duration(&c.DeadMemberGrace, "dead-member-grace", "30s", "how long a member that failed or left keeps its replicas before they are replaced on other nodes (a node restarted within it keeps them)"),
		Duration(&c.RaftHeartbeatTimeout, "raft-heartbeat-timeout", "500ms", "Raft heartbeat timeout (>= 50ms)"),
		Duration(&c.RaftElectionTimeout, "raft-election-timeout", "500ms", "Raft election timeout (>= 50ms, >= --raft-heartbeat-timeout)"),
		Duration(&c.RaftCommitTimeout, "raft-commit-timeout", "500ms", "how long a Raft group's leader lets replication to a follower idle before it sends the follower its commit index anyway (>= 1ms); each group does this for each follower, so shorter costs CPU on an idle cluster"),
		Uint64(&c.SnapshotThreshold, "snapshot-threshold", "8192", "Raft log entries between snapshots (>= 1)"),
		Duration(&c.SnapshotInterval, "snapshot-interval", "2m", "how often each Raft group checks --snapshot-threshold (randomized up to twice this)"),
		Uint64(&c.RaftTrailingLogs, "raft-trailing-logs", "10240", "Raft log entries kept after a snapshot, so that a follower that fell behind by fewer catches up from the log instead of a snapshot"),
		String(&c.LogLevel, "log-level", "info", "log level: debug, info, warn or error"),
		String(&c.LogFormat, "log-format", "json", "format of the logs on stderr: json or text"),
		String(&c.DebugAddr, "debug-addr", "", "host:port serving Go profiles at /debug/pprof/ on a listener of its own; empty disables it (keep it off public interfaces)"),
		String(&c.GossipKeyFile, "gossip-key-file", "", "file holding --gossip-key, readable by its owner only (a flag shows in ps)").Checked(c.loadGossipKey),
		String(&c.GossipKey, "gossip-key", "", "base64 of a 32-byte key that encrypts and authenticates gossip: a member without it cannot join (every member needs the same key)").Checked(c.checkGossipKey).AsSecret(),
		String(&c.AdminAddr, "admin-addr", "", "host:port of the operator's listener: when set, the admin endpoints, /metrics, /v1/cluster and /debug/pprof/ are served there only (health checks on both); keep it on a private interface"),
		Int(&c.HTTPMaxConns, "http-max-conns", "4096", "open connections of the HTTP API at most; past it a new one replaces the connection idle the longest, or is answered 503 (0: no bound)").Checked(AtLeast(&c.HTTPMaxConns, 0)),
		Int(&c.HTTPMaxInFlight, "http-max-in-flight", "2048", "requests the HTTP API serves at once at most; more are answered 503 with Retry-After at once (0: no bound; health checks and metrics always pass)").Checked(AtLeast(&c.HTTPMaxInFlight, 0)),
		Duration(&c.HTTPReadTimeout, "http-read-timeout", "30s", "time a client has to send a whole request, body included, before its connection is closed").Checked(Positive(&c.HTTPReadTimeout)),
		Duration(&c.HTTPIdleTimeout, "http-idle-timeout", "60s", "a keep-alive connection with no request for this long is closed").Checked(Positive(&c.HTTPIdleTimeout)),
		Int(&c.RateLimit, "rate-limit", "0", "requests per second each client IP address (IPv6: each /64) may send; more are answered 429 rate_limited with Retry-After (0: no limit; behind a load balancer every client has its address)").Checked(AtLeast(&c.RateLimit, 0)),
		Int(&c.RateBurst, "rate-burst", "0", "requests a client may send at once before --rate-limit applies (0: one second's worth)").Checked(AtLeast(&c.RateBurst, 0)),
		Int(&c.MaxRegistries, "max-registries", "10000", "registry names of each kind (device registries, server registries, chain names) the cluster holds at most: a write to a new name past it answers 503 registry_full (>= 1)").Checked(AtLeast(&c.MaxRegistries, 1)),
		Bytes(&c.DiskMinFree, "disk-min-free", "256MiB", "free space of the data directory's file system below which the node refuses writes (503 unavailable), hands the leadership of its Raft groups to other nodes and fails /readyz, until space returns"),
		Bytes(&c.DiskBallast, "disk-ballast", "64MiB", "size of a file the node keeps in its data directory and deletes when the disk fills up anyway (ENOSPC), so that what was being written completes; recreated when space returns (0: none)"),
		String(&c.TLSCA, "tls-ca", "", "PEM file of the cluster CA: with --tls-cert and --tls-key, every node-to-node connection (Raft, actor remoting, gossip streams) is mutual TLS 1.3 and accepts node certificates of this CA only"),
		String(&c.TLSCert, "tls-cert", "", "PEM file of this node's certificate (SAN URI spiffe://shardkeeper/node/<node-id>, key usages ServerAuth and ClientAuth); reloaded when it changes"),
		String(&c.TLSKey, "tls-key", "", "PEM file of the key of --tls-cert, readable by its owner only; reloaded when it changes"),
		{Name: "config", Usage: "path of a YAML file of settings, keyed by flag name", NoFile: true, Value: stringValue{&c.ConfigFile}},
	}
}

// checkGossipKey checks that --gossip-key is base64 of 32 bytes, without saying what it holds.
func (c *Config) checkGossipKey() error {
	if c.GossipKey == "" {
		return nil
	}
	if k, err := base64.StdEncoding.DecodeString(c.GossipKey); err != nil || len(k) != 32 {
		return errors.New("not base64 of 32 bytes (make one with: head -c 32 /dev/urandom | base64)")
	}
	return nil
}

// loadGossipKey reads --gossip-key-file into GossipKey (checked next, by checkGossipKey).
func (c *Config) loadGossipKey() error {
	if c.GossipKeyFile == "" {
		return nil
	}
	if c.GossipKey != "" {
		return errors.New("give --gossip-key or --gossip-key-file, not both")
	}
	k, err := ReadToken(c.GossipKeyFile)
	c.GossipKey = k
	return err
}

// GossipKeyBytes is the decoded --gossip-key (nil without one).
func (c Config) GossipKeyBytes() []byte {
	k, _ := base64.StdEncoding.DecodeString(c.GossipKey)
	return k
}

// loadAdminToken reads --admin-token-file into AdminToken.
func (c *Config) loadAdminToken() error {
	if c.AdminTokenFile == "" {
		return nil
	}
	if c.AdminToken != "" {
		return errors.New("give --admin-token or --admin-token-file, not both")
	}
	t, err := ReadToken(c.AdminTokenFile)
	c.AdminToken = t
	return err
}

// hostname is the default node id: the host name, or "" (rejected by Validate) when unknown.
func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return ""
	}
	return h
}

// Default returns the core configuration with every default filled in. NodeID defaults to the
// host name; Join and AdminToken default to empty. Sections read as their defaults.
func Default() Config {
	s, err := newSettings(nil)
	if err != nil {
		panic(err) // the core table is wrong, in every process
	}
	return s.c
}

var nodeIDPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// minRaftTimeout is the smallest Raft heartbeat and election timeout accepted.
const minRaftTimeout = 50 * time.Millisecond

// maxPartitions is the largest number of partitions accepted.
const maxPartitions = 4096

// Validate checks ranges and cross-field rules: every duration > 0; Partitions in 1..4096;
// RaftGroups in 0..Partitions;
// BootstrapExpect, Replicas and SnapshotThreshold >= 1; NodeID matching
// `^[A-Za-z0-9_.-]{1,64}$`; DataDir non-empty; the four addresses host:port with a numeric port,
// and pairwise different; every Join entry host:port with a non-empty host and a numeric port;
// both Raft timeouts >= 50ms and the election timeout >= the heartbeat timeout (hashicorp/raft
// requires it); LogLevel one of debug, info, warn, error; LogFormat json or text; and the Check
// of every option of the sections c holds. It reports every violation (joined with errors.Join), each naming its flag.
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
	if c.AdminAddr != "" {
		if _, err := checkAddr(c.AdminAddr); err != nil {
			bad("admin-addr", "%v", err)
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
	}
	for _, n := range ints {
		if n.v < 1 {
			bad(n.name, "must be at least 1, got %d", n.v)
		}
	}
	if c.Partitions < 1 || c.Partitions > maxPartitions {
		bad("partitions", "must be between 1 and %d, got %d", maxPartitions, c.Partitions)
	}
	if c.GroupsPerNode < 0 {
		bad("groups-per-node", "must not be negative, got %d", c.GroupsPerNode)
	}
	if c.MergeDelay < 0 {
		bad("merge-delay", "must not be negative, got %s", c.MergeDelay)
	}
	if c.RaftGroups < 0 || c.RaftGroups > c.Partitions {
		bad("raft-groups", "must be between 0 (the data directory's, or the default) and --partitions (%d), got %d", c.Partitions, c.RaftGroups)
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
		{"request-timeout", c.RequestTimeout},
		{"actor-idle-timeout", c.ActorIdleTimeout},
		{"dead-member-grace", c.DeadMemberGrace},
		{"raft-heartbeat-timeout", c.RaftHeartbeatTimeout},
		{"raft-election-timeout", c.RaftElectionTimeout},
		{"raft-commit-timeout", c.RaftCommitTimeout},
		{"snapshot-interval", c.SnapshotInterval},
	}
	if c.ShutdownDrain < 0 {
		bad("shutdown-drain", "must not be negative, got %s", c.ShutdownDrain)
	}
	if c.LeaveTimeout < 0 {
		bad("leave-timeout", "must not be negative, got %s", c.LeaveTimeout)
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
	if !slices.Contains(logFormats, c.LogFormat) {
		bad("log-format", "%q is not one of %s", c.LogFormat, strings.Join(logFormats, ", "))
	}
	return errors.Join(append(errs, c.checkSections()...)...)
}

// logFormats are the values of --log-format.
var logFormats = []string{"json", "text"}

// checkSections runs the checks of every section's options, in flag name order.
func (c Config) checkSections() []error {
	var opts []Option
	for g, ptr := range c.sections {
		opts = append(opts, g.options(ptr)...)
	}
	slices.SortFunc(opts, func(a, b Option) int { return strings.Compare(a.Name, b.Name) })
	var errs []error
	for _, o := range opts {
		if o.Check == nil {
			continue
		}
		if err := o.Check(); err != nil {
			errs = append(errs, fmt.Errorf("invalid --%s: %w", o.Name, err))
		}
	}
	return errs
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

// TLSFiles are the TLS material files; ok is false without TLS. Setting some but not all
// three is an error naming the flags.
func (c Config) TLSFiles() (ca, cert, key string, ok bool, err error) {
	switch {
	case c.TLSCA == "" && c.TLSCert == "" && c.TLSKey == "":
		return "", "", "", false, nil
	case c.TLSCA == "" || c.TLSCert == "" || c.TLSKey == "":
		return "", "", "", false, errors.New("--tls-ca, --tls-cert and --tls-key go together: set all three or none")
	}
	return c.TLSCA, c.TLSCert, c.TLSKey, true, nil
}
