package cluster

import (
	"sync"

	"github.com/hashicorp/raft"
)

// Leadership as the host sees it: who leads each group, how many this node leads, and
// handing every leadership on before this node stops.

// Leader returns the server id of group g's leader as this node knows it ("" if none).
func (h *Host) Leader(g uint32) string {
	gr := h.group(g)
	if gr == nil {
		return ""
	}
	_, id := gr.raft.LeaderWithID()
	return string(id)
}

// IsLeader reports whether this node leads group g.
func (h *Host) IsLeader(g uint32) bool {
	gr := h.group(g)
	return gr != nil && gr.raft.State() == raft.Leader
}

// Leading counts the groups this node leads.
func (h *Host) Leading() int {
	n := 0
	for _, g := range h.all() {
		if g.raft.State() == raft.Leader {
			n++
		}
	}
	return n
}

// successor is the voter of group g, other than this node, that answered this leader
// within the heartbeat timeout and holds the most of its log; ok is false when none did,
// and others tells whether the group has other voters at all.
func (h *Host) successor(g *group) (to raft.Server, ok, others bool) {
	f := g.raft.GetConfiguration()
	if f.Error() != nil {
		return raft.Server{}, false, true
	}
	var best uint64
	for _, s := range f.Configuration().Servers {
		if s.Suffrage != raft.Voter || string(s.ID) == h.cfg.ServerID {
			continue
		}
		others = true
		if !h.answered(g, s.ID) {
			continue
		}
		if m, _ := g.progress.Match(s.ID); !ok || m > best {
			to, ok, best = s, true, m
		}
	}
	return to, ok, others
}

// TransferLeadership hands every group led here to another voter that answers, and waits
// (bounded by each transfer's own timeout). Used on graceful shutdown.
func (h *Host) TransferLeadership() {
	var wg sync.WaitGroup
	for _, g := range h.all() {
		if g.raft.State() != raft.Leader {
			continue
		}
		to, ok, others := h.successor(g)
		if !ok {
			if others {
				h.cfg.Logger.Warn("leadership transfer on shutdown: no other voter answers", "group", GroupName(g.ID))
			}
			continue // a one-node cluster has nobody to hand it to: not worth a warning
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := g.raft.LeadershipTransferToServer(to.ID, to.Address).Error(); err != nil {
				h.cfg.Logger.Warn("leadership transfer on shutdown", "group", GroupName(g.ID), "to", to.ID, "error", err)
			}
		}()
	}
	wg.Wait()
}
