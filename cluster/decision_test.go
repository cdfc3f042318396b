package cluster

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/hashicorp/raft"
	"github.com/shardkeeper/shardkeeper/persistence"
)

// The reconciler's rules, case by case (testdata/decide and testdata/balance). Times are
// seconds from an epoch; a server id is node@incarnation.
//
//	decide [p=0] [replicas=3] [grace=30s] now=<s> [last=<index>] [self=<server id>]
//	config: a@1=voter b@1=nonvoter …          the partition's configuration (self: first)
//	members: a@1=alive c@1=failed@40 …        gossip's view: state[@since] (retiring: alive, told to stop for good)
//	match: b@1=990 …                          the leader's view of each follower's log
//	missing: x@1=10 …                         servers unknown to gossip, first missed at
//
//	balance groups=16 self=a@1
//	leading: a@1=7 b@1=5 c@1=4                live members and how many groups each leads
//	led: 0=a@1,b@1,c@1 3=a@1,b@1 …            groups led here and their voters
//	unfit: b@1=disk-low c@1=retiring …        members that must not lead, and why
//	others: 7=b@1:b@1,c@1,d@1 …               groups led elsewhere: leader and voters
//
//	split partitions=16 nodes=6 [per-node=1] [incapable]
//	groups: 0=0-5 1=5-10 …                    the cluster's groups: id=first-end
//	led: 1=5-10 …                             groups led here: id=first-end[,nonvoter|,old-voter]
func TestDecide(t *testing.T) {
	datadriven.RunTest(t, "testdata/decide", func(t *testing.T, td *datadriven.TestData) string {
		if td.Cmd != "decide" {
			t.Fatalf("unknown command %q", td.Cmd)
		}
		var p, replicas, now, last int
		replicas = 3
		grace := "30s"
		td.MaybeScanArgs(t, "p", &p)
		td.MaybeScanArgs(t, "replicas", &replicas)
		td.MaybeScanArgs(t, "grace", &grace)
		td.ScanArgs(t, "now", &now)
		td.MaybeScanArgs(t, "last", &last)
		g, err := time.ParseDuration(grace)
		if err != nil {
			t.Fatal(err)
		}
		s := Situation{Replicas: replicas, DeadGrace: g, Now: at(now), LastIndex: uint64(last),
			Match: map[raft.ServerID]uint64{}, Missing: map[raft.ServerID]time.Time{}}
		lines := parseLines(t, td.Input)
		for _, kv := range lines["config"] {
			suffrage := map[string]raft.ServerSuffrage{"voter": raft.Voter, "nonvoter": raft.Nonvoter}[kv[1]]
			s.Servers = append(s.Servers, raft.Server{ID: raft.ServerID(kv[0]), Suffrage: suffrage, Address: raft.ServerAddress(kv[0])})
		}
		s.Self = s.Servers[0].ID
		var self string
		if td.MaybeScanArgs(t, "self", &self) {
			s.Self = raft.ServerID(self)
		}
		var alive []NodeMeta
		for _, kv := range lines["members"] {
			state, since, _ := strings.Cut(kv[1], "@")
			sec, _ := strconv.Atoi(since)
			m := Member{NodeMeta: testMeta(kv[0]), State: state, Since: at(sec)}
			if state == "retiring" { // alive, told to stop for good
				m.State, m.Retiring = StateAlive, true
			}
			s.Members = append(s.Members, m)
			if !m.Gone() {
				alive = append(alive, m.NodeMeta)
			}
		}
		for _, kv := range lines["match"] {
			n, _ := strconv.ParseUint(kv[1], 10, 64)
			s.Match[raft.ServerID(kv[0])] = n
		}
		for _, kv := range lines["missing"] {
			sec, _ := strconv.Atoi(kv[1])
			s.Missing[raft.ServerID(kv[0])] = at(sec)
		}
		s.Desired = Desired(uint32(p), alive, replicas)
		var desired []string
		for _, d := range s.Desired {
			desired = append(desired, d.ServerID)
		}
		return fmt.Sprintf("desired: %s\n%s\n", strings.Join(desired, " "), Decide(s))
	})
}

func TestDecideBalance(t *testing.T) {
	datadriven.RunTest(t, "testdata/balance", func(t *testing.T, td *datadriven.TestData) string {
		var s BalanceSituation
		td.ScanArgs(t, "groups", &s.Groups)
		td.ScanArgs(t, "self", &s.Self)
		lines := parseLines(t, td.Input)
		s.Leading, s.Addresses = map[string]int{}, map[string]raft.ServerAddress{}
		for _, kv := range lines["leading"] {
			n, _ := strconv.Atoi(kv[1])
			s.Leading[kv[0]] = n
			s.Addresses[kv[0]] = RaftAddress(testMeta(kv[0]).Raft, kv[0])
		}
		s.Unfit = map[string]string{}
		for _, kv := range lines["unfit"] {
			s.Unfit[kv[0]] = kv[1]
		}
		for _, kv := range lines["led"] {
			p, _ := strconv.Atoi(kv[0])
			in := GroupInfo{ID: uint32(p), Leader: s.Self}
			for _, v := range strings.Split(kv[1], ",") {
				in.Servers = append(in.Servers, raft.Server{ID: raft.ServerID(v), Suffrage: raft.Voter})
			}
			s.Led = append(s.Led, in)
		}
		for _, kv := range lines["others"] {
			g, _ := strconv.Atoi(kv[0])
			leader, voters, _ := strings.Cut(kv[1], ":")
			in := GroupInfo{ID: uint32(g), Leader: leader}
			for _, v := range strings.Split(voters, ",") {
				in.Servers = append(in.Servers, raft.Server{ID: raft.ServerID(v), Suffrage: raft.Voter})
			}
			s.Others = append(s.Others, in)
		}
		p, a, ok := DecideBalance(s)
		if !ok {
			return "none\n"
		}
		return fmt.Sprintf("group %d: %s (to %s)\n", p, a, a.Address)
	})
}

func TestDecideSplit(t *testing.T) {
	datadriven.RunTest(t, "testdata/split", func(t *testing.T, td *datadriven.TestData) string {
		s := SplitSituation{PerNode: 1, Capable: !td.HasArg("incapable"), Splits: map[string]bool{"a@1": true, "b@1": true}}
		td.ScanArgs(t, "partitions", &s.Partitions)
		td.ScanArgs(t, "nodes", &s.Nodes)
		td.MaybeScanArgs(t, "per-node", &s.PerNode)
		span := func(id, r string) persistence.Group {
			g, _ := strconv.ParseUint(id, 0, 32)
			first, end, _ := strings.Cut(r, "-")
			f, _ := strconv.Atoi(first)
			e, _ := strconv.Atoi(end)
			return persistence.Group{ID: uint32(g), First: uint32(f), End: uint32(e)}
		}
		lines := parseLines(t, td.Input)
		for _, kv := range lines["groups"] {
			s.Groups = append(s.Groups, span(kv[0], kv[1]))
		}
		for _, kv := range lines["led"] {
			r, extra, _ := strings.Cut(kv[1], ",")
			g := span(kv[0], r)
			in := GroupInfo{ID: g.ID, First: g.First, End: g.End, Servers: []raft.Server{{ID: "a@1", Suffrage: raft.Voter}}}
			switch extra {
			case "nonvoter":
				in.Servers = append(in.Servers, raft.Server{ID: "b@1", Suffrage: raft.Nonvoter})
			case "old-voter": // a voter whose release does not apply splits (down, say)
				in.Servers = append(in.Servers, raft.Server{ID: "o@1", Suffrage: raft.Voter})
			}
			s.Led = append(s.Led, in)
		}
		g, at, why, ok := DecideSplit(s)
		if !ok {
			return "none\n"
		}
		return fmt.Sprintf("split %#x at %d: %s\n", g, at, why)
	})
}

func at(sec int) time.Time { return time.Unix(1_000_000+int64(sec), 0) }

func testMeta(serverID string) NodeMeta {
	id := persistence.NodeOfServer(serverID)
	return NodeMeta{ID: id, ServerID: serverID, Raft: id + ":7000"}
}

// parseLines reads "key: a=b c=d" lines into key → [[a b] [c d]].
func parseLines(t *testing.T, input string) map[string][][2]string {
	out := map[string][][2]string{}
	for _, line := range strings.Split(input, "\n") {
		key, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		for _, f := range strings.Fields(rest) {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				t.Fatalf("bad item %q in line %q", f, line)
			}
			out[strings.TrimSpace(key)] = append(out[strings.TrimSpace(key)], [2]string{k, v})
		}
	}
	return out
}
