package node

import (
	"cmp"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	"github.com/shardkeeper/shardkeeper/cluster"
	"github.com/shardkeeper/shardkeeper/ops"
	"github.com/shardkeeper/shardkeeper/persistence"
)

// The node as the operators' front sees it (ops.ClusterView): its members, partitions,
// routing table, readiness, state hashes and gossip keyring.

// HTTPAddr is the address the API listens on.
func (n *Node) HTTPAddr() string { return n.ln.Addr().String() }

// Store is the node's storage.
func (n *Node) Store() *persistence.Store { return n.store }

// NodeID implements ops.ClusterView.
func (n *Node) NodeID() string { return n.cfg.NodeID }

// Members implements ops.ClusterView.
func (n *Node) Members() []ops.Member {
	var out []ops.Member
	for _, m := range n.membership.Members() {
		out = append(out, ops.Member{NodeID: m.ID, ServerID: m.ServerID, State: m.State,
			StateSince: m.Since.UnixMilli(), HTTPAddr: m.HTTP, DiskLow: m.DiskLow, Leaving: m.Retiring && !m.Gone()})
	}
	return out
}

// Partitions implements ops.ClusterView.
func (n *Node) Partitions() []cluster.PartitionStatus { return n.directory.Status() }

// Routes implements ops.ClusterView.
func (n *Node) Routes() cluster.Routes { return n.directory.Routes() }

// Ready implements ops.ClusterView.
func (n *Node) Ready() error {
	if n.draining.Load() {
		return errors.New("node is shutting down")
	}
	if err := n.disk.Err(); err != nil {
		return err
	}
	for _, p := range n.directory.Status() {
		if p.Leader == "" {
			return fmt.Errorf("partition %d has no leader", p.ID)
		}
		if p.Leader == n.cfg.NodeID && !n.runtime.Ready(p.ID) {
			return fmt.Errorf("partition %d is still catching up on this node", p.ID)
		}
	}
	return nil
}

// KeyStatus is the gossip keyring of every member (ops.GossipKeys).
func (n *Node) KeyStatus(op string, key []byte) []cluster.KeyStatus {
	return n.membership.KeyStatus(op, key)
}

// ChangeKey changes the gossip keyring of every member (ops.GossipKeys).
func (n *Node) ChangeKey(ctx context.Context, op string, key []byte) ([]cluster.KeyStatus, bool, error) {
	return n.membership.ChangeKey(ctx, op, key)
}

// StateHashes implements ops.ClusterView: each partition's hash, with its group's applied
// index.
func (n *Node) StateHashes() ([]ops.PartitionHash, error) {
	out := make([]ops.PartitionHash, 0, n.cfg.Partitions)
	for _, g := range n.host.Spans() {
		idx, sums, err := n.host.StateHashes(g.ID)
		if err != nil {
			return nil, fmt.Errorf("state hashes of raft group %d: %w", g.ID, err)
		}
		for i, sum := range sums {
			// A group lagging behind a split still hashes the partitions it gave away; the
			// group holding them here speaks for them.
			if p := g.First + uint32(i); n.host.Owner(p) == g.ID {
				out = append(out, ops.PartitionHash{ID: p, AppliedIndex: idx, Hash: hex.EncodeToString(sum[:])})
			}
		}
	}
	slices.SortFunc(out, func(a, b ops.PartitionHash) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}
