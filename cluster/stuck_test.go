package cluster

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// A leadership transfer whose TimeoutNow never returns leaves hashicorp/raft's leader
// refusing every write for good (ErrLeadershipTransferInProgress), as a transfer stuck on a
// stopped follower's replication does. The watchdog restarts the group's instance, and the
// group takes writes again within seconds; without it, the leader would refuse for ever.
func TestStuckTransferRestartsTheGroup(t *testing.T) {
	hosts := startThree(t)
	lead := leaderOf(t, 0, hosts...)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	stall := func() { <-release }
	lead.group(0).trans.stall.Store(&stall)

	var to *testHost
	for _, h := range hosts {
		if h != lead {
			to = h
			break
		}
	}
	waitFor(t, "the follower answering the leader", func() bool { return lead.answered(lead.group(0), raft.ServerID(to.ServerID())) })
	if err := lead.Change(0, Action{Kind: TransferLeadership, Server: raft.ServerID(to.ServerID()), Address: RaftAddress(to.Addr(), to.ServerID())}); err == nil {
		t.Fatal("a transfer whose TimeoutNow never returns reported success")
	}
	err := lead.Propose(0, putCmd(1, "k", "stuck")).Error()
	if !errors.Is(err, raft.ErrLeadershipTransferInProgress) {
		t.Fatalf("proposal on the stuck leader: got %v, want ErrLeadershipTransferInProgress", err)
	}
	stuckAt := time.Now()
	waitFor(t, "a write accepted after the watchdog's restart", func() bool {
		for _, h := range hosts {
			if h.IsLeader(0) && h.Propose(0, putCmd(1, "k", "after")).Error() == nil {
				return true
			}
		}
		return false
	})
	if d := time.Since(stuckAt); d > 10*time.Second {
		t.Fatalf("writes resumed only after %s", d)
	}
	sameState(t, 0, hosts...)
}

// A transfer goes only to a voter that answers: one to a stopped follower is refused at
// once, and the leader goes on taking writes (hashicorp/raft would hold every write while
// it tried).
func TestTransferToSilentPeerRefused(t *testing.T) {
	hosts := startThree(t)
	lead := leaderOf(t, 0, hosts...)
	var gone *testHost
	for _, h := range hosts {
		if h != lead {
			gone = h
			break
		}
	}
	id, addr := raft.ServerID(gone.ServerID()), RaftAddress(gone.Addr(), gone.ServerID())
	gone.stop()
	waitFor(t, "the stopped follower to fall silent", func() bool { return !lead.answered(lead.group(0), id) })
	err := lead.Change(0, Action{Kind: TransferLeadership, Server: id, Address: addr})
	if err == nil || !strings.Contains(err.Error(), "has not answered") {
		t.Fatalf("transfer to a stopped follower: got %v, want a refusal", err)
	}
	start := time.Now()
	if err := lead.Propose(0, putCmd(2, "k", "still")).Error(); err != nil {
		t.Fatalf("write after the refused transfer: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("write after the refused transfer took %s", d)
	}
}
