package cluster

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/shardkeeper/shardkeeper/persistence"
)

// progress is a partition leader's own view of how far each follower's log matches its own:
// the last index of the latest AppendEntries the follower acknowledged. hashicorp/raft keeps
// this in its private replication state, so the transport records it as the answers pass.
//
// The reconciler promotes a non-voter only on this view (never on what the member says of
// itself), and /v1/cluster shows each replica's lag from it. Entries are reset when this node
// gains leadership: an old term's figures say nothing about the new one.
//
// It also keeps when each follower last answered an append, heartbeats included: a
// leadership transfer goes only to a follower that answers (see stuck.go).
type progress struct {
	mu      sync.Mutex
	match   map[raft.ServerID]matched
	contact map[raft.ServerID]time.Time
}

// matched is a follower's acknowledged index and the leader's term when it acknowledged it.
type matched struct{ index, term uint64 }

func (p *progress) record(id raft.ServerID, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) {
	p.mu.Lock()
	if p.contact == nil {
		p.contact = map[raft.ServerID]time.Time{}
	}
	p.contact[id] = time.Now()
	p.mu.Unlock()
	if resp == nil || !resp.Success || (req.PrevLogEntry == 0 && len(req.Entries) == 0) {
		return // a heartbeat (or a refusal) says nothing about the follower's log
	}
	last := req.PrevLogEntry
	if n := len(req.Entries); n > 0 {
		last = req.Entries[n-1].Index
	}
	p.mu.Lock()
	if p.match == nil {
		p.match = map[raft.ServerID]matched{}
	}
	p.match[id] = matched{last, req.Term}
	p.mu.Unlock()
}

// Match returns the last index follower id is known to hold, and whether any is known.
func (p *progress) Match(id raft.ServerID) (uint64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, ok := p.match[id]
	return m.index, ok
}

// MatchIn is Match as acknowledged to a leader of term: an earlier term's figure may
// predate a truncation of the follower's log.
func (p *progress) MatchIn(id raft.ServerID, term uint64) (uint64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, ok := p.match[id]
	return m.index, ok && m.term == term
}

// Contact returns when follower id last answered an append, and whether it ever did since
// this node last gained leadership.
func (p *progress) Contact(id raft.ServerID) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.contact[id]
	return t, ok
}

func (p *progress) reset() {
	p.mu.Lock()
	p.match, p.contact = nil, nil
	p.mu.Unlock()
}

// progressTransport is a NetworkTransport that records acknowledged appends into progress.
// It embeds the concrete type so that every optional interface raft looks for (WithClose,
// WithPreVote) stays implemented.
type progressTransport struct {
	*raft.NetworkTransport
	progress *progress
	// stall, when set (tests), runs before each TimeoutNow: a peer that takes the request
	// and does not answer.
	stall atomic.Pointer[func()]
}

func (t *progressTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, req *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	if stall := t.stall.Load(); stall != nil {
		(*stall)()
	}
	return t.NetworkTransport.TimeoutNow(id, target, req, resp)
}

func (t *progressTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if err := guardMerges(id, req); err != nil {
		return err
	}
	err := t.NetworkTransport.AppendEntries(id, target, req, resp)
	if err == nil {
		t.progress.record(id, req, resp)
	}
	return err
}

func (t *progressTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	inner, err := t.NetworkTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	p := &progressPipeline{AppendPipeline: inner, id: id, progress: t.progress,
		out: make(chan raft.AppendFuture), done: make(chan struct{})}
	go p.relay()
	return p, nil
}

// progressPipeline passes the pipeline's completed appends on to raft, recording each.
type progressPipeline struct {
	raft.AppendPipeline
	id       raft.ServerID
	progress *progress
	out      chan raft.AppendFuture
	done     chan struct{}
	once     sync.Once
}

func (p *progressPipeline) relay() {
	in := p.AppendPipeline.Consumer()
	for {
		select {
		case f := <-in:
			if f.Error() == nil {
				p.progress.record(p.id, f.Request(), f.Response())
			}
			select {
			case p.out <- f:
			case <-p.done:
				return
			}
		case <-p.done:
			return
		}
	}
}

func (p *progressPipeline) Consumer() <-chan raft.AppendFuture { return p.out }

func (p *progressPipeline) AppendEntries(req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	if err := guardMerges(p.id, req); err != nil {
		return nil, err
	}
	return p.AppendPipeline.AppendEntries(req, resp)
}

// guardMerges refuses to send a follower a merge entry that does not name it: it holds no
// instance of the group the merge takes in (it was added to the group after the merge) and
// must start from a snapshot taken after it. The host compacts the log past a merge before
// it adds a replica; this is the backstop for a leader that has not yet (a new one, say). Raft
// retries, and sends the snapshot once the log no longer holds the entry.
func guardMerges(id raft.ServerID, req *raft.AppendEntriesRequest) error {
	for _, e := range req.Entries {
		if e.Type != raft.LogCommand {
			continue
		}
		if merge, named := persistence.MergeNames(e.Data, id); merge && !named {
			return fmt.Errorf("entry %d is a merge that %s holds no state for: it must start from a later snapshot", e.Index, id)
		}
	}
	return nil
}

func (p *progressPipeline) Close() error {
	p.once.Do(func() { close(p.done) })
	return p.AppendPipeline.Close()
}
