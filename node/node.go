// Package node assembles one shardkeeper process: storage, the Raft host, gossip
// membership, the actor runtime, routing and the HTTP API, from a config.Config.
package node

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/api"
	"github.com/shardkeeper/shardkeeper/buildinfo"
	"github.com/shardkeeper/shardkeeper/cluster"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/ops"
	"github.com/shardkeeper/shardkeeper/persistence"
	"github.com/shardkeeper/shardkeeper/pki"
	"github.com/shardkeeper/shardkeeper/services"
	"google.golang.org/grpc"
)

// Node is a running shardkeeper process.
type Node struct {
	cfg        config.Config
	logger     *slog.Logger
	registry   *prometheus.Registry
	store      *persistence.Store
	serverID   string
	disk       *persistence.DiskGuard
	peers      *pki.Peers // TLS material of node-to-node connections, nil without TLS
	system     *actor.ActorSystem
	remote     *remote.Remote
	host       *cluster.Host
	runtime    *actors.Runtime
	membership *cluster.Membership
	directory  *cluster.Directory
	reconciler *cluster.Reconciler
	router     *cluster.Router
	caller     api.LateCaller // the router, for effects of actor kinds built before it
	ln         net.Listener
	http       *http.Server
	debug      *http.Server // --debug-addr, or nil
	admin      *http.Server // --admin-addr, or nil
	adminLn    net.Listener
	served     chan error
	stop       chan struct{}
	wg         sync.WaitGroup
	draining   atomic.Bool
}

// Options extend a node beyond its configuration.
type Options struct {
	// Services are what the node serves: their actor kinds run in the runtime, their routes
	// answer on the HTTP mux, their settings are read from the config.
	Services []services.Service
	Logger   *slog.Logger
}

// Start opens storage, starts every Raft group, gossip, the runtime and routing, and serves
// HTTP. On error everything already started is closed again.
func Start(cfg config.Config, opts Options) (n *Node, err error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	n = &Node{cfg: cfg, logger: logger, registry: prometheus.NewRegistry(), served: make(chan error, 1), stop: make(chan struct{})}
	started := n // error returns set n to nil; close what was started
	defer func() {
		if err != nil {
			started.close()
		}
	}()
	// Scheduler latencies (go_sched_latencies_seconds) tell a node whose goroutines wait for a
	// CPU, e.g. behind blocking fsyncs, from one that waits on the network or on Raft.
	n.registry.MustRegister(collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsScheduler)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildinfo.Collector())

	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if n.disk, err = persistence.NewDiskGuard(cfg.DataDir, cfg.DiskMinFree, cfg.DiskBallast, logger); err != nil {
		return nil, err
	}
	// Captured, not read through n: an error return sets n (the named result) to nil.
	disk, stop, wg := n.disk, n.stop, &n.wg
	wg.Add(1)
	go func() { defer wg.Done(); disk.Run(stop, time.Second) }()
	n.registry.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "shardkeeper_disk_free_bytes",
			Help: "Free space of the data directory's file system, as last measured."},
			func() float64 { return float64(disk.Free()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "shardkeeper_disk_low",
			Help: "1 while the node refuses writes for lack of disk space (--disk-min-free, or a write met ENOSPC)."},
			func() float64 { return b2f(disk.Low()) }))
	if n.store, err = persistence.Open(filepath.Join(cfg.DataDir, "pebble"), logger, n.disk); err != nil {
		return nil, err
	}
	if n.serverID, err = n.store.ServerID(cfg.NodeID); err != nil {
		return nil, err
	}
	// The HTTP listener is bound first so its real address can be gossiped.
	if n.ln, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		return nil, fmt.Errorf("http listener on %s: %w", cfg.HTTPAddr, err)
	}
	if n.peers, err = loadPeers(cfg, logger); err != nil {
		return nil, err
	}
	n.watchPeers()
	n.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return logger.With("component", "protoactor")
	}))
	var creds *cluster.PeerCredentials
	if n.peers != nil {
		creds = cluster.NewPeerCredentials(n.peers)
	}
	if n.remote, err = startRemote(n.system, cfg.RemoteAddr, cfg.Advertised, creds, logger); err != nil {
		return nil, err
	}
	layout, err := resolveLayout(n.store, cfg)
	if err != nil {
		return nil, err
	}
	if n.host, err = cluster.NewHost(cluster.HostConfig{
		ServerID: n.serverID, Peers: n.peers, Disk: n.disk, RaftAddr: cfg.RaftAddr, Advertise: cfg.Advertised, Layout: layout,
		SnapshotDir: filepath.Join(cfg.DataDir, "snapshots"), Store: n.store,
		HeartbeatTimeout: cfg.RaftHeartbeatTimeout, ElectionTimeout: cfg.RaftElectionTimeout, CommitTimeout: cfg.RaftCommitTimeout,
		SnapshotThreshold: cfg.SnapshotThreshold, SnapshotInterval: cfg.SnapshotInterval, TrailingLogs: cfg.RaftTrailingLogs,
		BootstrapSelf: cfg.BootstrapExpect == 1 && len(cfg.Join) == 0, Logger: logger,
	}); err != nil {
		return nil, err
	}
	host := n.host
	if n.runtime, err = actors.New(actors.Options{
		Store: n.store, Replicator: host, Partitions: cfg.Partitions, Groups: host.Groups(), Registerer: n.registry, System: n.system,
		Logger: logger, RequestTimeout: cfg.RequestTimeout, IdleTimeout: cfg.ActorIdleTimeout,
	}, services.Kinds(opts.Services, cfg, services.Env{Caller: &n.caller, Registerer: n.registry})...); err != nil {
		return nil, err
	}
	// The runtime hears of every split before the group it creates can report a leader;
	// the regroup after registering covers those applied before.
	host.WatchSpans(func() { n.runtime.Regroup(host.Spans) })
	n.runtime.Regroup(host.Spans)
	host.Start(n.runtime.SetLeader)

	if n.membership, err = cluster.StartMembership(cluster.MembershipConfig{
		GossipAddr: cfg.GossipAddr, AdvertiseIP: cfg.AdvertiseAddr, Logger: logger, GossipKey: cfg.GossipKeyBytes(), Peers: n.peers,
		KeyringFile: filepath.Join(cfg.DataDir, "gossip-keyring.json"),
		Meta: cluster.NodeMeta{ID: cfg.NodeID, ServerID: n.serverID, Raft: host.Addr(),
			Remote: n.system.ProcessRegistry.Address, HTTP: cfg.Advertised(n.ln.Addr().String()), Partitions: cfg.Partitions, Groups: host.Groups(),
			Bootstrapped: host.HasState(), Splits: true, Merges: true},
	}); err != nil {
		return nil, err
	}
	if creds != nil {
		creds.SetMembers(n.membership)
	}
	switch {
	case !n.membership.Encrypted() && n.peers != nil:
		logger.Warn("gossip packets are not encrypted: with TLS, streams are authenticated, but any process that reaches the gossip address can forge the members' state in UDP gossip (set --gossip-key)", "gossip", cfg.GossipAddr)
	case !n.membership.Encrypted():
		logger.Warn("gossip is not encrypted: any process that reaches the gossip address can join the cluster (set --gossip-key)", "gossip", cfg.GossipAddr)
	}
	n.directory = cluster.NewDirectory(cluster.DirectoryConfig{Host: host, Members: n.membership, Seal: n.membership, Replicas: cfg.Replicas, Logger: logger})
	n.membership.Handle(n.directory)
	n.directory.Start()
	n.registry.MustRegister(cluster.NewCollector(host, n.membership, n.directory))
	if err := n.joinCluster(); err != nil {
		return nil, err
	}
	n.reconciler = cluster.NewReconciler(cluster.ReconcilerConfig{
		Host: host, Members: n.membership, Replicas: cfg.Replicas, DeadGrace: cfg.DeadMemberGrace, Disk: n.disk,
		Groups: n.directory, GroupsPerNode: cfg.GroupsPerNode, MergeDelay: cfg.MergeDelay, Logger: logger,
	})
	n.reconciler.Start()
	forwards := prometheus.NewCounter(prometheus.CounterOpts{Name: "shardkeeper_requests_forwarded_total",
		Help: "Calls this node sent to the leader of their actor's partition on another node to run, each attempt counted (a client that keeps the routing table sends its requests there itself)."})
	n.registry.MustRegister(forwards)
	if n.router, err = cluster.StartRouter(cluster.RouterConfig{
		Self: n.serverID, Partitions: n.directory, Members: n.membership, Runtime: n.runtime, System: n.system,
		Replicas: cfg.Replicas, RequestTimeout: cfg.RequestTimeout, LeaderMovedGrace: 2 * cfg.RaftElectionTimeout,
		Forwards: forwards, Logger: logger,
	}); err != nil {
		return nil, err
	}

	n.caller.Set(n.router)
	mux, err := NewMux(n, n.registry, opts.Services, n.router, cfg)
	if err != nil {
		return nil, err
	}
	timeouts := api.ServerTimeouts{ReadHeader: min(10*time.Second, cfg.HTTPReadTimeout), Read: cfg.HTTPReadTimeout,
		Write: api.MaxWait + cfg.RequestTimeout + 10*time.Second, Idle: cfg.HTTPIdleTimeout}
	public := http.Handler(mux)
	if cfg.AdminAddr != "" {
		public = mux.Public()
		if err := n.startAdmin(cfg.AdminAddr, mux, timeouts); err != nil {
			return nil, err
		}
	}
	burst := cfg.RateBurst
	if burst == 0 {
		burst = cfg.RateLimit
	}
	// Outermost, the metrics count the requests shed or limited too (route "unmatched").
	handler, err := api.Instrument(n.registry, api.RateLimit(float64(cfg.RateLimit), burst, ops.IsHealthCheck,
		api.Shed(cfg.HTTPMaxInFlight, ops.IsHealthCheck, api.RouteErrors(public))))
	if err != nil {
		return nil, err
	}
	// Outside the instruments: it hands the request on with a new context, and they read the
	// pattern the mux records in the request it was given.
	handler = leaderHint(handler)
	guard := api.NewConnGuard(cfg.HTTPMaxConns)
	n.http = &http.Server{Handler: n.drainAware(handler), ConnState: guard.ConnState}
	timeouts.Apply(n.http)
	ln := guard.Listener(n.ln)
	srv, served := n.http, n.served // (n is nil after an error return below)
	go func() { served <- srv.Serve(ln) }()
	if cfg.DebugAddr != "" {
		if n.debug, err = startDebug(cfg.DebugAddr, logger); err != nil {
			return nil, err
		}
	}
	logger.Info("shardkeeper node started", "node_id", cfg.NodeID, "server_id", n.serverID,
		"http", n.ln.Addr().String(), "raft", host.Addr(), "gossip", cfg.GossipAddr,
		"remote", n.system.ProcessRegistry.Address, "partitions", cfg.Partitions, "raft_groups", host.Groups(), "data_dir", cfg.DataDir)
	return n, nil
}

// startRemote starts actor remoting on addr (protoactor panics on a listen failure);
// advertised maps addr to the address other nodes send to (Validate makes sure the port is
// fixed when that differs).
func startRemote(system *actor.ActorSystem, addr string, advertised func(string) string, creds *cluster.PeerCredentials, logger *slog.Logger) (r *remote.Remote, err error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("remote address: %w", err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("remote port: %w", err)
	}
	defer func() {
		if p := recover(); p != nil {
			r, err = nil, fmt.Errorf("start remote on %s: %v", addr, p)
		}
	}()
	// One connection attempt per endpoint writer. protoactor sleeps 2 s after each failed
	// attempt before the next, and fails the messages queued to that address (dead letters)
	// only after the last; the next message then starts a new writer. With the default five
	// attempts, a request forwarded to a node that died while the connection was being set
	// up waited about 10 s.
	server := cluster.RemoteGuard(logger, func() string { return system.ProcessRegistry.Address })
	opts := []remote.ConfigOption{func(c *remote.Config) { c.MaxRetryCount = 1 }}
	if creds != nil {
		// Node certificates of the CA only, either way (cluster.PeerCredentials); the guard's
		// rules apply on top.
		server = append(server, grpc.Creds(creds),
			grpc.ConnectionTimeout(5*time.Second)) // a handshake that stalls holds nothing for long
		opts = append(opts, remote.WithDialOptions(grpc.WithTransportCredentials(creds)))
	}
	opts = append(opts, remote.WithServerOptions(server...))
	if a := advertised(addr); a != addr {
		opts = append(opts, remote.WithAdvertisedHost(a))
	}
	r = remote.NewRemote(system, remote.Configure(host, port, opts...))
	r.Start()
	return r, nil
}

// joinCluster contacts --join members (retrying in the background until it succeeds),
// refuses a cluster whose partition count differs, and, for a new cluster, waits in the
// background for --bootstrap-expect members before the lowest node id bootstraps it.
func (n *Node) joinCluster() error {
	cfg := n.cfg
	if len(cfg.Join) > 0 {
		if err := n.membership.Join(cfg.Join); err != nil {
			n.logger.Warn("join failed; retrying in the background", "error", err)
			n.background(func() bool {
				if n.membership.Join(cfg.Join) != nil {
					return false
				}
				// Joined late: a cluster of another layout stops this node (its reconcilers
				// give it no replica meanwhile).
				if err := n.checkLayouts(); err != nil {
					select {
					case n.served <- err:
					default:
					}
				}
				return true
			})
		}
	}
	if err := n.checkLayouts(); err != nil {
		return err
	}
	if !n.host.HasState() {
		n.background(n.tryBootstrap)
	}
	return nil
}

// background runs step every 500 ms until it returns true or the node stops.
func (n *Node) background(step func() bool) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for !step() {
			select {
			case <-n.stop:
				return
			case <-t.C:
			}
		}
	}()
}

// defaultRaftGroups is G in a new data directory when --raft-groups is 0 (at most P): one
// group per node of a three-node cluster, each leading one.
const defaultRaftGroups = 3

// resolveLayout is the map of partitions to Raft groups cfg asks for. --raft-groups 0 takes
// the data directory's, or defaultRaftGroups in a new one; store.EnsureLayout (in
// cluster.NewHost) then refuses any other than the one recorded.
func resolveLayout(store *persistence.Store, cfg config.Config) (persistence.Layout, error) {
	l := persistence.Layout{Partitions: cfg.Partitions, Groups: cfg.RaftGroups}
	if l.Groups != 0 {
		return l, nil
	}
	have, ok, err := store.RecordedLayout()
	if err != nil {
		return l, err
	}
	if ok && have.Partitions == cfg.Partitions {
		return have, nil
	}
	l.Groups = min(cfg.Partitions, defaultRaftGroups)
	return l, nil
}

// checkLayouts refuses a cluster with a live member of another layout than this node's.
func (n *Node) checkLayouts() error {
	for _, m := range n.membership.Alive() {
		if err := sameLayout(m, n.host.Layout()); err != nil {
			return err
		}
	}
	return nil
}

// sameLayout refuses a member whose partitions or Raft groups differ from this node's: both
// are fixed for the life of the cluster.
func sameLayout(m cluster.NodeMeta, l persistence.Layout) error {
	theirs := m.Layout()
	switch {
	case theirs.Same(l):
	case theirs.Partitions != l.Partitions:
		return fmt.Errorf("member %s runs --partitions=%d but this node has --partitions=%d; P is fixed for the life of the cluster",
			m.ID, theirs.Partitions, l.Partitions)
	default:
		return fmt.Errorf("member %s runs --raft-groups=%d but this node has --raft-groups=%d; the number of Raft groups is fixed for the life of the cluster: start this node with --raft-groups=%d",
			m.ID, theirs.Count(), l.Count(), theirs.Count())
	}
	return nil
}

// tryBootstrap bootstraps a new cluster when --bootstrap-expect members are alive, none of
// them holds Raft state, and this node has the lowest id (Consul's rule). It reports true once
// this node has state (bootstrapped here, or added by another node's reconciler).
func (n *Node) tryBootstrap() bool {
	if n.host.HasState() {
		return true
	}
	alive := n.membership.Alive()
	if len(alive) < n.cfg.BootstrapExpect {
		return false
	}
	sort.Slice(alive, func(i, j int) bool { return alive[i].ID < alive[j].ID })
	for _, m := range alive {
		if m.Bootstrapped || sameLayout(m, n.host.Layout()) != nil {
			return false // an existing cluster will add us; or a misconfigured peer
		}
	}
	if alive[0].ID != n.cfg.NodeID {
		return false
	}
	n.logger.Info("bootstrapping the cluster", "members", len(alive))
	groups := make([]uint32, n.host.Groups())
	for i := range groups {
		groups[i] = uint32(i)
	}
	err := n.host.Bootstrap(func(g uint32) []raft.Server {
		var servers []raft.Server
		for _, d := range cluster.BootstrapReplicas(g, groups, alive, n.cfg.Replicas, n.cfg.NodeID) {
			servers = append(servers, raft.Server{ID: raft.ServerID(d.ServerID), Address: cluster.RaftAddress(d.Raft, d.ServerID)})
		}
		return servers
	})
	if err != nil {
		n.logger.Error("bootstrap", "error", err)
		return false
	}
	n.membership.Update(func(m *cluster.NodeMeta) { m.Bootstrapped = true })
	return true
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
