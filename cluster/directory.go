package cluster

import (
	"encoding/json"
	"log/slog"
	"reflect"
	"sort"
	"strconv"
	"sync"
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

// record is what a group's leader gossips about it.
type record struct {
	G         uint32            `json:"p"` // the group (named p when each group was one partition)
	Term      uint64            `json:"t"`
	Leader    string            `json:"l"` // server id
	Voters    []string          `json:"v"`
	NonVoters []string          `json:"n,omitempty"`
	Lag       map[string]uint64 `json:"g,omitempty"` // by server id, when the leader knows it
	Applied   uint64            `json:"a"`
	LastIndex uint64            `json:"i"`
}

// newer reports whether r supersedes old: a later term, or the same term further on.
func (r record) newer(old record) bool {
	return r.Term > old.Term || (r.Term == old.Term && r.LastIndex >= old.LastIndex)
}

// localRaft is what the directory needs of this node's Raft host.
type localRaft interface {
	ServerID() string
	Layout() persistence.Layout
	Groups() int
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

// DirectoryConfig configures a Directory.
type DirectoryConfig struct {
	Host     localRaft
	Members  gossip
	Replicas int
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

	mu      sync.Mutex
	records map[uint32]record // the newest record heard of each group
	sent    map[uint32]sentRecord
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
	return &Directory{cfg: cfg, layout: cfg.Host.Layout(), stop: make(chan struct{}), done: make(chan struct{}),
		records: map[uint32]record{}, sent: map[uint32]sentRecord{}}
}

// Start gossips the records of the groups led here until Stop.
func (d *Directory) Start() {
	go func() {
		defer close(d.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			d.publish(time.Now())
			select {
			case <-d.stop:
				return
			case <-t.C:
			}
		}
	}()
}

// Stop ends gossiping.
func (d *Directory) Stop() {
	close(d.stop)
	<-d.done
}

// publish broadcasts the record of each group led here that changed, or was last sent
// RefreshInterval ago.
func (d *Directory) publish(now time.Time) {
	for g := range uint32(d.cfg.Host.Groups()) {
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
		d.merge(rec)
		if due {
			b, _ := json.Marshal(rec)
			d.cfg.Members.Broadcast("group/"+strconv.FormatUint(uint64(g), 10), b)
		}
	}
}

// sameShape compares what readers act on: leader, term and replica set (not indexes or lag,
// which change with every write).
func sameShape(a, b record) bool {
	return a.Term == b.Term && a.Leader == b.Leader && reflect.DeepEqual(a.Voters, b.Voters) &&
		reflect.DeepEqual(a.NonVoters, b.NonVoters)
}

func recordOf(in GroupInfo) record {
	rec := record{G: in.ID, Term: in.Term, Leader: in.Leader, Applied: in.Applied, LastIndex: in.LastIndex}
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

func (d *Directory) merge(rec record) {
	if int(rec.G) >= d.cfg.Host.Groups() {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if old, ok := d.records[rec.G]; !ok || rec.newer(old) {
		d.records[rec.G] = rec
	}
}

// Receive implements GossipHandler: one record.
func (d *Directory) Receive(msg []byte) {
	var rec record
	if err := json.Unmarshal(msg, &rec); err != nil {
		d.cfg.Logger.Warn("unreadable partition record in gossip", "error", err)
		return
	}
	d.merge(rec)
}

// LocalState implements GossipHandler: every record known here.
func (d *Directory) LocalState() []byte {
	d.mu.Lock()
	recs := make([]record, 0, len(d.records))
	for _, r := range d.records {
		recs = append(recs, r)
	}
	d.mu.Unlock()
	b, _ := json.Marshal(recs)
	return b
}

// MergeState implements GossipHandler.
func (d *Directory) MergeState(buf []byte) {
	var recs []record
	if err := json.Unmarshal(buf, &recs); err != nil {
		d.cfg.Logger.Warn("unreadable partition records in gossip state", "error", err)
		return
	}
	for _, r := range recs {
		d.merge(r)
	}
}

// Partitions is P.
func (d *Directory) Partitions() int { return d.layout.Partitions }

// Group is the Raft group whose log holds partition p.
func (d *Directory) Group(p uint32) uint32 { return d.layout.Of(p) }

// IsLeader reports whether this node leads partition p (its group).
func (d *Directory) IsLeader(p uint32) bool { return d.cfg.Host.IsLeader(d.layout.Of(p)) }

// WatchLeaders passes on this node's Raft observations of leader changes (see Host), for
// each partition of the group that changed.
func (d *Directory) WatchLeaders(fn func(p uint32, leader string)) {
	d.cfg.Host.WatchLeaders(func(g uint32, leader string) {
		if int(g) >= d.layout.Count() {
			return // born by a split: not routed to yet
		}
		gr := d.layout.Group(g)
		for p := gr.First; p < gr.End; p++ {
			fn(p, leader)
		}
	})
}

// Leader returns the server id of partition p's leader as this node knows it: from its own
// Raft instance of p's group if that knows one, else from the gossiped record while its
// leader is a live member; "" if neither.
func (d *Directory) Leader(p uint32) string {
	g := d.layout.Of(p)
	if l := d.cfg.Host.Leader(g); l != "" {
		return l
	}
	rec, ok := d.record(g)
	if !ok || !liveServer(d.cfg.Members.Members(), rec.Leader) {
		return ""
	}
	return rec.Leader
}

// Configurations returns every group's latest configuration as this node knows it: its own
// Raft instance's, or the gossiped record's when that is further on (a node removed from a
// group never hears of its removal from Raft: the leader stops replicating to it first).
func (d *Directory) Configurations() []GroupConfig {
	out := make([]GroupConfig, d.cfg.Host.Groups())
	for i := range out {
		g := uint32(i)
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
		st := groups[d.layout.Of(uint32(i))]
		st.ID = uint32(i)
		out[i] = st
	}
	return out
}

// groupStatus describes every group as this node knows it, ID set to the group.
func (d *Directory) groupStatus() []PartitionStatus {
	members := d.cfg.Members.Members()
	size := 0 // the cluster's size: members that did not leave (a failed one is still missed)
	for _, m := range members {
		if m.State != StateLeft {
			size++
		}
	}
	out := make([]PartitionStatus, d.cfg.Host.Groups())
	for i := range out {
		g := uint32(i)
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
		case haveRec && liveServer(members, rec.Leader):
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
		out[i] = st
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
