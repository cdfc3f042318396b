package node

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/pki"
)

// peersReloadInterval is how often the TLS files are checked for changes.
const peersReloadInterval = 10 * time.Second

// loadPeers reads the TLS material of node-to-node connections (nil without --tls-*). The
// certificate must name this node's id. Without TLS the node runs, and says loudly that any
// process that reaches its peer ports is trusted, and that gossiped metadata and partition
// records are not signed (cluster/metasig.go): the gossip key, if any, is all that vouches for
// them.
func loadPeers(cfg config.Config, logger *slog.Logger) (*pki.Peers, error) {
	ca, cert, key, ok, err := cfg.TLSFiles()
	if err != nil {
		return nil, err
	}
	if !ok {
		logger.Warn("INSECURE: node-to-node traffic is in the clear and unauthenticated: any process that reaches the Raft, remoting or gossip address is trusted as a member, and members' metadata and partition records in gossip are unsigned, trusted to whoever holds the gossip key (set --tls-ca, --tls-cert and --tls-key)",
			"raft", cfg.RaftAddr, "remote", cfg.RemoteAddr, "gossip", cfg.GossipAddr)
		return nil, nil
	}
	peers, err := pki.Load(pki.Files{CA: ca, Cert: cert, Key: key}, func(path string) ([]byte, error) {
		return config.ReadSecretFile(path, "TLS key file", 1<<20)
	})
	if err != nil {
		return nil, err
	}
	if peers.ID() != cfg.NodeID {
		return nil, fmt.Errorf("TLS certificate %s is node %q's; this node is %q (--node-id)", cert, peers.ID(), cfg.NodeID)
	}
	logger.Info("node-to-node traffic in mutual TLS", "certificate_expires", peers.Expiry())
	return peers, nil
}

// watchPeers reloads the TLS material when its files change, until the node stops.
func (n *Node) watchPeers() {
	if n.peers == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.wg.Add(2)
	go func() {
		defer n.wg.Done()
		n.peers.Watch(ctx, peersReloadInterval, n.logger)
	}()
	go func() {
		defer n.wg.Done()
		<-n.stop
		cancel()
	}()
}
