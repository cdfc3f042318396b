package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/shardkeeper/shardkeeper/persistence"
)

// The directory: every node knows every partition's leader and replicas, also the partitions
// it does not replicate (a cluster larger than R). They are its Raft group's (a partition's
// log is its group's, persistence.Layout). Each group's leader gossips a record of it — its
// term, leader, voters, non-voters and replication lag — when anything in it changes and
// every RefreshInterval; records travel in memberlist broadcasts and in its full-state
// exchange (which a joining node runs at once). A replica's own Raft instance is the first
// source; the gossiped record serves the others, and only while its leader is a live member.
//
// With TLS a record is taken only when signed by the leader it names (recordSeal, see
// metasig.go), and counts only while that leader is a live, verified member holding the key
// that signed it: a record forged by a holder of the gossip key is dropped and logged, and no
// term it claims can keep the group's real records out. A record whose leader this node cannot
// check yet (its probe is under way, as when this node joins, or it signs with a key this node
// has not proven yet, as after it restarted) is held, the latest per group, and checked again
// every second for heldFor.

// record is what a group's leader gossips about it.
type record struct {
	G uint32 `json:"p"` // the group (named p when each group was one partition)
	// First and End are the group's partitions [First, End); both 0 in records of releases
	// that predate splits, where the layout gives the range.
	First     uint32            `json:"f,omitempty"`
	End       uint32            `json:"e,omitempty"`
	Gen       uint32            `json:"r,omitempty"` // the group's generation (persistence.Group)
	Term      uint64            `json:"t"`
	Leader    string            `json:"l"` // server id
	Voters    []string          `json:"v"`
	NonVoters []string          `json:"n,omitempty"`
	Lag       map[string]uint64 `json:"g,omitempty"` // by server id, when the leader knows it
	Applied   uint64            `json:"a"`
	LastIndex uint64            `json:"i"`

	// raw is the record as its leader sealed it, relayed as it is (a signature covers those
	// bytes); key names the key that signed it (recordSeal.SignerKey).
	raw []byte
	key string
}

// wire is the record as gossiped.
func (r record) wire() []byte {
	if r.raw != nil {
		return r.raw
	}
	b, _ := json.Marshal(r)
	return b
}

// newer reports whether r supersedes old: a later term, or the same term further on.
func (r record) newer(old record) bool {
	return r.Term > old.Term || (r.Term == old.Term && r.LastIndex >= old.LastIndex)
}

// localRaft is what the directory needs of this node's Raft host.
type localRaft interface {
	ServerID() string
	Layout() persistence.Layout
	Spans() []persistence.Group
	WatchSpans(fn func())
	EnsureGroup(g persistence.Group) error
	Info(g uint32) GroupInfo
	Leader(g uint32) string
	IsLeader(g uint32) bool
	WatchLeaders(fn func(g uint32, leader string))
}

// gossip is what the directory needs of membership.
type gossip interface {
	Members() []Member
	Broadcast(key string, msg []byte)
}

// recordSeal signs the records this node gossips and checks those it hears (Membership: see
// metasig.go for what each means).
type recordSeal interface {
	SealRecord(obj []byte) (sealed []byte, key string)
	CheckRecord(obj []byte, sig, leader string) (key string, err error)
	SignerKey(serverID string) string
}

// unsealed is the recordSeal of a directory given none: records go unsigned and are all taken.
type unsealed struct{}

func (unsealed) SealRecord(obj []byte) ([]byte, string)                     { return obj, "" }
func (unsealed) CheckRecord(obj []byte, sig, leader string) (string, error) { return "", nil }
func (unsealed) SignerKey(string) string                                    { return "" }

// Bounds of the records held until their leader can be checked: a holder of the gossip key
// can send records naming any group.
const (
	maxHeld = 1024
	heldFor = 30 * time.Second
)

// heldRecord is a record held since at.
type heldRecord struct {
	rec record
	at  time.Time
}

// DirectoryConfig configures a Directory.
type DirectoryConfig struct {
	Host     localRaft
	Members  gossip
	Replicas int
	// Seal signs this node's records and checks the others' (the membership); nil takes every
	// record as gossip delivers it.
	Seal recordSeal
	// RefreshInterval is how often each leader re-gossips its records unchanged (default 5s);
	// changes go out within a second.
	RefreshInterval time.Duration
	Logger          *slog.Logger
}

// Directory is this node's view of every partition and Raft group. Safe for concurrent use.
type Directory struct {
	cfg    DirectoryConfig
	layout persistence.Layout
	stop   chan struct{}
	done   chan struct{}

	seal     recordSeal
	refusals *repeatLimiter // paces the logs of records refused

	mu      sync.Mutex
	records map[uint32]record // the newest record heard of each group
	held    map[uint32]heldRecord
	sent    map[uint32]sentRecord
	// table maps each partition to the group that holds it, from this node's groups and the
	// records' ranges: where ranges overlap, the group that starts later, which a split made
	// from the other. Rebuilt (under mu) when a range changes.
	table atomic.Pointer[[]uint32]
	// gens holds, per partition, the highest generation of any group known to have held it
	// (under mu), and epoch the routes' epoch made from them with the table (Routes).
	gens  []uint32
	epoch atomic.Uint64
	// ensuring holds the groups a record named that this node is opening an instance of,
	// opened by the goroutines of ensured (Stop waits for them).
	ensuring map[uint32]bool
	ensured  sync.WaitGroup
}

type sentRecord struct {
	rec record
	at  time.Time
}

// NewDirectory returns a directory; Start begins gossiping this node's records.
func NewDirectory(cfg DirectoryConfig) *Directory {
	if cfg.RefreshInterval <= 0 {
		cfg.RefreshInterval = 5 * time.Second
	}
	if cfg.Seal == nil {
		cfg.Seal = unsealed{}
	}
	d := &Directory{cfg: cfg, layout: cfg.Host.Layout(), stop: make(chan struct{}), done: make(chan struct{}),
		seal: cfg.Seal, refusals: newRepeatLimiter(time.Minute, time.Now),
		records: map[uint32]record{}, held: map[uint32]heldRecord{}, sent: map[uint32]sentRecord{}, ensuring: map[uint32]bool{}}
	d.rebuild()
	cfg.Host.WatchSpans(func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.rebuild()
	})
	return d
}

// rebuild remakes the table; d.mu is held (or d is not shared yet).
func (d *Directory) rebuild() {
	spans := d.cfg.Host.Spans()
	for _, r := range d.records {
		if g, ok := d.span(r); ok {
			spans = append(spans, g)
		}
	}
	// A partition no known group holds is routed nowhere until one does.
	table := persistence.Holders(spans, d.layout.Partitions)
	if d.gens == nil {
		d.gens = make([]uint32, d.layout.Partitions)
	}
	for _, g := range spans {
		for p := g.First; p < g.End && int(p) < len(d.gens); p++ {
			d.gens[p] = max(d.gens[p], g.Gen)
		}
	}
	// The epoch never falls: every split and merge raises the generation of each partition
	// it touches, which the gens remember, by at least one; a merge can take one group born by
	// a split out of the count, but raises at least two partitions.
	epoch := uint64(0)
	for p, g := range d.gens {
		epoch += uint64(g)
		if table[p] != noOwner && table[p]>>31 != 0 && (p == 0 || table[p-1] != table[p]) {
			epoch++
		}
	}
	d.table.Store(&table)
	d.epoch.Store(epoch)
}

// span is the range a record gives its group: its own, or the layout's for a record of a
// release that predates splits; ok is false for a group of no known range.
func (d *Directory) span(r record) (persistence.Group, bool) {
	if r.End > r.First {
		return persistence.Group{ID: r.G, First: r.First, End: r.End, Gen: r.Gen}, true
	}
	if r.G>>31 == 0 && int(r.G) < d.layout.Count() {
		return d.layout.Group(r.G), true
	}
	return persistence.Group{}, false
}

// groups returns every group this node knows: its own and those records name.
func (d *Directory) groups() []uint32 {
	seen := map[uint32]bool{}
	var out []uint32
	for _, g := range d.cfg.Host.Spans() {
		seen[g.ID] = true
		out = append(out, g.ID)
	}
	d.mu.Lock()
	for id := range d.records {
		if !seen[id] {
			out = append(out, id)
		}
	}
	d.mu.Unlock()
	slices.Sort(out)
	return out
}

// Start gossips the records of the groups led here until Stop.
func (d *Directory) Start() {
	go func() {
		defer close(d.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			d.retryHeld(time.Now())
			d.publish(time.Now())
			select {
			case <-d.stop:
				return
			case <-t.C:
			}
		}
	}()
}

// Stop ends gossiping, and waits for the instances of groups heard of to be opened.
func (d *Directory) Stop() {
	d.mu.Lock() // merge checks stop and counts ensured under it
	close(d.stop)
	d.mu.Unlock()
	<-d.done
	d.ensured.Wait()
}

// publish broadcasts the record of each group led here that changed, or was last sent
// RefreshInterval ago.
func (d *Directory) publish(now time.Time) {
	for _, span := range d.cfg.Host.Spans() {
		g := span.ID
		if !d.cfg.Host.IsLeader(g) {
			continue
		}
		in := d.cfg.Host.Info(g)
		if in.Leader != d.cfg.Host.ServerID() {
			continue
		}
		rec := recordOf(in)
		d.mu.Lock()
		last, ok := d.sent[g]
		due := !ok || now.Sub(last.at) >= d.cfg.RefreshInterval || !sameShape(last.rec, rec)
		if due {
			d.sent[g] = sentRecord{rec: rec, at: now}
		}
		d.mu.Unlock()
		b, _ := json.Marshal(rec)
		rec.raw, rec.key = d.seal.SealRecord(b)
		d.merge(rec)
		if due {
			d.cfg.Members.Broadcast("group/"+strconv.FormatUint(uint64(g), 10), rec.raw)
		}
	}
}

// sameShape compares what readers act on: leader, term, range and replica set (not indexes
// or lag, which change with every write).
func sameShape(a, b record) bool {
	return a.Term == b.Term && a.Leader == b.Leader && a.First == b.First && a.End == b.End && a.Gen == b.Gen &&
		reflect.DeepEqual(a.Voters, b.Voters) &&
		reflect.DeepEqual(a.NonVoters, b.NonVoters)
}

func recordOf(in GroupInfo) record {
	rec := record{G: in.ID, First: in.First, End: in.End, Gen: in.Gen, Term: in.Term, Leader: in.Leader, Applied: in.Applied, LastIndex: in.LastIndex}
	for _, s := range in.Servers {
		if s.Suffrage == raft.Voter {
			rec.Voters = append(rec.Voters, string(s.ID))
		} else {
			rec.NonVoters = append(rec.NonVoters, string(s.ID))
		}
		if m, ok := in.Match[s.ID]; ok || string(s.ID) == in.Leader {
			if string(s.ID) == in.Leader {
				m = in.LastIndex
			}
			if rec.Lag == nil {
				rec.Lag = map[string]uint64{}
			}
			rec.Lag[string(s.ID)] = in.LastIndex - min(m, in.LastIndex)
		}
	}
	return rec
}

// merge keeps rec if it is the newest of its group. A record of a group this node has no
// instance of (a split made it elsewhere) opens one, which the group's leader adds as its
// placement wants.
func (d *Directory) merge(rec record) {
	span, ok := d.span(rec)
	if !ok {
		return // a group of another layout, or garbage
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	old, had := d.records[rec.G]
	if had && !rec.newer(old) && d.binding(old) {
		return
	}
	// A group a merge took in is gone for good: its records are dropped once a record of a
	// newer generation covers its range, and never taken again.
	for id, o := range d.records {
		if id == rec.G {
			continue
		}
		if os, ok := d.span(o); ok && covers(os, span) {
			return
		} else if ok && covers(span, os) {
			delete(d.records, id)
			had = false // rebuild
		}
	}
	d.records[rec.G] = rec
	if !had || old.First != rec.First || old.End != rec.End || old.Gen != rec.Gen {
		d.rebuild()
	}
	select {
	case <-d.stop:
		return // stopping: the host is closing
	default:
	}
	if rec.G>>31 != 0 && !d.ensuring[rec.G] && !slices.ContainsFunc(d.cfg.Host.Spans(), func(g persistence.Group) bool { return g.ID == rec.G }) {
		d.ensuring[rec.G] = true
		d.ensured.Add(1)
		go func() {
			defer d.ensured.Done()
			if err := d.cfg.Host.EnsureGroup(span); err != nil {
				d.cfg.Logger.Warn("cannot open an instance of a raft group a split made", "group", GroupName(rec.G), "error", err)
				d.mu.Lock()
				delete(d.ensuring, rec.G)
				d.mu.Unlock()
			}
		}()
	}
}

// covers reports whether a is newer than b and holds all of b's range.
func covers(a, b persistence.Group) bool {
	return a.Gen > b.Gen && a.First <= b.First && b.End <= a.End
}

// binding reports whether old, the record kept of its group, keeps out records of older
// terms. A signed record does: its leader's term is Raft's. A record trusted unsigned from a
// release that predates signed gossip does only while its leader is a live member of that
// release: once the leader is upgraded, restarted or gone, whatever term it claimed (a holder
// of the gossip key could have claimed any) gives way to any record that checks.
func (d *Directory) binding(old record) bool {
	return old.key != legacyKey || d.seal.SignerKey(old.Leader) == legacyKey
}

// current reports whether rec counts: its leader still signs with the key that signed it
// (always, without TLS).
func (d *Directory) current(rec record) bool {
	return d.seal.SignerKey(rec.Leader) == rec.key
}

// Receive implements GossipHandler: one record.
func (d *Directory) Receive(msg []byte) {
	d.take(msg, time.Now())
}

// take checks a record as gossiped (raw, which it keeps) and merges it. A record older than
// the one kept is dropped unchecked: it would change nothing.
func (d *Directory) take(raw []byte, now time.Time) {
	obj, sig := unseal(raw)
	var rec record
	if err := json.Unmarshal(obj, &rec); err != nil {
		d.cfg.Logger.Warn("unreadable partition record in gossip", "error", err)
		return
	}
	rec.raw = raw
	d.admit(rec, obj, sig, now)
}

// admit merges rec if its leader signed it, holds it (since since) if this node cannot tell
// yet, and logs it otherwise.
func (d *Directory) admit(rec record, obj []byte, sig string, since time.Time) {
	if old, ok := d.record(rec.G); ok && !rec.newer(old) && d.binding(old) {
		return
	}
	key, err := d.seal.CheckRecord(obj, sig, rec.Leader)
	switch {
	case errors.Is(err, errUnknownSigner) || errors.Is(err, errOtherKey) && time.Since(since) < heldFor:
		// Another key than its leader's may be the key of the leader's new run, which this
		// node learns when it proves the leader again.
		d.mu.Lock()
		if _, ok := d.held[rec.G]; ok || len(d.held) < maxHeld {
			d.held[rec.G] = heldRecord{rec: rec, at: since}
		}
		d.mu.Unlock()
		return
	case errors.Is(err, errOtherKey):
		// Most likely signed by its leader before it restarted, and relayed since.
		d.cfg.Logger.Debug("gossiped partition record dropped: signed with another key than its leader's", "group", GroupName(rec.G),
			"leader", persistence.NodeOfServer(rec.Leader), "term", rec.Term)
		return
	case err != nil:
		leader := persistence.NodeOfServer(rec.Leader)
		if ok, suppressed := d.refusals.admit(repeatKey{component: "directory", msg: err.Error(), peer: leader}); ok {
			d.cfg.Logger.Warn("gossiped partition record refused: not signed by the leader it names (a node of an earlier release relays records without their signatures; otherwise it is forged)",
				"group", GroupName(rec.G), "leader", leader, "term", rec.Term, "reason", err.Error(), "suppressed", suppressed)
		}
		return
	}
	rec.key = key
	d.merge(rec)
}

// retryHeld checks the held records again: those that check now are merged, those still
// unknown stay held until heldFor has passed.
func (d *Directory) retryHeld(now time.Time) {
	d.mu.Lock()
	if len(d.held) == 0 {
		d.mu.Unlock()
		return
	}
	held := d.held
	d.held = map[uint32]heldRecord{}
	d.mu.Unlock()
	for g, h := range held {
		if now.Sub(h.at) >= heldFor {
			continue
		}
		d.mu.Lock()
		_, newer := d.held[g] // one heard since is the latest
		d.mu.Unlock()
		if !newer {
			obj, sig := unseal(h.rec.raw)
			d.admit(h.rec, obj, sig, h.at)
		}
	}
}

// LocalState implements GossipHandler: every record known here, each as its leader sealed it.
func (d *Directory) LocalState() []byte {
	d.mu.Lock()
	recs := make([]json.RawMessage, 0, len(d.records))
	for _, r := range d.records {
		recs = append(recs, r.wire())
	}
	d.mu.Unlock()
	b, _ := json.Marshal(recs)
	return b
}

// MergeState implements GossipHandler.
func (d *Directory) MergeState(buf []byte) {
	var recs []json.RawMessage
	if err := json.Unmarshal(buf, &recs); err != nil {
		d.cfg.Logger.Warn("unreadable partition records in gossip state", "error", err)
		return
	}
	now := time.Now()
	for _, r := range recs {
		d.take(bytes.Clone(r), now)
	}
}

// Partitions is P.
func (d *Directory) Partitions() int { return d.layout.Partitions }

// Group is the Raft group whose log holds partition p, as this node knows it.
func (d *Directory) Group(p uint32) uint32 {
	table := *d.table.Load()
	if int(p) >= len(table) {
		return 0
	}
	return table[p]
}

// IsLeader reports whether this node leads partition p (its group).
func (d *Directory) IsLeader(p uint32) bool { return d.cfg.Host.IsLeader(d.Group(p)) }

// WatchLeaders passes on this node's Raft observations of leader changes (see Host), for
// each partition of the group that changed.
func (d *Directory) WatchLeaders(fn func(p uint32, leader string)) {
	d.cfg.Host.WatchLeaders(func(g uint32, leader string) {
		for p, held := range *d.table.Load() {
			if held == g {
				fn(uint32(p), leader)
			}
		}
	})
}

// Leader returns the server id of partition p's leader as this node knows it: from its own
// Raft instance of p's group if that knows one, else from the gossiped record while its
// leader is a live member; "" if neither.
func (d *Directory) Leader(p uint32) string {
	g := d.Group(p)
	if l := d.cfg.Host.Leader(g); l != "" {
		return l
	}
	rec, ok := d.record(g)
	if !ok || !liveServer(d.cfg.Members.Members(), rec.Leader) || !d.current(rec) {
		return ""
	}
	return rec.Leader
}

// Configurations returns every group's latest configuration as this node knows it: its own
// Raft instance's, or the gossiped record's when that is further on (a node removed from a
// group never hears of its removal from Raft: the leader stops replicating to it first).
func (d *Directory) Configurations() []GroupConfig {
	ids := d.groups()
	out := make([]GroupConfig, len(ids))
	for i, g := range ids {
		in := d.cfg.Host.Info(g)
		out[i] = GroupConfig{ID: g, Servers: in.Servers}
		rec, ok := d.record(g)
		if !ok || in.Leader == d.cfg.Host.ServerID() || rec.Term < in.Term || (rec.Term == in.Term && rec.LastIndex < in.LastIndex) {
			continue
		}
		var servers []raft.Server
		for _, v := range rec.Voters {
			servers = append(servers, raft.Server{ID: raft.ServerID(v), Suffrage: raft.Voter})
		}
		for _, v := range rec.NonVoters {
			servers = append(servers, raft.Server{ID: raft.ServerID(v), Suffrage: raft.Nonvoter})
		}
		out[i].Servers = servers
	}
	return out
}

// Leaderships returns the groups whose leaders gossip records of them, each with its leader
// and voters (server ids): what leadership balancing needs of the groups led elsewhere.
func (d *Directory) Leaderships() []GroupInfo {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]GroupInfo, 0, len(d.records))
	for _, r := range d.records {
		in := GroupInfo{ID: r.G, First: r.First, End: r.End, Leader: r.Leader, Term: r.Term}
		for _, v := range r.Voters {
			in.Servers = append(in.Servers, raft.Server{ID: raft.ServerID(v), Suffrage: raft.Voter})
		}
		out = append(out, in)
	}
	return out
}

func (d *Directory) record(g uint32) (record, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.records[g]
	return r, ok
}

func liveServer(members []Member, serverID string) bool {
	for _, m := range members {
		if m.ServerID == serverID {
			return !m.Gone()
		}
	}
	return false
}

// PartitionStatus is one partition in /v1/cluster: its Raft group's status. Node ids
// throughout.
type PartitionStatus struct {
	ID uint32 `json:"id"`
	// Group is the Raft group whose log holds the partition (persistence.Layout).
	Group     uint32   `json:"group"`
	Leader    string   `json:"leader"` // "" while it has none
	Replicas  []string `json:"replicas"`
	Voters    []string `json:"voters"`
	NonVoters []string `json:"non_voters"`
	// AppliedIndex is the group's: this node's, when it replicates the group; the leader's
	// otherwise.
	AppliedIndex uint64 `json:"applied_index"`
	// Lag is how many entries each replica's log trails the leader's, as the leader saw it.
	Lag map[string]uint64 `json:"lag,omitempty"`
	// UnderReplicated: fewer live voters than min(R, members that did not leave).
	UnderReplicated bool `json:"under_replicated"`
}

// Status describes every partition as this node knows it (each as its group).
func (d *Directory) Status() []PartitionStatus {
	groups := d.groupStatus()
	out := make([]PartitionStatus, d.layout.Partitions)
	for i := range out {
		st := groups[d.Group(uint32(i))]
		st.ID = uint32(i)
		out[i] = st
	}
	return out
}

// groupStatus describes every group as this node knows it, by group, ID set to the group.
func (d *Directory) groupStatus() map[uint32]PartitionStatus {
	members := d.cfg.Members.Members()
	size := 0 // the cluster's size: members that did not leave (a failed one is still missed)
	for _, m := range members {
		if m.State != StateLeft {
			size++
		}
	}
	out := map[uint32]PartitionStatus{}
	for _, g := range d.groups() {
		in := d.cfg.Host.Info(g)
		rec, haveRec := d.record(g)
		st := PartitionStatus{ID: g, Group: g, Replicas: []string{}, Voters: []string{}, NonVoters: []string{}}
		var voters, nonVoters []string
		switch {
		case in.Replica && in.Leader != "":
			st.Leader, st.AppliedIndex = in.Leader, in.Applied
			for _, s := range in.Servers {
				if s.Suffrage == raft.Voter {
					voters = append(voters, string(s.ID))
				} else {
					nonVoters = append(nonVoters, string(s.ID))
				}
			}
			if in.Leader == d.cfg.Host.ServerID() {
				rec, haveRec = recordOf(in), true
			}
			if haveRec && rec.Term == in.Term {
				st.Lag = nodeKeys(rec.Lag)
			}
		case haveRec && liveServer(members, rec.Leader) && d.current(rec):
			st.Leader, st.AppliedIndex, st.Lag = rec.Leader, rec.Applied, nodeKeys(rec.Lag)
			voters, nonVoters = rec.Voters, rec.NonVoters
		case in.Replica:
			st.AppliedIndex = in.Applied
			for _, s := range in.Servers {
				voters = append(voters, string(s.ID)) // suffrage matters little without a leader
			}
		}
		st.Leader = persistence.NodeOfServer(st.Leader)
		liveVoters := 0
		for _, v := range voters {
			st.Voters = append(st.Voters, persistence.NodeOfServer(v))
			if liveServer(members, v) {
				liveVoters++
			}
		}
		for _, v := range nonVoters {
			st.NonVoters = append(st.NonVoters, persistence.NodeOfServer(v))
		}
		st.Replicas = append(append(st.Replicas, st.Voters...), st.NonVoters...)
		sort.Strings(st.Replicas)
		st.UnderReplicated = liveVoters < min(d.cfg.Replicas, size)
		out[g] = st
	}
	return out
}

func nodeKeys(m map[string]uint64) map[string]uint64 {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]uint64, len(m))
	for k, v := range m {
		out[persistence.NodeOfServer(k)] = v
	}
	return out
}
