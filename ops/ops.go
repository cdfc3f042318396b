// Package ops serves the operators' side of a node over HTTP: the health checks, /metrics,
// the cluster view and the routing table, the dashboard and the gossip keyring's endpoints.
// It sits above the cluster, whose state it shows, and above the services, whose dashboard
// figures it shows; the node serves its routes with theirs.
package ops

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/shardkeeper/shardkeeper/api"
	"github.com/shardkeeper/shardkeeper/cluster"
	"github.com/shardkeeper/shardkeeper/services"
)

// Member is one cluster member as /v1/cluster reports it.
type Member struct {
	NodeID   string `json:"node_id"`
	ServerID string `json:"server_id"` // Raft server id: node id @ data directory incarnation
	State    string `json:"state"`     // alive, suspect, failed or left, as gossip sees it
	// StateSince is when the member entered State, as observed by the answering node (Unix ms).
	StateSince int64  `json:"state_since"`
	HTTPAddr   string `json:"http_addr"`
	// DiskLow is set while the member refuses writes for lack of disk space.
	DiskLow bool `json:"disk_low,omitempty"`
	// Leaving is set while the member, told to stop, waits for others to take its replicas.
	Leaving bool `json:"leaving,omitempty"`
}

// ClusterView is what the operational endpoints need from the node.
type ClusterView interface {
	NodeID() string
	Members() []Member
	Partitions() []cluster.PartitionStatus
	// Ready is nil when this node is a member and every partition has a known leader (and
	// those led here serve).
	Ready() error
	// StateHashes reports, per partition, this replica's applied index and state hash.
	StateHashes() ([]PartitionHash, error)
	// Routes is the routing table: each Raft group's partitions and leader.
	Routes() cluster.Routes
	GossipKeys
}

// PartitionHash is one partition's entry in GET /v1/cluster/hashes.
type PartitionHash struct {
	ID           uint32 `json:"id"`
	AppliedIndex uint64 `json:"applied_index"`
	Hash         string `json:"hash"`
}

// ClusterStatus is the body of GET /v1/cluster.
type ClusterStatus struct {
	NodeID     string                    `json:"node_id"`
	Members    []Member                  `json:"members"`
	Partitions []cluster.PartitionStatus `json:"partitions"`
}

// IsHealthCheck reports whether r is a health check: those answer whatever the load (see api.Shed), so
// that a load balancer tells a busy node from a dead one.
func IsHealthCheck(r *http.Request) bool {
	switch r.URL.Path {
	case "/healthz", "/readyz":
		return true
	}
	return false
}

// Mux is where Register adds its routes: an *http.ServeMux (a test lists them).
type Mux interface {
	Handle(pattern string, handler http.Handler)
	HandleFunc(pattern string, handler func(http.ResponseWriter, *http.Request))
}

// AdminPatterns are the routes of Register served on the admin listener only, when
// there is one (--admin-addr): metrics and the cluster view. The health checks are served on
// both.
var AdminPatterns = []string{"GET /metrics", "GET /v1/cluster/hashes", "GET /v1/cluster",
	"GET /v1/cluster/gossip-keys", "POST /v1/cluster/gossip-keys", "GET /ui"}

// Register adds /healthz, /readyz, /metrics, /v1/cluster, the routing table
// (/v1/cluster/routes, public: clients use it), the operator's dashboard (/ui) and the gossip
// keyring's endpoints (with the admin token) to mux; the dashboard shows the services' figures
// beside the runtime's.
func Register(mux Mux, view ClusterView, gatherer prometheus.Gatherer, adminToken string, figures []services.Figure) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		api.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := view.Ready(); err != nil {
			api.WriteError(w, &api.Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: err.Error()})
			return
		}
		api.WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{}))
	// Diagnostic: replicas of a partition at the same applied index must report the same
	// hash (the chaos suite checks it after healing).
	mux.HandleFunc("GET /v1/cluster/hashes", func(w http.ResponseWriter, _ *http.Request) {
		hs, err := view.StateHashes()
		if err != nil {
			api.WriteError(w, err)
			return
		}
		api.WriteJSON(w, http.StatusOK, map[string]any{"node_id": view.NodeID(), "partitions": hs})
	})
	mux.HandleFunc("GET /ui", dashboard(view, gatherer, figures))
	mux.HandleFunc("GET /v1/cluster/gossip-keys", api.Admin(adminToken, listGossipKeys(view)))
	mux.HandleFunc("POST /v1/cluster/gossip-keys", api.Admin(adminToken, changeGossipKey(view)))
	mux.HandleFunc("GET /v1/cluster/routes", func(w http.ResponseWriter, _ *http.Request) {
		api.WriteJSON(w, http.StatusOK, view.Routes())
	})
	mux.HandleFunc("GET /v1/cluster", func(w http.ResponseWriter, _ *http.Request) {
		api.WriteJSON(w, http.StatusOK, ClusterStatus{NodeID: view.NodeID(), Members: view.Members(), Partitions: view.Partitions()})
	})
}
