package cluster

import (
	"sync"

	"github.com/hashicorp/raft"
)

// progress is a partition leader's own view of how far each follower's log matches its own:
// the last index of the latest AppendEntries the follower acknowledged. hashicorp/raft keeps
// this in its private replication state, so the transport records it as the answers pass.
//
// The reconciler promotes a non-voter only on this view (never on what the member says of
// itself), and /v1/cluster shows each replica's lag from it. Entries are reset when this node
// gains leadership: an old term's figures say nothing about the new one.
type progress struct {
	mu    sync.Mutex
	match map[raft.ServerID]uint64
}

func (p *progress) record(id raft.ServerID, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) {
	if resp == nil || !resp.Success || (req.PrevLogEntry == 0 && len(req.Entries) == 0) {
		return // a heartbeat (or a refusal) says nothing about the follower's log
	}
	last := req.PrevLogEntry
	if n := len(req.Entries); n > 0 {
		last = req.Entries[n-1].Index
	}
	p.mu.Lock()
	if p.match == nil {
		p.match = map[raft.ServerID]uint64{}
	}
	p.match[id] = last
	p.mu.Unlock()
}

// Match returns the last index follower id is known to hold, and whether any is known.
func (p *progress) Match(id raft.ServerID) (uint64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, ok := p.match[id]
	return m, ok
}

func (p *progress) reset() {
	p.mu.Lock()
	p.match = nil
	p.mu.Unlock()
}

// progressTransport is a NetworkTransport that records acknowledged appends into progress.
// It embeds the concrete type so that every optional interface raft looks for (WithClose,
// WithPreVote) stays implemented.
type progressTransport struct {
	*raft.NetworkTransport
	progress *progress
}

func (t *progressTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, req *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
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

func (p *progressPipeline) Close() error {
	p.once.Do(func() { close(p.done) })
	return p.AppendPipeline.Close()
}
