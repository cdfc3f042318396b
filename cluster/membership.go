package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/memberlist"
	"github.com/shardkeeper/shardkeeper/persistence"
	"github.com/shardkeeper/shardkeeper/pki"
)

// NodeMeta is what each node gossips about itself in memberlist metadata (≤ 512 bytes, with
// its signature under TLS: see metasig.go).
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
	// Groups is G, the Raft groups the partitions share (0 from nodes that predate groups:
	// one per partition).
	Groups int `json:"g,omitempty"`
	// Bootstrapped is true once this node holds Raft state for any group: a cluster
	// with such a member must never be bootstrapped again.
	Bootstrapped bool `json:"boot,omitempty"`
	// Leading counts the Raft groups this node leads (for leadership balancing).
	Leading int `json:"lead,omitempty"`
	// DiskLow is set while this node's disk is low: it refuses writes, and must not lead.
	DiskLow bool `json:"disk_low,omitempty"`
	// Keys are the fingerprints of the gossip keys this node holds, the one in use first,
	// comma-separated (see keyring.go).
	Keys string `json:"keys,omitempty"`
	// Retiring is set when the node is told to stop for good: the placement moves its
	// replicas to others before it exits (see leave.go).
	Retiring bool `json:"retiring,omitempty"`
	// Leaving is set just before a graceful leave, so that the others tell "left" from
	// "failed" (memberlist reports both through NotifyLeave). It is not set earlier: a node
	// killed while it waits for its replicas to move has failed, it did not leave.
	Leaving bool `json:"leaving,omitempty"`
	// Splits is set by releases that apply splits of Raft groups (split.go): a group is
	// split only when every live member is.
	Splits bool `json:"split,omitempty"`
	// Merges is set by releases that apply merges of Raft groups (merge.go).
	Merges bool `json:"merge,omitempty"`
}

// Layout is the member's map of partitions to Raft groups.
func (m NodeMeta) Layout() persistence.Layout {
	return persistence.Layout{Partitions: m.Partitions, Groups: m.Groups}
}

// Member states, as gossip shows them.
const (
	StateAlive   = "alive"
	StateSuspect = "suspect" // no heartbeat heard for SuspectAfter; still a member
	StateFailed  = "failed"  // memberlist declared it dead
	StateLeft    = "left"    // it left gracefully
)

// Member is a node as this node's membership view sees it.
type Member struct {
	NodeMeta
	State string
	Since time.Time // when it entered State (as observed here)
}

// Gone reports whether the member is failed or left.
func (m Member) Gone() bool { return m.State == StateFailed || m.State == StateLeft }

// GossipHandler receives the gossip that is not membership: broadcasts of other members and
// the full-state exchange memberlist runs with one member at a time (push-pull, also on join).
type GossipHandler interface {
	Receive(msg []byte)
	LocalState() []byte
	MergeState(buf []byte)
}

// MembershipConfig configures gossip.
type MembershipConfig struct {
	Meta       NodeMeta
	GossipAddr string // bind address, host:port (UDP and TCP)
	// AdvertiseIP is the IP other members reach this one at (with the bound port); the
	// bind host if empty.
	AdvertiseIP string
	// Heartbeat is how often this node gossips a heartbeat (default 1s); a member not heard
	// from for SuspectAfter (default 5s) is shown suspect until memberlist decides.
	Heartbeat    time.Duration
	SuspectAfter time.Duration
	// ReconnectInterval is how often this node contacts the members it holds failed (default
	// 2s), for ReconnectTimeout after they failed (default 24h); see reconnect.
	ReconnectInterval time.Duration
	ReconnectTimeout  time.Duration
	// GossipKey, when set (16, 24 or 32 bytes: AES-128/192/256), encrypts and authenticates
	// every gossip message and stream: a member without the key is neither heard nor answered.
	GossipKey []byte
	// KeyringFile, when set, keeps the gossip keyring across restarts (see keyring.go): at
	// start its keys are used, GossipKey added to them if missing.
	KeyringFile string
	// Peers, when set, puts gossip streams in mutual TLS (see tlsGossip), and a member counts
	// only once the node at its gossip address has proven, with its certificate, the node
	// id it claims (see prove); its metadata counts only when signed by it (metasig.go).
	Peers  *pki.Peers
	Logger *slog.Logger
	// unsigned makes a node with Peers announce no signing key and sign nothing, as a release
	// that predates signed gossip (tests of mixed clusters).
	unsigned bool
	// reprove is how often, at most, a member is proven again (reproveAfter when 0; tests
	// shorten it).
	reprove time.Duration
}

// Membership is this node's memberlist: failure detection, the metadata of every node and a
// broadcast channel for other gossip (see GossipHandler). Safe for concurrent use.
//
// memberlist hands out nodes without their state (memberlist.Node.State is never set on
// them), so states come from its events: NotifyJoin is alive, NotifyLeave is left when the
// member had announced Leaving and failed otherwise. memberlist does not report suspicion at
// all; a member whose heartbeats stopped is shown suspect, which for a crashed node comes a
// few seconds before memberlist declares it failed.
type Membership struct {
	cfg     MembershipConfig
	ml      *memberlist.Memberlist
	tls     *tlsGossip          // nil without Peers
	keyring *memberlist.Keyring // nil without encryption
	keyMu   sync.Mutex          // serializes key changes
	probes  chan struct{}       // a slot per probe under way (at most maxProbes)
	keyOps  chan []byte         // gossiped key changes, for keyChanges (nil without a keyring)
	queue   *memberlist.TransmitLimitedQueue
	handler atomic.Pointer[GossipHandler]
	stop    chan struct{}
	stopped sync.Once
	wg      sync.WaitGroup

	// signer signs this node's metadata and records (nil without Peers, or unsigned).
	signer *gossipSigner
	// refusals paces the logs of metadata refused (per member, reason and fields).
	refusals *repeatLimiter

	mu      sync.Mutex
	local   NodeMeta
	sealed  []byte // local as gossiped: encoded, and signed with TLS
	members map[string]*memberState
	subs    []chan struct{}
	// With TLS (see prove): proven maps a node id to what the last successful probe proved of
	// it (the gossip address whose listener holds its certificate, and the signing key it
	// announced); pending holds the latest alive view of each member not proven yet, or whose
	// metadata its proof cannot check, and doubted the latest view of each member whose
	// metadata its proof could not check, until a probe made after it arrived judges it (both
	// bounded by maxPending); proving holds the probes under way, refused when each id was last
	// refused (probes back off, refusals are logged once per address).
	proven  map[string]proof
	pending map[string]*pendingView
	doubted map[string]*pendingView
	proving map[string]bool
	refused map[string]refusal
}

// pendingView is a copy of memberlist's view of a member (its nodes change under its lock),
// kept until the member is proven (again), and when it arrived.
type pendingView struct {
	node memberlist.Node
	at   time.Time
}

// memberState is what this node knows of one member. Guarded by Membership.mu.
type memberState struct {
	meta       NodeMeta
	gone       string // "", StateFailed or StateLeft
	goneAt     time.Time
	aliveSince time.Time
	heard      time.Time // last heartbeat (or join)
	addr       string    // its gossip address, host:port
}

// Message types of the gossip channel; the first byte of every broadcast.
const (
	msgHeartbeat byte = 'h'
	msgUser      byte = 'u' // for the GossipHandler
)

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
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = time.Second
	}
	if cfg.SuspectAfter <= 0 {
		cfg.SuspectAfter = 5 * time.Second
	}
	if cfg.ReconnectInterval <= 0 {
		cfg.ReconnectInterval = 2 * time.Second
	}
	if cfg.ReconnectTimeout <= 0 {
		cfg.ReconnectTimeout = 24 * time.Hour
	}
	if cfg.reprove <= 0 {
		cfg.reprove = reproveAfter
	}
	now := time.Now()
	m := &Membership{cfg: cfg, local: cfg.Meta, stop: make(chan struct{}),
		members: map[string]*memberState{cfg.Meta.ID: {meta: cfg.Meta, aliveSince: now, heard: now}},
		proven:  map[string]proof{}, pending: map[string]*pendingView{}, doubted: map[string]*pendingView{}, proving: map[string]bool{}, refused: map[string]refusal{},
		probes: make(chan struct{}, maxProbes), refusals: newRepeatLimiter(time.Minute, time.Now)}
	if cfg.Peers != nil && !cfg.unsigned {
		if m.signer, err = newGossipSigner(); err != nil {
			return nil, err
		}
	}
	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.Meta.ID
	mc.BindAddr, mc.BindPort = host, port
	mc.AdvertiseAddr, mc.AdvertisePort = host, port
	if cfg.AdvertiseIP != "" {
		mc.AdvertiseAddr = cfg.AdvertiseIP
	}
	var ignored bool
	if m.keyring, ignored, err = loadKeyring(cfg.KeyringFile, cfg.GossipKey); err != nil {
		return nil, err
	}
	if ignored {
		cfg.Logger.Warn("the configured gossip key is not in the keyring this node was rotated to; the keyring is used", "keyring", cfg.KeyringFile)
	}
	if m.keyring != nil {
		mc.Keyring = m.keyring
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
		m.local.Keys = fingerprints(m.keyring)
		m.members[cfg.Meta.ID].meta = m.local
		if _, err := os.Stat(cfg.KeyringFile); cfg.KeyringFile != "" && errors.Is(err, os.ErrNotExist) {
			if err := saveKeyring(cfg.KeyringFile, m.keyring.GetKeys()); err != nil {
				return nil, err
			}
		}
		m.keyOps = make(chan []byte, 16)
	}
	if cfg.Peers != nil {
		nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{host}, BindPort: port, Logger: mc.Logger})
		if err != nil {
			return nil, fmt.Errorf("start gossip on %s: %w", cfg.GossipAddr, err)
		}
		if port == 0 {
			mc.BindPort, mc.AdvertisePort = nt.GetAutoBindPort(), nt.GetAutoBindPort()
		}
		var announce []byte
		if m.signer != nil {
			announce = m.signer.announcement()
		}
		m.tls = newTLSGossip(nt, cfg.Peers, announce, cfg.Logger)
		mc.Transport = m.tls
	}
	// Sealed last: the keyring set the key fingerprints in it. The size holds for the
	// metadata given; a later Update must keep it (see NodeMeta).
	if m.sealed = m.sealMeta(m.local); len(m.sealed) > memberlist.MetaMaxSize {
		if m.tls != nil {
			m.tls.Shutdown()
		}
		return nil, fmt.Errorf("node metadata of %d bytes (signature included) exceeds %d: shorten the node id or the advertised addresses",
			len(m.sealed), memberlist.MetaMaxSize)
	}
	mc.Delegate = (*delegate)(m)
	mc.Events = (*events)(m)
	// A node restarting under the same name on another address must be able to rejoin.
	mc.DeadNodeReclaimTime = 5 * time.Second
	mc.Logger = newHclog(cfg.Logger, "memberlist").StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true})
	m.queue = &memberlist.TransmitLimitedQueue{RetransmitMult: mc.RetransmitMult, NumNodes: func() int {
		if m.ml == nil {
			return 1
		}
		return m.ml.NumMembers()
	}}
	if m.ml, err = memberlist.Create(mc); err != nil {
		if m.tls != nil {
			m.tls.Shutdown()
		}
		return nil, fmt.Errorf("start gossip on %s: %w", cfg.GossipAddr, err)
	}
	m.wg.Add(1)
	go m.heartbeat()
	if m.tls != nil {
		go m.proveAll()
	}
	if m.keyOps != nil {
		go m.keyChanges()
	}
	go m.reconnect() // not waited for by Shutdown: a contact may take memberlist's TCP timeout
	return m, nil
}

// Encrypted reports whether gossip is encrypted (a gossip key or a kept keyring).
func (m *Membership) Encrypted() bool { return m.keyring != nil }

// Handle sets the receiver of non-membership gossip. Messages that arrive before are dropped
// (the next full-state exchange brings what they said).
func (m *Membership) Handle(h GossipHandler) { m.handler.Store(&h) }

// Broadcast gossips msg to every member. A later broadcast with the same key replaces this
// one if it has not been sent yet.
func (m *Membership) Broadcast(key string, msg []byte) {
	m.queue.QueueBroadcast(&broadcast{name: key, msg: append([]byte{msgUser}, msg...)})
}

// Join contacts existing members; it succeeds if any other member answers.
func (m *Membership) Join(addrs []string) error {
	if len(addrs) == 0 {
		return nil
	}
	if _, err := m.ml.Join(addrs); err != nil {
		return fmt.Errorf("join %v: %w", addrs, err)
	}
	// An address list that reached only this node (a DNS name resolving to every member,
	// this one first) joined nothing: say so, so that the caller tries again.
	if m.ml.NumMembers() < 2 {
		return fmt.Errorf("join %v: only this node answered", addrs)
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
	m.members[m.local.ID].meta = m.local
	if changed {
		m.sealed = m.sealMeta(m.local)
	}
	m.mu.Unlock()
	if changed {
		if err := m.ml.UpdateNode(time.Second); err != nil {
			m.cfg.Logger.Warn("gossip metadata update", "error", err)
		}
	}
}

// Members returns every node ever seen (this one included), sorted by id, with its state.
func (m *Membership) Members() []Member {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Member, 0, len(m.members))
	for _, s := range m.members {
		out = append(out, m.member(s, now))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// member derives s's state at now. Caller holds m.mu.
func (m *Membership) member(s *memberState, now time.Time) Member {
	switch {
	case s.gone != "":
		return Member{NodeMeta: s.meta, State: s.gone, Since: s.goneAt}
	case s.meta.ID != m.local.ID && now.Sub(s.heard) > m.cfg.SuspectAfter:
		return Member{NodeMeta: s.meta, State: StateSuspect, Since: s.heard.Add(m.cfg.SuspectAfter)}
	default:
		return Member{NodeMeta: s.meta, State: StateAlive, Since: s.aliveSince}
	}
}

// Alive returns the metadata of the members that are alive or suspect (memberlist is slow
// to decide, and Raft, not gossip, decides who leads).
func (m *Membership) Alive() []NodeMeta {
	var out []NodeMeta
	for _, mem := range m.Members() {
		if !mem.Gone() {
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

// Leave announces departure (members then show this node as left, not failed) and stops
// gossip. A timeout means some members may only learn of it by failure detection.
func (m *Membership) Leave(timeout time.Duration) error {
	m.Update(func(meta *NodeMeta) { meta.Leaving = true })
	err := m.ml.Leave(timeout)
	if serr := m.Shutdown(); err == nil {
		err = serr
	}
	return err
}

// Shutdown stops gossip without announcing (as a crash would).
func (m *Membership) Shutdown() error {
	m.stopped.Do(func() { close(m.stop) })
	m.wg.Wait()
	return m.ml.Shutdown()
}

func (m *Membership) heartbeat() {
	defer m.wg.Done()
	t := time.NewTicker(m.cfg.Heartbeat)
	defer t.Stop()
	msg := append([]byte{msgHeartbeat}, m.cfg.Meta.ID...)
	for {
		m.queue.QueueBroadcast(&broadcast{name: "heartbeat", msg: msg})
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
	}
}

// reconnect contacts, every ReconnectInterval, the members this node holds failed (not left),
// as Serf's reconnector does: memberlist never gossips with a member it declared dead after
// GossipToTheDeadTime, so the two sides of a healed network partition would each hold the
// other failed for ever, and the reconciler would remove a live node from every partition.
// A contact that reaches the member exchanges full states: the member learns it was held
// dead and refutes it, and is alive again here. One member, picked at random, per tick: a
// contact with a host that drops packets lasts memberlist's TCP timeout.
func (m *Membership) reconnect() {
	t := time.NewTicker(m.cfg.ReconnectInterval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		now := time.Now()
		var addrs []string
		m.mu.Lock()
		for _, s := range m.members {
			if s.gone == StateFailed && s.addr != "" && now.Sub(s.goneAt) < m.cfg.ReconnectTimeout {
				addrs = append(addrs, s.addr)
			}
		}
		m.mu.Unlock()
		select {
		case <-m.stop:
			return
		default:
		}
		if len(addrs) > 0 {
			// A failure is expected: most failed members are down.
			addr := addrs[rand.IntN(len(addrs))]
			if n, _ := m.ml.Join([]string{addr}); n > 0 {
				m.cfg.Logger.Debug("gossip: reached a member held failed", "addr", addr)
			}
		}
	}
}

// Bounds of the proving of members (with TLS): a key holder can gossip made-up members, and
// each costs a probe.
const (
	maxPending     = 1024
	maxProbes      = 4
	probeTimeout   = 5 * time.Second
	refusedBackoff = 10 * time.Second
	// reproveAfter is how often, at most, a member proven already is proven again because
	// metadata that does not verify with the key it proved arrived (a restart announces a new
	// key; a holder of the gossip key can make such metadata up at will).
	reproveAfter = 2 * time.Second
)

// refusal is when a member's id was last refused, and at which address.
type refusal struct {
	addr string
	at   time.Time
}

// proveAll proves, every ReconnectInterval, the members seen but not proven yet: a probe
// refused for a network fault is tried again (after refusedBackoff).
func (m *Membership) proveAll() {
	t := time.NewTicker(m.cfg.ReconnectInterval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		m.mu.Lock()
		todo := map[string]string{}
		for _, views := range []map[string]*pendingView{m.doubted, m.pending} {
			for id, v := range views {
				todo[id] = v.node.Address()
			}
		}
		m.mu.Unlock()
		for id, addr := range todo {
			m.prove(id, addr)
		}
	}
}

// prove checks in the background that the gossip listener at addr holds node id's
// certificate (a TLS handshake, see tlsGossip.probe), and learns the key the member signs its
// gossip with; once it has, the latest view of the member memberlist gave (pending) is
// observed. Until then the member is not listed: anyone holding the gossip key can gossip a
// member into memberlist's list, but only a node of the CA can prove an id. A member proven
// already is proven again (at most every reproveAfter) when its metadata does not verify
// with the key it proved: it may have restarted with a new key, or changed release.
func (m *Membership) prove(id, addr string) {
	key := id + " " + addr
	m.mu.Lock()
	r, wasRefused := m.refused[id]
	p, wasProven := m.proven[id]
	if m.proving[key] || (wasRefused && r.addr == addr && time.Since(r.at) < refusedBackoff) ||
		(wasProven && p.addr == addr && time.Since(p.at) < m.cfg.reprove) {
		m.mu.Unlock()
		return
	}
	select {
	case m.probes <- struct{}{}:
	default:
		m.mu.Unlock()
		return // enough probes under way; proveAll tries again
	}
	m.proving[key] = true
	m.mu.Unlock()
	go func() {
		started := time.Now()
		announced, err := m.tls.probe(addr, id, probeTimeout)
		<-m.probes
		m.mu.Lock()
		delete(m.proving, key)
		logRefusal := err != nil && m.refused[id].addr != addr
		var logLegacy bool
		v, ok := m.pending[id]
		ok = ok && err == nil && v.node.Address() == addr
		// A doubted view that arrived before this probe started is judged by it.
		doubt := m.doubted[id]
		if doubt != nil && err == nil && doubt.node.Address() == addr && doubt.at.Before(started) {
			delete(m.doubted, id)
		} else {
			doubt = nil
		}
		if err == nil {
			old, had := m.proven[id]
			np := proof{addr: addr, key: announced, at: started}
			if had && old.addr == addr && bytes.Equal(old.key, announced) {
				np.seq = old.seq // the same run of the member: replays stay refused
			}
			logLegacy = announced == nil && (!had || old.key != nil)
			m.proven[id] = np
			delete(m.refused, id)
		} else {
			if len(m.refused) >= maxPending {
				clear(m.refused)
			}
			m.refused[id] = refusal{addr: addr, at: time.Now()}
		}
		m.mu.Unlock()
		if logRefusal {
			m.cfg.Logger.Warn("gossip member refused: its gossip listener did not prove its node id", "node", id, "addr", addr, "error", err)
		}
		if logLegacy {
			m.cfg.Logger.Warn("gossip member runs a release that does not sign its gossip: its metadata and the records of the groups it leads are trusted to the holders of the gossip key until it is upgraded",
				"node", id, "addr", addr)
		}
		if doubt != nil && doubt != v {
			m.observeView(&doubt.node, false, doubt) // judged only: a newer view is pending, or was taken
		}
		if ok {
			m.observeView(&v.node, false, v)
		}
	}()
}

func (m *Membership) heard(id string) {
	now := time.Now()
	m.mu.Lock()
	if s, ok := m.members[id]; ok && s.gone == "" {
		if now.Sub(s.heard) > m.cfg.SuspectAfter {
			s.aliveSince = now // back from suspect
		}
		s.heard = now
	}
	m.mu.Unlock()
}

// observe records a memberlist event: alive (join or update) or gone (leave).
func (m *Membership) observe(n *memberlist.Node, gone bool) { m.observeView(n, gone, nil) }

// observeView is observe; from, when set, is the pending view n is, observed as it is only
// while it is still the member's pending view.
//
// With TLS, an alive view changes nothing until the member is proven at its address and its
// metadata verifies with the key it proved (checkMeta); metadata that does not verify leaves
// the member as it was (a member never verified stays unlisted), and a gone view marks it gone
// with its last verified metadata. Metadata that a new probe might make checkable (unsigned,
// or signed with another key, as after a restart or a change of release) waits in pending
// until a probe made after it arrived: if that probe does not make it checkable, it is
// refused. Other metadata that does not verify is refused at once.
func (m *Membership) observeView(n *memberlist.Node, gone bool, from *pendingView) {
	obj, sig := unseal(n.Meta)
	var meta NodeMeta
	if err := json.Unmarshal(obj, &meta); err != nil || meta.ID == "" {
		m.cfg.Logger.Warn("gossip member with unreadable metadata", "node", n.Name, "error", err)
		return
	}
	if n.Name != meta.ID {
		m.cfg.Logger.Warn("gossip member whose name is not its node id; ignored", "node", n.Name, "id", meta.ID)
		return
	}
	now := time.Now()
	arrived := now
	if from != nil {
		arrived = from.at
	}
	m.mu.Lock()
	s, known := m.members[meta.ID]
	var last NodeMeta // the member's verified metadata, if known
	if known {
		last = s.meta
	}
	if from != nil && m.pending[meta.ID] != from {
		// A doubted view that a newer one replaced: it is only judged by the probe just made
		// (older metadata of the member, which the newer view replaced, is not logged).
		p := m.proven[meta.ID]
		err := m.signedByOther(p.checkMeta(obj, sig), sig, meta.ID)
		m.mu.Unlock()
		if err != nil && !errors.Is(err, errReplayed) && p.addr == n.Address() && p.at.After(arrived) {
			m.refuseMeta(meta, last, known, err)
		}
		return
	}
	if m.tls != nil && meta.ID != m.local.ID {
		p, proven := m.proven[meta.ID]
		if !proven || p.addr != n.Address() {
			// Not proven: keep memberlist's view for when the probe succeeds.
			m.stash(n, gone, arrived)
			m.mu.Unlock()
			if !gone {
				m.prove(n.Name, n.Address())
			}
			return
		}
		if err := p.checkMeta(obj, sig); err != nil {
			err = m.signedByOther(err, sig, meta.ID)
			waits := (errors.Is(err, errUnsigned) || errors.Is(err, errOtherKey)) && !p.at.After(arrived)
			if waits {
				m.stash(n, gone, arrived)
				if v := m.pending[meta.ID]; v != nil {
					m.doubted[meta.ID] = v
				}
			} else {
				delete(m.pending, meta.ID)
			}
			if !gone || !known {
				m.mu.Unlock()
				if !waits {
					m.refuseMeta(meta, last, known, err)
				} else if !gone {
					m.prove(n.Name, n.Address()) // observed again once proven again
				}
				return
			}
			meta = last // gone: the state changes, the metadata does not
		} else {
			m.proven[meta.ID] = p // its sequence number
			delete(m.pending, meta.ID)
		}
	}
	if !known {
		s = &memberState{aliveSince: now, heard: now}
		m.members[meta.ID] = s
	}
	before := m.member(s, now)
	if meta.ID != m.local.ID {
		s.meta = meta
		s.addr = n.Address()
	}
	switch {
	case gone && s.gone == "":
		s.gone, s.goneAt = StateFailed, now
		if s.meta.Leaving {
			s.gone = StateLeft
		}
	case !gone && s.gone != "":
		s.gone, s.aliveSince, s.heard = "", now, now // rejoined
	}
	after := m.member(s, now)
	subs := m.subs
	m.mu.Unlock()
	if !known || before.State != after.State || before.ServerID != after.ServerID || before.Retiring != after.Retiring {
		m.cfg.Logger.Info("member changed", "node", meta.ID, "state", after.State, "server_id", meta.ServerID, "retiring", after.Retiring)
	}
	for _, ch := range subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// stash keeps a copy of memberlist's view n of a member, arrived at at, in pending, or drops
// the pending view of a member gone. m.mu is held.
func (m *Membership) stash(n *memberlist.Node, gone bool, at time.Time) {
	if gone {
		delete(m.pending, n.Name)
		delete(m.doubted, n.Name)
		return
	}
	if _, ok := m.pending[n.Name]; ok || len(m.pending) < maxPending {
		v := &pendingView{node: *n, at: at}
		v.node.Meta = bytes.Clone(n.Meta)
		m.pending[n.Name] = v
	}
}

// refuseMeta logs metadata refused (at most once a minute per member, reason and fields):
// the member it names, the fields that differ from its verified metadata (last, if known) and
// why. Never the metadata's signature.
func (m *Membership) refuseMeta(got, last NodeMeta, known bool, why error) {
	fields := "member not verified yet"
	if known {
		if fields = strings.Join(changedFields(last, got), ","); fields == "" {
			fields = "none"
		}
	}
	if ok, suppressed := m.refusals.admit(repeatKey{component: "gossip metadata", msg: why.Error() + "/" + fields, peer: got.ID}); ok {
		m.cfg.Logger.Warn("gossip metadata refused: not signed by the member's node; its last verified metadata stays",
			"node", got.ID, "fields", fields, "reason", why.Error(), "suppressed", suppressed)
	}
}

type delegate Membership

// NodeMeta is this node's metadata as sealed by the last Update (or start).
func (d *delegate) NodeMeta(limit int) []byte {
	d.mu.Lock()
	b := d.sealed
	d.mu.Unlock()
	if len(b) > limit {
		panic(fmt.Sprintf("node metadata of %d bytes exceeds %d", len(b), limit))
	}
	return b
}

func (d *delegate) NotifyMsg(buf []byte) {
	if len(buf) == 0 {
		return
	}
	switch buf[0] {
	case msgHeartbeat:
		(*Membership)(d).heard(string(buf[1:]))
	case msgUser:
		if h := d.handler.Load(); h != nil {
			(*h).Receive(append([]byte(nil), buf[1:]...))
		}
	case msgKeyring:
		// Not on memberlist's packet goroutine: applying saves a file and updates metadata.
		if d.keyOps != nil {
			select {
			case d.keyOps <- append([]byte(nil), buf[1:]...):
			default:
			}
		}
	}
}

func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte {
	return d.queue.GetBroadcasts(overhead, limit)
}

func (d *delegate) LocalState(join bool) []byte {
	if h := d.handler.Load(); h != nil {
		return (*h).LocalState()
	}
	return nil
}

func (d *delegate) MergeRemoteState(buf []byte, join bool) {
	if h := d.handler.Load(); h != nil && len(buf) > 0 {
		(*h).MergeState(append([]byte(nil), buf...))
	}
}

type events Membership

func (e *events) NotifyJoin(n *memberlist.Node)   { (*Membership)(e).observe(n, false) }
func (e *events) NotifyLeave(n *memberlist.Node)  { (*Membership)(e).observe(n, true) }
func (e *events) NotifyUpdate(n *memberlist.Node) { (*Membership)(e).observe(n, false) }

// broadcast is one queued gossip message; a newer one of the same name replaces it.
type broadcast struct {
	name string
	msg  []byte
}

func (b *broadcast) Invalidates(o memberlist.Broadcast) bool {
	ob, ok := o.(*broadcast)
	return ok && ob.name == b.name
}
func (b *broadcast) Name() string    { return b.name }
func (b *broadcast) Message() []byte { return b.msg }
func (b *broadcast) Finished()       {}
