package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"
)

// NodeMeta is what each node gossips about itself in memberlist metadata (≤ 512 bytes).
type NodeMeta struct {
	ID string `json:"id"`
	// ServerID is the node's Raft server id: its node id and the incarnation of its data
	// directory (see persistence.Store.ServerID). A node whose disk was wiped comes back with
	// a new ServerID, so Raft never mistakes it for the voter that held the lost log.
	ServerID   string `json:"sid"`
	Raft       string `json:"raft"`
	Remote     string `json:"remote"`
	HTTP       string `json:"http"`
	Partitions int    `json:"p"`
	// Bootstrapped is true once this node holds Raft state for any partition: a cluster
	// with such a member must never be bootstrapped again.
	Bootstrapped bool `json:"boot,omitempty"`
	// Leading counts the partitions this node leads (for leadership balancing).
	Leading int `json:"lead,omitempty"`
}

// Member is a node as this node's membership view sees it.
type Member struct {
	NodeMeta
	State string    // alive, suspect, dead or left
	Since time.Time // when it entered that state (as observed here)
}

// MembershipConfig configures gossip.
type MembershipConfig struct {
	Meta       NodeMeta
	GossipAddr string // bind address, host:port (UDP and TCP)
	// AdvertiseIP is the IP other members reach this one at (with the bound port); the
	// bind host if empty.
	AdvertiseIP string
	Logger      *slog.Logger
}

// Membership is this node's memberlist: failure detection and the metadata of every node.
// Safe for concurrent use.
type Membership struct {
	ml     *memberlist.Memberlist
	logger *slog.Logger

	mu      sync.Mutex
	local   NodeMeta
	members map[string]*Member
	subs    []chan struct{}
}

// StartMembership binds the gossip listener. Call Join to contact existing members.
func StartMembership(cfg MembershipConfig) (*Membership, error) {
	host, portStr, err := net.SplitHostPort(cfg.GossipAddr)
	if err != nil {
		return nil, fmt.Errorf("gossip address: %w", err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("gossip port: %w", err)
	}
	m := &Membership{logger: cfg.Logger, local: cfg.Meta, members: map[string]*Member{}}
	if b, err := json.Marshal(cfg.Meta); err != nil || len(b) > memberlist.MetaMaxSize {
		return nil, fmt.Errorf("node metadata of %d bytes exceeds %d", len(b), memberlist.MetaMaxSize)
	}
	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.Meta.ID
	mc.BindAddr, mc.BindPort = host, port
	mc.AdvertiseAddr, mc.AdvertisePort = host, port
	if cfg.AdvertiseIP != "" {
		mc.AdvertiseAddr = cfg.AdvertiseIP
	}
	mc.Delegate = (*delegate)(m)
	mc.Events = (*events)(m)
	// A node restarting under the same name on another address must be able to rejoin.
	mc.DeadNodeReclaimTime = 5 * time.Second
	mc.Logger = newHclog(cfg.Logger, "memberlist").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})
	if m.ml, err = memberlist.Create(mc); err != nil {
		return nil, fmt.Errorf("start gossip on %s: %w", cfg.GossipAddr, err)
	}
	return m, nil
}

// Join contacts existing members; it succeeds if any of them answers.
func (m *Membership) Join(addrs []string) error {
	if len(addrs) == 0 {
		return nil
	}
	if _, err := m.ml.Join(addrs); err != nil {
		return fmt.Errorf("join %v: %w", addrs, err)
	}
	return nil
}

// Local is this node's own metadata.
func (m *Membership) Local() NodeMeta {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.local
}

// Update changes this node's metadata and gossips it.
func (m *Membership) Update(fn func(*NodeMeta)) {
	m.mu.Lock()
	before := m.local
	fn(&m.local)
	changed := before != m.local
	m.mu.Unlock()
	if changed {
		if err := m.ml.UpdateNode(time.Second); err != nil {
			m.logger.Warn("gossip metadata update", "error", err)
		}
	}
}

// Members returns every node ever seen, sorted by id, with its state.
func (m *Membership) Members() []Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Member, 0, len(m.members))
	for _, mem := range m.members {
		out = append(out, *mem)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Alive returns the metadata of alive members (suspect counts as alive: memberlist is slow
// to decide and Raft, not gossip, decides who leads).
func (m *Membership) Alive() []NodeMeta {
	var out []NodeMeta
	for _, mem := range m.Members() {
		if mem.State == "alive" || mem.State == "suspect" {
			out = append(out, mem.NodeMeta)
		}
	}
	return out
}

// Changes returns a channel that receives (coalesced) after every membership change.
func (m *Membership) Changes() <-chan struct{} {
	ch := make(chan struct{}, 1)
	m.mu.Lock()
	m.subs = append(m.subs, ch)
	m.mu.Unlock()
	return ch
}

// Leave announces departure and stops gossip.
func (m *Membership) Leave(timeout time.Duration) error {
	err := m.ml.Leave(timeout)
	return errors.Join(err, m.ml.Shutdown())
}

// Shutdown stops gossip without announcing (as a crash would).
func (m *Membership) Shutdown() error { return m.ml.Shutdown() }

func (m *Membership) observe(n *memberlist.Node) {
	var meta NodeMeta
	if err := json.Unmarshal(n.Meta, &meta); err != nil || meta.ID == "" {
		m.logger.Warn("gossip member with unreadable metadata", "node", n.Name, "error", err)
		return
	}
	state := map[memberlist.NodeStateType]string{
		memberlist.StateAlive: "alive", memberlist.StateSuspect: "suspect",
		memberlist.StateDead: "dead", memberlist.StateLeft: "left",
	}[n.State]
	m.mu.Lock()
	prev := m.members[meta.ID]
	if prev == nil || prev.State != state || prev.NodeMeta != meta {
		since := time.Now()
		if prev != nil && prev.State == state {
			since = prev.Since
		}
		m.members[meta.ID] = &Member{NodeMeta: meta, State: state, Since: since}
		if prev == nil || prev.State != state || prev.ServerID != meta.ServerID {
			m.logger.Info("member changed", "node", meta.ID, "state", state, "server_id", meta.ServerID)
		}
	}
	subs := m.subs
	m.mu.Unlock()
	for _, ch := range subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

type delegate Membership

func (d *delegate) NodeMeta(limit int) []byte {
	d.mu.Lock()
	b, _ := json.Marshal(d.local)
	d.mu.Unlock()
	if len(b) > limit {
		panic(fmt.Sprintf("node metadata of %d bytes exceeds %d", len(b), limit))
	}
	return b
}
func (d *delegate) NotifyMsg([]byte)                           {}
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *delegate) LocalState(join bool) []byte                { return nil }
func (d *delegate) MergeRemoteState(buf []byte, join bool)     {}

type events Membership

func (e *events) NotifyJoin(n *memberlist.Node)   { (*Membership)(e).observe(n) }
func (e *events) NotifyLeave(n *memberlist.Node)  { (*Membership)(e).observe(n) }
func (e *events) NotifyUpdate(n *memberlist.Node) { (*Membership)(e).observe(n) }
