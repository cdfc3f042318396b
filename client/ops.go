package client

import (
	"context"
	"net/http"
	"time"
)

// Member is one cluster member of GET /v1/cluster.
type Member struct {
	NodeID   string `json:"node_id"`
	ServerID string `json:"server_id"` // Raft server id: node id @ data directory incarnation
	State    string `json:"state"`     // alive, suspect, failed or left, as gossip sees it
	// StateSince is when the member entered State, as the answering node saw it (Unix ms).
	StateSince int64  `json:"state_since"`
	HTTPAddr   string `json:"http_addr"`
}

// Partition is one partition of GET /v1/cluster.
type Partition struct {
	ID uint32 `json:"id"`
	// Group is the Raft group whose log holds the partition; the fields below are the
	// group's.
	Group     uint32   `json:"group"`
	Leader    string   `json:"leader"` // node id; "" while the partition has no leader
	Replicas  []string `json:"replicas"`
	Voters    []string `json:"voters"`
	NonVoters []string `json:"non_voters"`
	// AppliedIndex is the answering node's when it replicates the partition, else the leader's.
	AppliedIndex uint64 `json:"applied_index"`
	// Lag is how many entries each replica (by node id) trails the leader; nil when unknown.
	Lag             map[string]uint64 `json:"lag,omitempty"`
	UnderReplicated bool              `json:"under_replicated"`
}

// ClusterStatus is the answer of GET /v1/cluster: the answering node's view.
type ClusterStatus struct {
	NodeID     string      `json:"node_id"`
	Members    []Member    `json:"members"`
	Partitions []Partition `json:"partitions"`
}

// Healthz is nil while the node answers GET /healthz with 200.
func (c *Client) Healthz(ctx context.Context) error {
	_, err := c.do(ctx, call{method: http.MethodGet, path: "/healthz", idempotent: true}, nil)
	return err
}

// Readyz is nil when the node answers GET /readyz with 200 (a member, every partition with a
// leader), else the *APIError (503) or transport error. It makes exactly one attempt: a
// readiness probe reports, it does not wait — see WaitReady.
func (c *Client) Readyz(ctx context.Context) error {
	_, err := c.do(ctx, call{method: http.MethodGet, path: "/readyz", single: true}, nil)
	return err
}

// WaitReady polls Readyz every interval until it succeeds or ctx is done; it returns the
// last Readyz error with ctx's.
func (c *Client) WaitReady(ctx context.Context, interval time.Duration) error {
	for {
		err := c.Readyz(ctx)
		if err == nil {
			return nil
		}
		if serr := c.sleep(ctx, interval); serr != nil {
			return &waitError{last: err, ctx: serr}
		}
	}
}

// waitError is WaitReady's failure: the context ended while the node was not ready.
type waitError struct{ last, ctx error }

func (e *waitError) Error() string   { return "client: node not ready: " + e.last.Error() }
func (e *waitError) Unwrap() []error { return []error{e.ctx, e.last} }

// Cluster reads GET /v1/cluster.
func (c *Client) Cluster(ctx context.Context) (*ClusterStatus, error) {
	var out ClusterStatus
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/cluster", idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
