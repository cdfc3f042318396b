package cluster

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/shardkeeper/shardkeeper/persistence"
)

// fakeRaft is an in-memory raftGroups/localRaft: groups as given (one partition each unless
// layout says otherwise), changes recorded.
type fakeRaft struct {
	mu      sync.Mutex
	self    string
	parts   []GroupInfo
	layout  persistence.Layout
	changes []string
	watch   func(g uint32, leader string)
}

func (f *fakeRaft) ServerID() string { return f.self }
func (f *fakeRaft) Spans() []persistence.Group {
	l := f.Layout()
	out := make([]persistence.Group, len(f.parts))
	for i := range out {
		out[i] = l.Group(uint32(i))
	}
	return out
}
func (f *fakeRaft) WatchSpans(func()) {}
func (f *fakeRaft) Split(g, at uint32, _ time.Duration) (persistence.Group, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.changes = append(f.changes, fmt.Sprintf("%d split at %d", g, at))
	return persistence.Group{}, nil
}
func (f *fakeRaft) Merge(l, r uint32, _ time.Duration) (persistence.Group, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.changes = append(f.changes, fmt.Sprintf("%d merge %d", l, r))
	return persistence.Group{}, nil
}
func (f *fakeRaft) ResolveFreeze() (int, error)           { return 0, nil }
func (f *fakeRaft) EnsureGroup(g persistence.Group) error { return nil }
func (f *fakeRaft) Layout() persistence.Layout {
	if f.layout.Partitions == 0 {
		return persistence.Layout{Partitions: len(f.parts)}
	}
	return f.layout
}
func (f *fakeRaft) Info(p uint32) GroupInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	if int(p) >= len(f.parts) {
		return GroupInfo{ID: p} // none here, as Host says
	}
	return f.parts[p]
}
func (f *fakeRaft) Leader(p uint32) string { return f.Info(p).Leader }
func (f *fakeRaft) IsLeader(p uint32) bool { return f.Info(p).Leader == f.self }
func (f *fakeRaft) Leading() int {
	n := 0
	for p := range f.parts {
		if f.IsLeader(uint32(p)) {
			n++
		}
	}
	return n
}
func (f *fakeRaft) HasState() bool                                { return true }
func (f *fakeRaft) WatchLeaders(fn func(g uint32, leader string)) { f.watch = fn }
func (f *fakeRaft) set(p uint32, fn func(*GroupInfo)) {
	f.mu.Lock()
	fn(&f.parts[p])
	f.mu.Unlock()
}
func (f *fakeRaft) Change(p uint32, a Action) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.changes = append(f.changes, fmt.Sprintf("%d %s", p, a))
	return nil
}

// fakeMembers is an in-memory member view.
type fakeMembers struct {
	mu         sync.Mutex
	members    []Member
	broadcasts map[string][]byte
}

func (f *fakeMembers) Members() []Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Member(nil), f.members...)
}
func (f *fakeMembers) Alive() []NodeMeta {
	var out []NodeMeta
	for _, m := range f.Members() {
		if !m.Gone() {
			out = append(out, m.NodeMeta)
		}
	}
	return out
}
func (f *fakeMembers) Update(func(*NodeMeta))   {}
func (f *fakeMembers) Local() NodeMeta          { return NodeMeta{} }
func (f *fakeMembers) Changes() <-chan struct{} { return nil }
func (f *fakeMembers) Broadcast(key string, msg []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.broadcasts == nil {
		f.broadcasts = map[string][]byte{}
	}
	f.broadcasts[key] = msg
}
func (f *fakeMembers) takeBroadcasts() map[string][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.broadcasts
	f.broadcasts = nil
	return b
}

func voters(ids ...string) []raft.Server {
	var out []raft.Server
	for _, id := range ids {
		out = append(out, raft.Server{ID: raft.ServerID(id), Suffrage: raft.Voter, Address: RaftAddress(testMeta(id).Raft, id)})
	}
	return out
}

func alive(ids ...string) []Member {
	var out []Member
	for _, id := range ids {
		out = append(out, Member{NodeMeta: testMeta(id), State: StateAlive})
	}
	return out
}
