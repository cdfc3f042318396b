package cluster

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"github.com/shardkeeper/shardkeeper/persistence"
)

// The reconciler's decisions, apart from their effects: given what a Raft group's leader
// knows, which one configuration change (or leadership transfer) comes next. Pure functions,
// so every rule has a table case in testdata/decide.

// ActionKind is the kind of change a decision asks for.
type ActionKind int

const (
	NoAction ActionKind = iota
	RemoveServer
	AddNonvoter
	PromoteVoter
	TransferLeadership // hand this node's leadership of the group to Server
)

// Action is one decided change of a group's configuration or leadership.
type Action struct {
	Kind    ActionKind
	Server  raft.ServerID
	Address raft.ServerAddress // for AddNonvoter, PromoteVoter, TransferLeadership
	Reason  string
}

func (a Action) String() string {
	verb := map[ActionKind]string{NoAction: "none", RemoveServer: "remove", AddNonvoter: "add-nonvoter",
		PromoteVoter: "promote", TransferLeadership: "transfer-leadership"}[a.Kind]
	if a.Kind == NoAction {
		return verb
	}
	return fmt.Sprintf("%s %s: %s", verb, a.Server, a.Reason)
}

// Situation is what a group's leader knows when it decides.
type Situation struct {
	Self    raft.ServerID
	Servers []raft.Server // the group's latest configuration
	Members []Member      // every member gossip knows, with its state
	// Desired is the group's desired replica set (Desired over the live members).
	Desired   []NodeMeta
	Replicas  int
	DeadGrace time.Duration
	Now       time.Time
	// Missing holds, for servers of the configuration that gossip does not know at all,
	// when the reconciler first missed them.
	Missing map[raft.ServerID]time.Time
	// Match and LastIndex are the leader's own view of replication (see progress).
	Match     map[raft.ServerID]uint64
	LastIndex uint64
}

// caughtUpLag is how many entries a non-voter may trail the leader and still be promoted.
const caughtUpLag = 64

// Decide returns the next change that converges the group toward its desired replicas
// (Consul's autopilot is the model), in this order:
//
//  1. A server whose member has been failed or left for DeadGrace, is unknown to gossip for
//     as long, or came back with a new incarnation (its log is lost), is removed — a voter
//     only while the voters left still reach a majority of R (a dead voter is better than
//     too few). Non-voters go first.
//  2. A live non-voter that is not desired is removed (it holds no vote, so at no risk).
//  3. A desired member missing from the configuration joins as a non-voter.
//  4. A desired non-voter is promoted once the leader has seen it hold the log up to
//     caughtUpLag entries behind — the leader's own view, never the member's word.
//  5. Only when every desired member votes: an undesired live voter is removed; if that is
//     this node, it hands its leadership to a desired voter first.
func Decide(s Situation) Action {
	members := map[string]Member{}
	for _, m := range s.Members {
		members[m.ID] = m
	}
	desired := map[raft.ServerID]NodeMeta{}
	for _, d := range s.Desired {
		desired[raft.ServerID(d.ServerID)] = d
	}
	suffrage := map[raft.ServerID]raft.ServerSuffrage{}
	voters := 0
	for _, sv := range s.Servers {
		suffrage[sv.ID] = sv.Suffrage
		if sv.Suffrage == raft.Voter {
			voters++
		}
	}
	// Non-voters before voters, then by id: decisions must not depend on map order.
	servers := append([]raft.Server(nil), s.Servers...)
	sort.SliceStable(servers, func(i, j int) bool {
		if vi, vj := servers[i].Suffrage == raft.Voter, servers[j].Suffrage == raft.Voter; vi != vj {
			return !vi
		}
		return servers[i].ID < servers[j].ID
	})

	// 1. Gone servers.
	floor := s.Replicas/2 + 1
	for _, sv := range servers {
		gone, why := goneSince(sv.ID, members, s.Missing, s.Now)
		if gone.IsZero() && why == "" {
			continue // a live member
		}
		if !gone.IsZero() && s.Now.Sub(gone) < s.DeadGrace {
			continue
		}
		if sv.Suffrage == raft.Voter && voters-1 < floor {
			continue
		}
		return Action{Kind: RemoveServer, Server: sv.ID, Reason: why}
	}
	// 2. Undesired live non-voters.
	for _, sv := range servers {
		if _, ok := desired[sv.ID]; !ok && sv.Suffrage != raft.Voter {
			return Action{Kind: RemoveServer, Server: sv.ID, Reason: "non-voter not among the desired replicas"}
		}
	}
	// 3. Missing desired members.
	for _, d := range s.Desired {
		if _, ok := suffrage[raft.ServerID(d.ServerID)]; !ok {
			return Action{Kind: AddNonvoter, Server: raft.ServerID(d.ServerID), Address: RaftAddress(d.Raft, d.ServerID),
				Reason: "desired replica"}
		}
	}
	// 4. Caught-up desired non-voters.
	for _, d := range s.Desired {
		id := raft.ServerID(d.ServerID)
		if suffrage[id] != raft.Nonvoter {
			continue
		}
		if m, ok := s.Match[id]; ok && m+caughtUpLag >= s.LastIndex {
			return Action{Kind: PromoteVoter, Server: id, Address: RaftAddress(d.Raft, d.ServerID),
				Reason: fmt.Sprintf("caught up (holds %d of %d)", m, s.LastIndex)}
		}
	}
	// 5. Undesired live voters, once every desired member votes.
	for _, d := range s.Desired {
		if suffrage[raft.ServerID(d.ServerID)] != raft.Voter {
			return Action{}
		}
	}
	for _, sv := range servers {
		if _, ok := desired[sv.ID]; ok {
			continue
		}
		if _, why := goneSince(sv.ID, members, s.Missing, s.Now); why != "" {
			continue // gone: rule 1 decides when it goes
		}
		if sv.ID != s.Self {
			return Action{Kind: RemoveServer, Server: sv.ID, Reason: "voter not among the desired replicas"}
		}
		for _, d := range s.Desired {
			return Action{Kind: TransferLeadership, Server: raft.ServerID(d.ServerID), Address: RaftAddress(d.Raft, d.ServerID),
				Reason: "this node is not among the desired replicas"}
		}
	}
	return Action{}
}

// goneSince tells whether server id is gone: since when (zero for "long ago", as for a
// re-incarnated node; now for a server first missed now) and why; a live member gives
// (zero, "").
func goneSince(id raft.ServerID, members map[string]Member, missing map[raft.ServerID]time.Time, now time.Time) (time.Time, string) {
	mem, ok := members[persistence.NodeOfServer(string(id))]
	switch {
	case !ok:
		if t, ok := missing[id]; ok {
			return t, "unknown to gossip"
		}
		return now, "unknown to gossip"
	case mem.ServerID != string(id) && !mem.Gone():
		return time.Time{}, "its node came back with a new data directory"
	case mem.ServerID != string(id):
		return mem.Since, "member " + mem.State // an older incarnation of a gone node
	case mem.Gone():
		return mem.Since, "member " + mem.State
	}
	return time.Time{}, ""
}

// BalanceSituation is what a node knows when it decides whether to hand a leadership away.
type BalanceSituation struct {
	Self string // server id
	// Leading counts, per live member's server id, the Raft groups it leads (from gossip).
	Leading map[string]int
	// Groups is G, the cluster's groups (not the ones with a replica here: on more nodes than
	// replicas, a node holds only some).
	Groups int
	// Led are the groups this node leads, with their configurations.
	Led []GroupInfo
	// Addresses maps live members' server ids to their Raft addresses.
	Addresses map[string]raft.ServerAddress
	// Unfit maps the server ids of members that must not lead to why: "disk-low" (it refuses
	// writes) or "retiring" (it was told to stop for good).
	Unfit map[string]string
	// Others are the groups led elsewhere, each with its leader and configuration (from
	// gossip).
	Others []GroupInfo
}

// DecideBalance picks one group led here to hand to a voter that leads fewer than its
// share, when this node leads more than its share (⌈G / live members⌉), or one step of a
// chain towards a node no direct transfer reaches (chainBalance). ok is false when no
// transfer is due.
//
// A node unfit to lead (Unfit: its disk is low, or it is retiring) hands any group it leads to
// a fit voter, whatever the shares; no leadership is handed to an unfit node.
func DecideBalance(s BalanceSituation) (g uint32, a Action, ok bool) {
	if len(s.Leading) < 2 {
		return 0, Action{}, false
	}
	share := (s.Groups + len(s.Leading) - 1) / len(s.Leading)
	selfUnfit := s.Unfit[s.Self] != ""
	if len(s.Led) <= share && !selfUnfit {
		return chainBalance(s, share)
	}
	for _, in := range s.Led {
		for _, sv := range in.Servers {
			n, live := s.Leading[string(sv.ID)]
			if !live || sv.Suffrage != raft.Voter || string(sv.ID) == s.Self || s.Unfit[string(sv.ID)] != "" || (n+1 > share && !selfUnfit) {
				continue
			}
			reason := fmt.Sprintf("this node leads %d, more than its share of %d", len(s.Led), share)
			switch s.Unfit[s.Self] {
			case "":
			case "retiring":
				reason = "this node is retiring"
			default:
				reason = "this node's disk is low"
			}
			return in.ID, Action{Kind: TransferLeadership, Server: sv.ID, Address: s.Addresses[string(sv.ID)], Reason: reason}, true
		}
	}
	return chainBalance(s, share)
}

// chainBalance moves a leadership one step along a chain. A node above its share may find
// no voter with room in the groups it leads, while a node below the floor (⌊G / live
// members⌋) votes in none of them: no direct transfer evens them out. The leaders and their
// groups' voters make a graph (a leader may hand a group to any of its live, fit voters);
// every node finds in it the same shortest path from a node above its share to a node below
// the floor (breadth first, from the lowest server ids), and the node on the path just before
// its end hands that group on. Its own count falls below the floor then, and the next pass
// moves the path's next step; so leadership flows down the path until the node above its
// share hands one over. It moves nothing while nobody is above the share, so it cannot churn
// a balanced cluster, and it hands a group only to a node leading fewer than this one.
func chainBalance(s BalanceSituation, share int) (uint32, Action, bool) {
	floor := s.Groups / len(s.Leading)
	if s.Unfit[s.Self] != "" || len(s.Led) == 0 || len(s.Led) > share || floor == 0 {
		return 0, Action{}, false
	}
	type hop struct {
		to    string
		group uint32
	}
	edges := map[string][]hop{}
	addr := map[string]raft.ServerAddress{}
	add := func(in GroupInfo, leader string) {
		for _, sv := range in.Servers {
			v := string(sv.ID)
			if _, live := s.Leading[v]; !live || v == leader || sv.Suffrage != raft.Voter || s.Unfit[v] != "" {
				continue
			}
			edges[leader] = append(edges[leader], hop{v, in.ID})
			if leader == s.Self {
				addr[v] = s.Addresses[v]
			}
		}
	}
	for _, in := range s.Led {
		add(in, s.Self)
	}
	for _, in := range s.Others {
		if in.Leader != s.Self {
			add(in, in.Leader)
		}
	}
	var sources []string
	for id, n := range s.Leading {
		if n > share {
			sources = append(sources, id)
		}
	}
	slices.Sort(sources)
	for _, hs := range edges {
		slices.SortFunc(hs, func(a, b hop) int {
			if a.to != b.to {
				return strings.Compare(a.to, b.to)
			}
			return int(a.group) - int(b.group)
		})
	}
	// Breadth first from every source at once: prev[v] is the hop that reached v.
	type step struct {
		from  string
		group uint32
	}
	prev := map[string]step{}
	seen := map[string]bool{}
	queue := slices.Clone(sources)
	for _, src := range sources {
		seen[src] = true
	}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for _, h := range edges[u] {
			if seen[h.to] {
				continue
			}
			seen[h.to], prev[h.to] = true, step{u, h.group}
			if s.Leading[h.to] < floor {
				// The path's last hop: prev[h.to].from hands the group to h.to.
				last := prev[h.to]
				if last.from != s.Self || s.Leading[h.to] >= len(s.Led) {
					return 0, Action{}, false
				}
				return last.group, Action{Kind: TransferLeadership, Server: raft.ServerID(h.to), Address: addr[h.to],
					Reason: fmt.Sprintf("a node leads more than its share of %d and can hand one to this node, whose voter %s leads %d, fewer than %d", share, h.to, s.Leading[h.to], floor)}, true
			}
			queue = append(queue, h.to)
		}
	}
	return 0, Action{}, false
}

// SplitSituation is what a node knows when it decides whether to split a group it leads.
type SplitSituation struct {
	Partitions int // P
	// Groups are the cluster's groups as this node knows them (each once, with its range).
	Groups []persistence.Group
	// Led are the groups this node leads, with their configurations.
	Led []GroupInfo
	// Nodes counts the live members that are not retiring.
	Nodes int
	// Capable is false while any live member runs a release that cannot apply a split: it
	// would refuse the entry its group's other replicas apply, and diverge.
	Capable bool
	// Splits tells, by server id, the members (failed ones too, as gossip last saw them)
	// whose release applies splits. Every server of the group's configuration must: a
	// replica that is down now applies the entry when it comes back.
	Splits map[string]bool
	// PerNode is the number of groups per node the cluster aims for.
	PerNode int
}

// DecideSplit decides whether this node splits a group it leads: while the cluster has fewer
// groups than PerNode per node (at most P), the group with the most partitions (the lowest
// first partition among equals) is cut in the middle, by its leader, once its configuration
// is settled (voters only: no replica on its way in) and every one of its servers runs a
// release that applies splits. Every node computes the same group from
// the same view, so one split happens at a time, and the next is decided once gossip shows
// the result. ok is false when no split is due here.
func DecideSplit(s SplitSituation) (g, at uint32, reason string, ok bool) {
	target := min(s.Partitions, s.PerNode*s.Nodes)
	if !s.Capable || len(s.Groups) >= target {
		return 0, 0, "", false
	}
	var big persistence.Group
	for _, gr := range s.Groups {
		if n, b := gr.End-gr.First, big.End-big.First; n > b || (n == b && gr.First < big.First) {
			big = gr
		}
	}
	if big.End-big.First < 2 {
		return 0, 0, "", false
	}
	for _, in := range s.Led {
		if in.ID != big.ID || in.First != big.First || in.End != big.End {
			continue
		}
		for _, sv := range in.Servers {
			if sv.Suffrage != raft.Voter || !s.Splits[string(sv.ID)] {
				return 0, 0, "", false
			}
		}
		return big.ID, big.First + (big.End-big.First)/2,
			fmt.Sprintf("%d groups for %d nodes, fewer than %d; this is the largest", len(s.Groups), s.Nodes, target), true
	}
	return 0, 0, "", false
}

// MergeSituation is what a node knows when it decides whether to merge two groups.
type MergeSituation struct {
	// Groups are the cluster's groups as this node knows them, each with its latest
	// configuration (Directory.Configurations) and range.
	Groups []GroupInfo
	// Led are the groups this node leads, with their configurations.
	Led []GroupInfo
	// Leaders maps each group to its leader's server id, as this node knows it.
	Leaders map[uint32]string
	// Nodes is the most live members that were not retiring over the last MergeDelay: a
	// cluster merges only what it has not needed for that long, so that a node that is
	// restarting, or a shrink followed by a growth, does not merge and split back.
	Nodes int
	// Merges tells, by server id, the members that are alive and whose release applies
	// merges.
	Merges  map[string]bool
	PerNode int
}

// MergeStep is what DecideMerge asks of this node.
type MergeStep int

const (
	NoMerge     MergeStep = iota
	MergeHere             // this node leads both groups: merge R into L
	HandRToLeft           // this node leads R only: hand its leadership to L's leader
)

// DecideMerge decides whether two adjacent groups merge while the cluster has more than
// PerNode groups per node (over Nodes): the adjacent pair with the fewest partitions (the
// lowest first partition among equals) whose configurations hold the same voters and no
// other server, all of them alive and running a release that applies merges. Every node picks the
// same pair from the same view. The node leading both merges them; the node leading only
// the right one hands it to the left one's leader first. step is NoMerge when nothing is due
// here.
func DecideMerge(s MergeSituation) (l, r GroupInfo, step MergeStep, reason string) {
	if s.PerNode <= 0 || s.Nodes <= 0 || len(s.Groups) <= s.PerNode*s.Nodes {
		return l, r, NoMerge, ""
	}
	groups := slices.Clone(s.Groups)
	slices.SortFunc(groups, func(a, b GroupInfo) int { return int(a.First) - int(b.First) })
	best := -1
	for i := 0; i+1 < len(groups); i++ {
		a, b := groups[i], groups[i+1]
		if a.End != b.First || a.End <= a.First || b.End <= b.First || !mergeable(a.Servers, b.Servers, s.Merges) {
			continue
		}
		if best < 0 || b.End-a.First < groups[best+1].End-groups[best].First {
			best = i
		}
	}
	if best < 0 {
		return l, r, NoMerge, ""
	}
	l, r = groups[best], groups[best+1]
	reason = fmt.Sprintf("%d groups for %d nodes, more than %d; these are the smallest adjacent pair", len(s.Groups), s.Nodes, s.PerNode*s.Nodes)
	led := map[uint32]GroupInfo{}
	for _, in := range s.Led {
		led[in.ID] = in
	}
	lIn, leadsL := led[l.ID]
	rIn, leadsR := led[r.ID]
	switch {
	case leadsL && leadsR && lIn.End == rIn.First && !lIn.Frozen && !rIn.Frozen && mergeable(lIn.Servers, rIn.Servers, s.Merges):
		return lIn, rIn, MergeHere, reason
	case leadsR && !leadsL && s.Leaders[l.ID] != "" && slices.ContainsFunc(rIn.Servers, func(sv raft.Server) bool {
		return string(sv.ID) == s.Leaders[l.ID] && sv.Suffrage == raft.Voter
	}):
		return l, rIn, HandRToLeft, reason
	}
	return l, r, NoMerge, ""
}

// mergeable reports whether two configurations hold the same voters and no other server,
// every one of them running a release that applies merges.
func mergeable(a, b []raft.Server, merges map[string]bool) bool {
	return persistence.SameVoters(a, b) && !slices.ContainsFunc(a, func(s raft.Server) bool { return !merges[string(s.ID)] })
}

// SteerMerge picks the pair of groups whose replicas placement puts together so that they can
// merge: while a merge is due (more than PerNode groups per node over Nodes), the adjacent
// pair with the fewest partitions (the lowest first partition among equals). Rendezvous
// placement alone seldom puts two neighbours on the same R of more than R nodes, and a
// cluster shrunk to them would keep every group. Every node steers the same pair from the
// same view; the right group takes the left one's replicas, and the merge follows. The pair
// stays steered once its voters coincide — whatever the voters, until it merges — or
// placement would pull it apart again before the merge could start. ok is false when nothing
// is to steer.
func SteerMerge(s MergeSituation) (l, r uint32, ok bool) {
	if s.PerNode <= 0 || s.Nodes <= 0 || len(s.Groups) <= s.PerNode*s.Nodes {
		return 0, 0, false
	}
	groups := slices.Clone(s.Groups)
	slices.SortFunc(groups, func(a, b GroupInfo) int { return int(a.First) - int(b.First) })
	best := -1
	for i := 0; i+1 < len(groups); i++ {
		a, b := groups[i], groups[i+1]
		if a.End != b.First || a.End <= a.First || b.End <= b.First {
			continue
		}
		if best < 0 || b.End-a.First < groups[best+1].End-groups[best].First {
			best = i
		}
	}
	if best < 0 {
		return 0, 0, false
	}
	return groups[best].ID, groups[best+1].ID, true
}
