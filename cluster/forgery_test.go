package cluster

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/shardkeeper/shardkeeper/persistence"
	"github.com/shardkeeper/shardkeeper/pki"
	"github.com/shardkeeper/shardkeeper/test/await"
)

// Attacks on gossip by a holder of the gossip key who has no node certificate: it cannot
// complete a gossip stream (TLS), but it can send memberlist packets (UDP) as any member
// would, so it can claim any member's metadata and broadcast any directory record. With TLS
// neither counts unless the member it speaks for signed it (metasig.go).

// signedCluster is a cluster of nodes with TLS and a gossip key, each with real gossip, a
// directory and a reconciler over a fake Raft host. Layout: four partitions in two Raft groups
// of three voters, placed where the placement wants them, so that nothing is due; each node
// replicates one group or both, and learns the leader of a group it does not replicate only
// from its leader's records.
type signedCluster struct {
	key     []byte
	nodes   map[string]*clusterNode
	order   []string
	leaders [2]string // node id of each group's leader
	// victim leads group 1 and votes in group 0; outsider does not replicate group 1.
	victim, outsider string
}

// clusterNode is one node of a signedCluster.
type clusterNode struct {
	id    string
	peers *pki.Peers
	addr  string // its gossip address, kept across restarts
	m     *Membership
	host  *fakeRaft
	dir   *Directory
	recon *Reconciler
	logs  *logRecorder
}

func (n *clusterNode) sid() string { return n.id + "@1" }

const testLayoutPartitions, testLayoutGroups = 4, 2

// startSignedCluster starts nodes ids; with victimUnsigned, the victim runs as a release that
// predates signed gossip.
func startSignedCluster(t *testing.T, ids []string, victimUnsigned bool) *signedCluster {
	t.Helper()
	c := &signedCluster{key: bytes.Repeat([]byte{7}, 32), nodes: map[string]*clusterNode{}, order: ids}
	files, err := pki.WriteNodes(t.TempDir(), nil, time.Hour, ids...)
	if err != nil {
		t.Fatal(err)
	}
	layout := persistence.Layout{Partitions: testLayoutPartitions, Groups: testLayoutGroups}
	var metas []NodeMeta
	for _, id := range ids {
		metas = append(metas, NodeMeta{ID: id})
	}
	placed := Placement([]uint32{0, 1}, metas, 3)
	in := func(g uint32, id string) bool {
		return slices.ContainsFunc(placed[g], func(m NodeMeta) bool { return m.ID == id })
	}
	// The victim leads group 1 and votes in group 0, which another node leads.
	for _, m := range placed[1] {
		if in(0, m.ID) {
			c.victim = m.ID
			break
		}
	}
	for _, m := range placed[0] {
		if m.ID != c.victim {
			c.leaders[0] = m.ID
			break
		}
	}
	c.leaders[1] = c.victim
	for _, id := range ids {
		if !in(1, id) {
			c.outsider = id
		}
	}
	if c.victim == "" || c.outsider == "" {
		t.Fatalf("placement %v leaves no victim or outsider", placed)
	}

	for _, id := range ids {
		n := &clusterNode{id: id, peers: loadPeers(t, files[id]), addr: freeAddr(t), logs: &logRecorder{}}
		n.host = &fakeRaft{self: n.sid(), layout: layout, parts: make([]GroupInfo, testLayoutGroups)}
		for g := range uint32(testLayoutGroups) {
			span := layout.Group(g)
			n.host.parts[g] = GroupInfo{ID: g, First: span.First, End: span.End}
			if !in(g, id) {
				continue // not a replica: Host knows nothing of the group
			}
			var sids []string
			for _, m := range placed[g] {
				sids = append(sids, m.ID+"@1")
			}
			gi := &n.host.parts[g]
			gi.Replica, gi.Leader, gi.Term, gi.Servers = true, c.leaders[g]+"@1", 5, voters(sids...)
			gi.Applied, gi.Commit, gi.LastIndex = 10, 10, 10
			if c.leaders[g] == id {
				gi.Match = map[raft.ServerID]uint64{}
				for _, sid := range sids {
					gi.Match[raft.ServerID(sid)] = 10
				}
			}
		}
		c.nodes[id] = n
		c.start(t, n, victimUnsigned && id == c.victim, n.sid())
		t.Cleanup(func() { n.dir.Stop() }) // the directory of its last run
	}
	c.settle(t)
	return c
}

// start starts n's gossip (as server id sid), directory and reconciler, then joins the nodes
// started before (as a node does: its directory hears the state exchanged at the join).
func (c *signedCluster) start(t *testing.T, n *clusterNode, unsigned bool, sid string) {
	t.Helper()
	logger := slog.New(n.logs)
	var join []string
	for _, id := range c.order {
		if o := c.nodes[id]; o != nil && o != n && o.m != nil {
			join = append(join, o.addr)
		}
	}
	n.m = startMemberAt(t, MembershipConfig{
		Meta: NodeMeta{ID: n.id, ServerID: sid, Raft: n.id + ":7000", Remote: n.id + ":8090", HTTP: n.id + ":8080",
			Partitions: testLayoutPartitions, Groups: testLayoutGroups, Splits: true, Merges: true},
		GossipAddr: n.addr, Heartbeat: 100 * time.Millisecond, SuspectAfter: 2 * time.Second,
		ReconnectInterval: 100 * time.Millisecond, GossipKey: c.key, Peers: n.peers, Logger: logger, unsigned: unsigned,
		reprove: 100 * time.Millisecond,
	})
	n.dir = NewDirectory(DirectoryConfig{Host: n.host, Members: n.m, Seal: n.m, Replicas: 3, Logger: logger})
	n.dir.refusals = newRepeatLimiter(0, time.Now) // every refusal logged: the tests wait for each
	n.m.Handle(n.dir)
	n.dir.Start()
	n.recon = NewReconciler(ReconcilerConfig{Host: n.host, Members: n.m, Replicas: 3, DeadGrace: time.Hour,
		Groups: n.dir, Logger: logger})
	if len(join) > 0 {
		await.True(t, 20*time.Second, n.id+" joins", func() bool { return n.m.Join(join) == nil })
	}
}

// restart stops n's gossip and directory, as its process would exit, and starts them again at
// the same gossip address: a new signing key (none if unsigned), and server id sid.
func (c *signedCluster) restart(t *testing.T, n *clusterNode, unsigned bool, sid string) {
	t.Helper()
	n.dir.Stop()
	if err := n.m.Shutdown(); err != nil {
		t.Fatal(err)
	}
	n.host.mu.Lock()
	n.host.self = sid
	n.host.mu.Unlock()
	c.start(t, n, unsigned, sid)
}

func startMemberAt(t *testing.T, cfg MembershipConfig) *Membership {
	t.Helper()
	m, err := StartMembership(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Shutdown() })
	return m
}

// settle runs a reconciler pass on every node (which gossips its leadership count), and waits
// until every node sees every other's metadata as it is, holds each group's record as its
// leader signed it, and knows every partition's leader.
func (c *signedCluster) settle(t *testing.T) {
	t.Helper()
	c.pass(t)
	await.True(t, 30*time.Second, "every node sees every other as it is, and every group's record and leader", func() bool {
		for _, n := range c.nodes {
			for _, o := range c.nodes {
				if got := stateOf(n.m, o.id); got.Gone() || got.NodeMeta != o.m.Local() {
					return false
				}
			}
			for g := range uint32(testLayoutGroups) {
				if rec, ok := n.dir.record(g); !ok || !n.dir.current(rec) {
					return false
				}
			}
			for p := range uint32(testLayoutPartitions) {
				if n.dir.Leader(p) != c.leaders[p/2]+"@1" {
					return false
				}
			}
		}
		return true
	})
}

// pass runs a reconciler pass on every node; none may change anything.
func (c *signedCluster) pass(t *testing.T) {
	t.Helper()
	for _, id := range c.order {
		n := c.nodes[id]
		n.recon.Pass(time.Now())
		n.host.mu.Lock()
		changes := slices.Clone(n.host.changes)
		n.host.mu.Unlock()
		if len(changes) > 0 {
			t.Fatalf("%s's reconciler changed its groups: %v", id, changes)
		}
	}
}

// clusterView is what a node acts on: the metadata of the members it lists, where it routes
// each partition (leader, and that leader's remoting address), its partitions' status (what
// /readyz checks), routing table and the groups' configurations.
type clusterView struct {
	Members []NodeMeta
	Targets []string
	Status  []PartitionStatus
	Routes  Routes
	Configs []GroupConfig
	Ready   bool
}

func (n *clusterNode) view() clusterView {
	v := clusterView{Status: n.dir.Status(), Routes: n.dir.Routes(), Configs: n.dir.Configurations(), Ready: true}
	for _, m := range n.m.Members() {
		if !m.Gone() {
			v.Members = append(v.Members, m.NodeMeta)
		}
	}
	for p := range uint32(testLayoutPartitions) {
		leader := n.dir.Leader(p)
		target := "none"
		for _, m := range n.m.Alive() {
			if m.ServerID == leader {
				target = m.ServerID + " at " + m.Remote
			}
		}
		v.Targets = append(v.Targets, target)
	}
	for _, st := range v.Status {
		v.Ready = v.Ready && st.Leader != "" // as Node.Ready
	}
	return v
}

func (c *signedCluster) views() map[string]clusterView {
	out := map[string]clusterView{}
	for id, n := range c.nodes {
		out[id] = n.view()
	}
	return out
}

// unchanged fails t if any node's view differs from before.
func (c *signedCluster) unchanged(t *testing.T, before map[string]clusterView, after string) {
	t.Helper()
	for id, n := range c.nodes {
		got, want := reflect.ValueOf(n.view()), reflect.ValueOf(before[id])
		for i := range got.NumField() {
			if g, w := got.Field(i).Interface(), want.Field(i).Interface(); !reflect.DeepEqual(g, w) {
				t.Errorf("after %s, %s's %s changed:\n got %+v\nwant %+v", after, id, got.Type().Field(i).Name, g, w)
			}
		}
	}
}

// A holder of the gossip key forges each field of a member's metadata, unsigned, with the
// member's own signature on other bytes, and as the member's own earlier metadata replayed:
// no node takes any, each logs it naming the member and the field, no reconciler changes a
// group (a forged server id would have the leader remove the member's voter at once), and
// no node routes, reports or counts readiness any differently.
func TestForgedMetadataChangesNothing(t *testing.T) {
	c := startSignedCluster(t, []string{"a", "b", "c", "d"}, false)
	v := c.nodes[c.victim]
	f := newForger(t, c.key)
	before := c.views()
	genuine := v.m.Local()

	forge := func(field string, change func(*NodeMeta)) {
		m := genuine
		change(&m)
		forged, _ := json.Marshal(m)
		// The victim's signature, cut from its own metadata, on the forged bytes.
		_, sig := unseal(v.m.sealedMeta())
		resigned := append(forged[:len(forged)-1:len(forged)-1], []byte(`,"sig":"`+sig+`"}`)...)
		for i, meta := range [][]byte{forged, resigned} {
			what := fmt.Sprintf("forging %s (%s)", field, []string{"unsigned", "with the member's signature of other bytes"}[i])
			marks := c.logMarks()
			f.alive(c, v, meta)
			logged := c.awaitEffect(before, func() bool { return c.metaRefused(marks, v.id, field) })
			c.pass(t)
			c.unchanged(t, before, what)
			if !logged {
				c.dumpLogs(t, marks)
				t.Fatalf("%s: not logged by every other node", what)
			}
		}
	}
	forge("sid", func(m *NodeMeta) { m.ServerID = m.ID + "@forged" })
	forge("raft", func(m *NodeMeta) { m.Raft = "10.9.9.9:7000" })
	forge("remote", func(m *NodeMeta) { m.Remote = "10.9.9.9:8090" })
	forge("http", func(m *NodeMeta) { m.HTTP = "10.9.9.9:8080" })
	forge("p", func(m *NodeMeta) { m.Partitions = 8 })
	forge("g", func(m *NodeMeta) { m.Groups = 4 })
	forge("boot", func(m *NodeMeta) { m.Bootstrapped = false })
	forge("lead", func(m *NodeMeta) { m.Leading = 9 })
	forge("disk_low", func(m *NodeMeta) { m.DiskLow = true })
	forge("keys", func(m *NodeMeta) { m.Keys = Fingerprint([]byte("forged")) })
	forge("retiring", func(m *NodeMeta) { m.Retiring = true })
	forge("leaving", func(m *NodeMeta) { m.Leaving = true })
	forge("split", func(m *NodeMeta) { m.Splits = false })
	forge("merge", func(m *NodeMeta) { m.Merges = false })

	// Replayed: the victim's own metadata, signed, from before it changed.
	old := v.m.sealedMeta()
	v.m.Update(func(m *NodeMeta) { m.Keys = Fingerprint([]byte("rotated")) })
	await.True(t, 10*time.Second, "the others see the victim's new metadata", func() bool {
		for _, n := range c.nodes {
			if stateOf(n.m, v.id).NodeMeta != v.m.Local() {
				return false
			}
		}
		return true
	})
	before = c.views()
	marks := c.logMarks()
	f.alive(c, v, old)
	logged := c.awaitEffect(before, func() bool { return c.metaRefused(marks, v.id, "keys") })
	c.pass(t)
	c.unchanged(t, before, "replaying the victim's older metadata")
	if !logged {
		c.dumpLogs(t, marks)
		t.Fatal("the replay was not logged by every other node")
	}
}

// A holder of the gossip key broadcasts directory records of the group the victim leads: naming
// another live member as its leader, with term 2^64-1, with other voters; unsigned, and with
// the real leader's signature on other bytes. No node takes any (each logs it), and the node
// that learns the group only from gossip keeps routing to the real leader; the real leader's
// next record (a new term) is taken, not kept out by the forged term.
func TestForgedRecordsChangeNothing(t *testing.T) {
	c := startSignedCluster(t, []string{"a", "b", "c", "d"}, false)
	out := c.nodes[c.outsider]
	leader := c.nodes[c.victim]
	f := newForger(t, c.key)
	before := c.views()

	genuine, ok := out.dir.record(1)
	if !ok || genuine.Leader != leader.sid() {
		t.Fatalf("%s's record of group 1: %+v", out.id, genuine)
	}
	other := c.leaders[0] // a live member, not group 1's leader
	forge := func(what string, change func(*record)) {
		rec := genuine
		rec.raw, rec.key = nil, ""
		change(&rec)
		forged, _ := json.Marshal(rec)
		_, sig := unseal(genuine.raw) // the genuine leader's signature, on other bytes
		resigned := append(forged[:len(forged)-1:len(forged)-1], []byte(`,"sig":"`+sig+`"}`)...)
		for i, b := range [][]byte{forged, resigned} {
			what := fmt.Sprintf("forging a record with %s (%s)", what, []string{"unsigned", "with the leader's signature of other bytes"}[i])
			marks := c.logMarks()
			for _, n := range c.nodes {
				f.record(n, b)
			}
			logged := c.awaitEffect(before, func() bool { return c.recordRefused(marks, persistence.NodeOfServer(rec.Leader)) })
			c.pass(t)
			c.unchanged(t, before, what)
			if !logged {
				c.dumpLogs(t, marks)
				t.Fatalf("%s: not logged by every node", what)
			}
		}
	}
	forge("another leader", func(r *record) { r.Leader = other + "@1"; r.Term++ })
	forge("term 2^64-1, naming a member that does not lead", func(r *record) { r.Leader = other + "@1"; r.Term = math.MaxUint64 })
	forge("term 2^64-1, naming the leader", func(r *record) { r.Term = math.MaxUint64 })
	forge("other voters", func(r *record) {
		r.Term = math.MaxUint64
		r.Voters = []string{leader.sid(), other + "@1", out.sid()}
		r.Lag = nil
	})
	forge("the outsider as leader of the next term", func(r *record) { r.Term++; r.Leader = out.sid() })

	// A leader no verified member holds: the record waits for it (as it would for a member
	// whose probe is under way), and counts for nothing meanwhile.
	ghost := genuine
	ghost.raw, ghost.Leader, ghost.Term = nil, "ghost@1", math.MaxUint64
	for _, n := range c.nodes {
		f.record(n, mustJSON(ghost))
	}
	await.True(t, 10*time.Second, "the ghost's record is held", func() bool {
		out.dir.mu.Lock()
		defer out.dir.mu.Unlock()
		return out.dir.held[1].rec.Leader == "ghost@1"
	})
	c.pass(t)
	c.unchanged(t, before, "a record naming a leader that is no member")

	// The group's next term is taken everywhere, forged term or not.
	leader.host.set(1, func(in *GroupInfo) { in.Term = 6 })
	await.True(t, 10*time.Second, "every node takes the leader's record of term 6", func() bool {
		for _, n := range c.nodes {
			if rec, ok := n.dir.record(1); !ok || rec.Term != 6 || rec.Leader != leader.sid() {
				return false
			}
		}
		return true
	})
	if got := out.view(); !got.Ready || got.Targets[2] != before[out.id].Targets[2] {
		t.Fatalf("after the new term, %s routes partition 2 to %s (ready %v), want %s", out.id, got.Targets[2], got.Ready, before[out.id].Targets[2])
	}
}

// logMarks is how many records each node has logged so far.
func (c *signedCluster) logMarks() map[string]int {
	out := map[string]int{}
	for id, n := range c.nodes {
		out[id] = n.logs.count()
	}
	return out
}

// dumpLogs logs what each node logged since marks.
func (c *signedCluster) dumpLogs(t *testing.T, marks map[string]int) {
	for _, id := range c.order {
		n := c.nodes[id]
		n.logs.mu.Lock()
		for _, r := range n.logs.recs[marks[id]:] {
			t.Logf("%s: %s %s %v", id, r.level, r.msg, r.attrs)
		}
		n.logs.mu.Unlock()
	}
}

// awaitEffect waits (at most 15 s) until a forgery is logged, or until it changed some node's
// view; it reports whether it was logged.
func (c *signedCluster) awaitEffect(before map[string]clusterView, logged func() bool) bool {
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if logged() {
			return true
		}
		for id, n := range c.nodes {
			if !reflect.DeepEqual(n.view(), before[id]) {
				return logged()
			}
		}
	}
	return false
}

// metaRefused reports whether every node but the member has logged, since marks, refusing
// metadata of member that changes field.
func (c *signedCluster) metaRefused(marks map[string]int, member, field string) bool {
	for _, n := range c.nodes {
		if n.id != member && !n.logs.has(marks[n.id], slog.LevelWarn, "gossip metadata refused", func(a map[string]string) bool {
			return a["node"] == member && slices.Contains(strings.Split(a["fields"], ","), field)
		}) {
			return false
		}
	}
	return true
}

// recordRefused reports whether every node has logged, since marks, refusing a record naming
// leader (a node id).
func (c *signedCluster) recordRefused(marks map[string]int, leader string) bool {
	for _, n := range c.nodes {
		if !n.logs.has(marks[n.id], slog.LevelWarn, "gossiped partition record refused", func(a map[string]string) bool {
			return a["leader"] == leader
		}) {
			return false
		}
	}
	return true
}

// sealedMeta is this node's metadata as it gossips it.
func (m *Membership) sealedMeta() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return bytes.Clone(m.sealed)
}

// forger holds the gossip key and nothing else. It writes memberlist packets as a member
// would — a message type, msgpack, AES-GCM with the key — and sends them over UDP.
type forger struct {
	t    *testing.T
	gcm  cipher.AEAD
	conn net.PacketConn
	inc  atomic.Uint32 // incarnations it claims: above any a node reached
}

func newForger(t *testing.T, key []byte) *forger {
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	f := &forger{t: t, gcm: gcm, conn: conn}
	f.inc.Store(1 << 20)
	return f
}

// memberlist's message types (net.go).
const (
	mlAliveMsg byte = 4
	mlUserMsg  byte = 8
)

// send encrypts msg as memberlist does (encryption version 1, no label) and sends it to the
// gossip address of n.
func (f *forger) send(n *clusterNode, msg []byte) {
	nonce := make([]byte, f.gcm.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		f.t.Fatal(err)
	}
	pkt := f.gcm.Seal(append([]byte{1}, nonce...), nonce, msg, nil)
	addr, err := net.ResolveUDPAddr("udp", gossipAddr(n.m))
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.conn.WriteTo(pkt, addr); err != nil {
		f.t.Fatal(err)
	}
}

// alive claims, to every node but v, that member v is alive at its address with meta. Each
// node is told under an incarnation above any v reached, and above those told the nodes
// before it: v refutes the claim (with the incarnation it heard, plus one) as soon as it hears
// it from one of them, and a claim that reaches a node after the refutation would be ignored.
func (f *forger) alive(c *signedCluster, v *clusterNode, meta []byte) {
	ln := v.m.ml.LocalNode()
	for _, id := range c.order {
		if id == v.id {
			continue
		}
		msg := []byte{mlAliveMsg, 0x86} // a map of alive's six fields
		msg = mpStr(msg, "Incarnation")
		msg = binary.BigEndian.AppendUint32(append(msg, 0xce), f.inc.Add(1<<10))
		msg = mpStr(mpStr(msg, "Node"), ln.Name)
		msg = mpBin(mpStr(msg, "Addr"), ln.Addr)
		msg = binary.BigEndian.AppendUint16(append(mpStr(msg, "Port"), 0xcd), ln.Port)
		msg = mpBin(mpStr(msg, "Meta"), meta)
		msg = mpBin(mpStr(msg, "Vsn"), []byte{ln.PMin, ln.PMax, ln.PCur, ln.DMin, ln.DMax, ln.DCur})
		f.send(c.nodes[id], msg)
	}
}

// record broadcasts a directory record to n, as a member's broadcast.
func (f *forger) record(n *clusterNode, rec []byte) {
	f.send(n, append([]byte{mlUserMsg, msgUser}, rec...))
}

func mpStr(b []byte, s string) []byte {
	if len(s) < 32 {
		return append(append(b, 0xa0|byte(len(s))), s...)
	}
	return append(append(b, 0xd9, byte(len(s))), s...)
}

func mpBin(b, v []byte) []byte {
	return append(binary.BigEndian.AppendUint16(append(b, 0xc5), uint16(len(v))), v...)
}

// logRecorder is a slog.Handler that keeps the records at Info and above, for tests to read.
type logRecorder struct {
	mu   sync.Mutex
	recs []loggedRecord
}

type loggedRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (l *logRecorder) Enabled(_ context.Context, level slog.Level) bool {
	return level >= slog.LevelInfo
}
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecorder) WithGroup(string) slog.Handler      { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	rec := loggedRecord{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	l.mu.Lock()
	l.recs = append(l.recs, rec)
	l.mu.Unlock()
	return nil
}

// has reports whether a record at level whose message starts with msg, and whose attributes
// match, was logged after the first from.
func (l *logRecorder) has(from int, level slog.Level, msg string, match func(map[string]string) bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.recs[from:] {
		if r.level == level && strings.HasPrefix(r.msg, msg) && match(r.attrs) {
			return true
		}
	}
	return false
}

// count is how many records were logged.
func (l *logRecorder) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.recs)
}
