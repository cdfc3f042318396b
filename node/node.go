// Package node assembles one shardkeeper process: storage, the Raft host, the actor runtime
// and the HTTP API, from a config.Config.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/api"
	"github.com/shardkeeper/shardkeeper/cluster"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/persistence"
)

// Node is a running shardkeeper process.
type Node struct {
	cfg      config.Config
	logger   *slog.Logger
	registry *prometheus.Registry
	store    *persistence.Store
	host     *cluster.Host
	runtime  *actors.Runtime
	ln       net.Listener
	http     *http.Server
	served   chan error
}

// Options extend a node beyond its configuration.
type Options struct {
	Kinds []actors.Kind
	// Routes adds handlers to the HTTP mux (the API of the kinds).
	Routes func(mux *http.ServeMux, rt *actors.Runtime)
	Logger *slog.Logger
}

// Start opens storage, starts every Raft group and the runtime, and serves HTTP. On error
// everything already started is closed again.
func Start(cfg config.Config, opts Options) (n *Node, err error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	n = &Node{cfg: cfg, logger: logger, registry: prometheus.NewRegistry(), served: make(chan error, 1)}
	started := n // error returns set n to nil; close what was started
	defer func() {
		if err != nil {
			started.close()
		}
	}()
	n.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if n.store, err = persistence.Open(filepath.Join(cfg.DataDir, "pebble"), logger); err != nil {
		return nil, err
	}
	// The runtime exists before the host so that no leadership notification is missed.
	var host *cluster.Host
	repl := &lateReplicator{host: &host}
	if n.runtime, err = actors.New(actors.Options{
		Store: n.store, Replicator: repl, Partitions: cfg.Partitions, Registerer: n.registry,
		Logger: logger, RequestTimeout: cfg.RequestTimeout, IdleTimeout: cfg.ActorIdleTimeout,
	}, opts.Kinds...); err != nil {
		return nil, err
	}
	var bootstrap []raft.Server
	if cfg.BootstrapExpect == 1 && len(cfg.Join) == 0 {
		bootstrap = []raft.Server{{ID: raft.ServerID(cfg.NodeID), Address: raft.ServerAddress(cfg.RaftAddr)}}
	}
	if host, err = cluster.NewHost(cluster.HostConfig{
		NodeID: cfg.NodeID, RaftAddr: cfg.RaftAddr, Partitions: cfg.Partitions,
		SnapshotDir: filepath.Join(cfg.DataDir, "snapshots"), Store: n.store,
		HeartbeatTimeout: cfg.RaftHeartbeatTimeout, ElectionTimeout: cfg.RaftElectionTimeout,
		SnapshotThreshold: cfg.SnapshotThreshold, Bootstrap: bootstrap,
		OnLeadership: n.runtime.SetLeader, Logger: logger, LogLevel: cfg.SlogLevel(),
	}); err != nil {
		return nil, err
	}
	n.host = host

	mux := http.NewServeMux()
	api.RegisterOps(mux, n, n.registry)
	if opts.Routes != nil {
		opts.Routes(mux, n.runtime)
	}
	if n.ln, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		return nil, fmt.Errorf("http listener on %s: %w", cfg.HTTPAddr, err)
	}
	n.http = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { n.served <- n.http.Serve(n.ln) }()
	logger.Info("shardkeeper node started", "node_id", cfg.NodeID, "http", n.ln.Addr().String(),
		"raft", cfg.RaftAddr, "partitions", cfg.Partitions, "data_dir", cfg.DataDir)
	return n, nil
}

// lateReplicator lets the runtime be built before the host it proposes to; nothing is
// proposed before the host reports a leadership, by which time it is set.
type lateReplicator struct{ host **cluster.Host }

func (l *lateReplicator) Propose(p uint32, cmd []byte) actors.Future {
	return (*l.host).Propose(p, cmd)
}
func (l *lateReplicator) Barrier(p uint32, d time.Duration) error { return (*l.host).Barrier(p, d) }
func (l *lateReplicator) LastTime(p uint32) int64                 { return (*l.host).LastTime(p) }

// Runtime is the node's actor runtime.
func (n *Node) Runtime() *actors.Runtime { return n.runtime }

// HTTPAddr is the address the API listens on.
func (n *Node) HTTPAddr() string { return n.ln.Addr().String() }

// Store is the node's storage.
func (n *Node) Store() *persistence.Store { return n.store }

// NodeID implements api.ClusterView.
func (n *Node) NodeID() string { return n.cfg.NodeID }

// Members implements api.ClusterView. Until membership arrives, a node is its own cluster.
func (n *Node) Members() []api.Member {
	return []api.Member{{NodeID: n.cfg.NodeID, State: "alive", HTTPAddr: n.HTTPAddr()}}
}

// Partitions implements api.ClusterView.
func (n *Node) Partitions() []cluster.PartitionStatus { return n.host.Status() }

// Ready implements api.ClusterView.
func (n *Node) Ready() error {
	for _, p := range n.host.Status() {
		if p.Leader == "" {
			return fmt.Errorf("partition %d has no leader", p.ID)
		}
		if p.Leader == n.cfg.NodeID && !n.runtime.Ready(p.ID) {
			return fmt.Errorf("partition %d is still catching up on this node", p.ID)
		}
	}
	return nil
}

// Done delivers the HTTP server's exit error if it stops on its own.
func (n *Node) Done() <-chan error { return n.served }

// Shutdown stops serving new requests, lets in-flight ones finish until ctx ends, then
// stops the runtime, Raft and storage.
func (n *Node) Shutdown(ctx context.Context) error {
	var errs []error
	if n.http != nil {
		if err := n.http.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("http shutdown: %w", err))
		}
	}
	errs = append(errs, n.close())
	return errors.Join(errs...)
}

func (n *Node) close() error {
	var errs []error
	if n.ln != nil && n.http == nil {
		n.ln.Close()
	}
	if n.runtime != nil {
		n.runtime.Close()
	}
	if n.host != nil {
		errs = append(errs, n.host.Close())
	}
	if n.store != nil {
		errs = append(errs, n.store.Close())
	}
	return errors.Join(errs...)
}
