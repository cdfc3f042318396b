package cluster

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/pki"
	"github.com/shardkeeper/shardkeeper/test/await"
)

// freeAddr returns a loopback host:port free for both UDP and TCP at the time of the call.
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		u, err := net.ListenPacket("udp", addr)
		l.Close()
		if err == nil {
			u.Close()
			return addr
		}
	}
	t.Fatal("no free port")
	return ""
}

func startMember(t *testing.T, id string, join ...string) *Membership {
	t.Helper()
	m, err := StartMembership(MembershipConfig{
		Meta:       NodeMeta{ID: id, ServerID: id + "@1", Raft: id + ":7000", Partitions: 1},
		GossipAddr: freeAddr(t), Heartbeat: 100 * time.Millisecond, SuspectAfter: 500 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Join(join); err != nil {
		t.Fatal(err)
	}
	return m
}

func stateOf(m *Membership, id string) Member {
	for _, mem := range m.Members() {
		if mem.ID == id {
			return mem
		}
	}
	return Member{}
}

func gossipAddr(m *Membership) string {
	n := m.ml.LocalNode()
	return net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
}

// Members are shown as memberlist decides: a crashed one goes suspect when its heartbeats
// stop, then failed; one that leaves gracefully is shown left, never failed.
func TestMemberStates(t *testing.T) {
	a := startMember(t, "a")
	defer a.Shutdown()
	b := startMember(t, "b", gossipAddr(a))
	c := startMember(t, "c", gossipAddr(a))
	defer c.Shutdown()
	await.True(t, 10*time.Second, "a sees b and c alive", func() bool {
		return stateOf(a, "b").State == StateAlive && stateOf(a, "c").State == StateAlive && len(a.Alive()) == 3
	})

	crashed := time.Now()
	if err := b.Shutdown(); err != nil { // no leave message: as a crash
		t.Fatal(err)
	}
	await.True(t, 5*time.Second, "a shows b suspect", func() bool { return stateOf(a, "b").State == StateSuspect })
	await.True(t, 15*time.Second, "a shows b failed", func() bool { return stateOf(a, "b").State == StateFailed })
	if since := stateOf(a, "b").Since; since.Before(crashed) {
		t.Fatalf("b failed since %v, before it crashed at %v", since, crashed)
	}
	if len(a.Alive()) != 2 {
		t.Fatalf("Alive() = %+v, want a and c", a.Alive())
	}

	if err := c.Leave(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	await.True(t, 10*time.Second, "a shows c left", func() bool { return stateOf(a, "c").State == StateLeft })
	if st := stateOf(a, "a"); st.State != StateAlive {
		t.Fatalf("a sees itself %s", st.State)
	}
}

// Broadcasts reach the other members' handler; the full state reaches a member that joins.
func TestGossipHandler(t *testing.T) {
	a := startMember(t, "a")
	defer a.Shutdown()
	ha := &recordingHandler{state: []byte("a-state")}
	a.Handle(ha)
	b := startMember(t, "b")
	defer b.Shutdown()
	hb := &recordingHandler{}
	b.Handle(hb)
	if err := b.Join([]string{gossipAddr(a)}); err != nil {
		t.Fatal(err)
	}
	await.True(t, 5*time.Second, "b merged a's state on join", func() bool { return hb.merged() == "a-state" })
	a.Broadcast("k", []byte("hello"))
	await.True(t, 5*time.Second, "b received a's broadcast", func() bool { return hb.last() == "hello" })
}

type recordingHandler struct {
	mu       sync.Mutex
	state    []byte
	got, mrg string
}

func (h *recordingHandler) Receive(msg []byte) { h.mu.Lock(); h.got = string(msg); h.mu.Unlock() }
func (h *recordingHandler) LocalState() []byte { return h.state }
func (h *recordingHandler) MergeState(b []byte) {
	h.mu.Lock()
	h.mrg = string(b)
	h.mu.Unlock()
}
func (h *recordingHandler) last() string   { h.mu.Lock(); defer h.mu.Unlock(); return h.got }
func (h *recordingHandler) merged() string { h.mu.Lock(); defer h.mu.Unlock(); return h.mrg }

// With a gossip key, members holding it form the cluster; a member with another key, or with
// none, cannot join, and is never listed.
func TestGossipKey(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	start := func(id string, key []byte, join ...string) (*Membership, error) {
		m, err := StartMembership(MembershipConfig{
			Meta:       NodeMeta{ID: id, ServerID: id + "@1", Raft: id + ":7000", Partitions: 1},
			GossipAddr: freeAddr(t), Heartbeat: 100 * time.Millisecond, SuspectAfter: 500 * time.Millisecond,
			GossipKey: key, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Shutdown() })
		return m, m.Join(join)
	}
	a, _ := start("a", key)
	b, err := start("b", key, gossipAddr(a))
	if err != nil {
		t.Fatalf("a member with the key could not join: %v", err)
	}
	await.True(t, 5*time.Second, "a and b see each other", func() bool {
		return stateOf(a, "b").State == StateAlive && stateOf(b, "a").State == StateAlive
	})
	if _, err := start("rogue", bytes.Repeat([]byte{9}, 32), gossipAddr(a)); err == nil {
		t.Error("a member with another key joined")
	}
	if _, err := start("plain", nil, gossipAddr(a)); err == nil {
		t.Error("a member without a key joined")
	}
	never := time.Now().Add(time.Second)
	for time.Now().Before(never) {
		for _, m := range []*Membership{a, b} {
			for _, id := range []string{"rogue", "plain"} {
				if s := stateOf(m, id); s.ID != "" {
					t.Fatalf("%s lists %s (%s)", m.Local().ID, id, s.State)
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// With TLS, members holding node certificates of the cluster CA form the cluster. A member
// without TLS, with another CA's certificate, or with a certificate naming another node than
// the id it gossips is never listed, even when it holds the gossip key.
func TestGossipTLS(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	dir, otherDir := t.TempDir(), t.TempDir()
	files, err := pki.WriteNodes(dir, nil, time.Hour, "a", "b", "c")
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.WriteNodes(otherDir, nil, time.Hour, "foreign")
	if err != nil {
		t.Fatal(err)
	}
	start := func(id string, peers *pki.Peers, join ...string) (*Membership, error) {
		m, err := StartMembership(MembershipConfig{
			Meta:       NodeMeta{ID: id, ServerID: id + "@1", Raft: id + ":7000", Partitions: 1},
			GossipAddr: freeAddr(t), Heartbeat: 100 * time.Millisecond, SuspectAfter: 500 * time.Millisecond,
			ReconnectInterval: 100 * time.Millisecond,
			GossipKey:         key, Peers: peers, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Shutdown() })
		return m, m.Join(join)
	}
	a, _ := start("a", loadPeers(t, files["a"]))
	b, err := start("b", loadPeers(t, files["b"]), gossipAddr(a))
	if err != nil {
		t.Fatalf("a node of the CA could not join: %v", err)
	}
	await.True(t, 5*time.Second, "a and b see each other", func() bool {
		return stateOf(a, "b").State == StateAlive && stateOf(b, "a").State == StateAlive
	})
	if _, err := start("plain", nil, gossipAddr(a)); err == nil {
		t.Error("a member without TLS joined")
	}
	if _, err := start("foreign", loadPeers(t, other["foreign"]), gossipAddr(a)); err == nil {
		t.Error("a member of another CA joined")
	}
	// Node c's certificate, gossiping as "impostor": memberlist lets it join (its streams
	// are a node's), but it cannot prove the id it claims.
	impostor, err := start("impostor", loadPeers(t, files["c"]), gossipAddr(a))
	if err != nil {
		t.Fatalf("join with a node certificate: %v", err)
	}
	await.True(t, 5*time.Second, "memberlist lists the impostor", func() bool {
		return a.ml.NumMembers() == 3 && b.ml.NumMembers() == 3
	})
	never := time.Now().Add(time.Second)
	for time.Now().Before(never) {
		for _, m := range []*Membership{a, b} {
			for _, id := range []string{"plain", "foreign", "impostor"} {
				if s := stateOf(m, id); s.ID != "" {
					t.Fatalf("%s lists %s (%s)", m.Local().ID, id, s.State)
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	impostor.Shutdown()
}
