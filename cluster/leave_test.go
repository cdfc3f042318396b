package cluster

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
)

// A retiring node waits for the groups that list it while others are there to take its
// replica, and for those whose quorum its exit would take; when too few others are left (a
// 3-node cluster losing one node, or stopping as a whole) nothing moves and it waits for
// nothing.
func TestAwaitingHandOff(t *testing.T) {
	all := nodes(5)
	leaving := func(ms []NodeMeta, ids ...string) []NodeMeta {
		out := slices.Clone(ms)
		for i := range out {
			out[i].Retiring = slices.Contains(ids, out[i].ID)
		}
		return out
	}
	// Group g lists the nodes the placement over all five puts it on.
	var configs []GroupConfig
	holds := map[string][]uint32{}
	ids := make([]uint32, 16)
	for i := range ids {
		ids[i] = uint32(i)
	}
	placement := Placement(ids, all, 3)
	for g := range uint32(16) {
		c := GroupConfig{ID: g}
		for _, d := range placement[g] {
			c.Servers = append(c.Servers, raft.Server{ID: raft.ServerID(d.ServerID), Suffrage: raft.Voter})
			holds[d.ID] = append(holds[d.ID], g)
		}
		configs = append(configs, c)
	}

	alive := leaving(all, "n1")
	got := AwaitingHandOff(configs, alive, 3, alive[0])
	if !slices.Equal(got, holds["n1"]) || len(got) == 0 {
		t.Fatalf("n1 retiring from five nodes waits for %v, want every group it holds %v", got, holds["n1"])
	}
	// Once a group's leader has removed it, that group no longer waits.
	for i := range configs {
		if configs[i].ID == holds["n1"][0] {
			configs[i].Servers = slices.DeleteFunc(configs[i].Servers, func(s raft.Server) bool { return s.ID == "n1@x" })
		}
	}
	if got := AwaitingHandOff(configs, alive, 3, alive[0]); !slices.Equal(got, holds["n1"][1:]) {
		t.Fatalf("after one removal n1 waits for %v, want %v", got, holds["n1"][1:])
	}

	// A retiring node the placement still wants (too few others to take its replica) waits
	// while its exit would take a group's quorum: here n1 already left and is still listed
	// (the dead-member grace keeps it), so n2's exit would leave 2 voters of 4 up.
	up := leaving(all[1:4], "n2") // n2 retiring, n3 and n4 up; n1 and n5 gone
	quorum := []GroupConfig{{ID: 0, Servers: voters("n1@x", "n2@x", "n3@x", "n4@x")}}
	if got := AwaitingHandOff(quorum, up, 3, up[0]); !slices.Equal(got, []uint32{0}) {
		t.Fatalf("n2 would leave 2 of 4 voters up; it waits for %v, want [0]", got)
	}
	// Once the departed voter is removed, 2 of 3 are left: a quorum, so it goes.
	quorum[0].Servers = voters("n2@x", "n3@x", "n4@x")
	if got := AwaitingHandOff(quorum, up, 3, up[0]); len(got) != 0 {
		t.Fatalf("n2 would leave 2 of 3 voters up; it waits for %v, want nothing", got)
	}
	// Two retiring at once do not count on each other: with n3 retiring too, n2's exit
	// would leave one voter of three that stays.
	quorum[0].Servers = voters("n2@x", "n3@x", "n4@x")
	both := leaving(all[1:4], "n2", "n3")
	if got := AwaitingHandOff(quorum, both, 3, both[0]); !slices.Equal(got, []uint32{0}) {
		t.Fatalf("n2 and n3 retiring from n2, n3, n4: n2 waits for %v, want [0]", got)
	}
	// When every member left is retiring, the cluster is stopping: nobody waits.
	quorum[0].Servers = voters("n1@x", "n2@x", "n3@x", "n4@x")
	stopping := leaving(all[1:4], "n2", "n3", "n4")
	if got := AwaitingHandOff(quorum, stopping, 3, stopping[0]); len(got) != 0 {
		t.Fatalf("every member retiring: n2 waits for %v, want nothing", got)
	}

	// Three nodes, one retiring, or all retiring: nothing to wait for.
	three := nodes(3)
	var threeConfigs []GroupConfig
	for g := range uint32(16) {
		threeConfigs = append(threeConfigs, GroupConfig{ID: g, Servers: voters("n1@x", "n2@x", "n3@x")})
	}
	for _, l := range [][]string{{"n1"}, {"n1", "n2", "n3"}} {
		alive := leaving(three, l...)
		if got := AwaitingHandOff(threeConfigs, alive, 3, alive[0]); len(got) != 0 {
			t.Fatalf("three nodes, %v retiring: n1 waits for %v, want nothing", l, got)
		}
	}
}

// A node removed from a group never hears of it from Raft (the leader stops replicating to it
// first): the configuration it reports is the gossiped record's once that is further on.
func TestConfigurationsPreferTheNewerRecord(t *testing.T) {
	h := &fakeRaft{self: "c@1", parts: []GroupInfo{{ID: 0, Leader: "a@1", Term: 4, LastIndex: 100,
		Replica: true, Servers: voters("a@1", "b@1", "c@1")}}}
	d := newTestDirectory(h, &fakeMembers{members: alive("a@1", "b@1", "c@1", "d@1")})
	receive := func(r record) {
		b, _ := json.Marshal(r)
		d.Receive(b)
	}
	servers := func() []string {
		var out []string
		for _, s := range d.Configurations()[0].Servers {
			out = append(out, string(s.ID))
		}
		return out
	}
	// A record from before what the local instance holds does not count.
	receive(record{G: 0, Term: 4, Leader: "a@1", Voters: []string{"a@1", "b@1"}, LastIndex: 90})
	if got := servers(); !slices.Equal(got, []string{"a@1", "b@1", "c@1"}) {
		t.Fatalf("with an older record: %v, want the local configuration", got)
	}
	receive(record{G: 0, Term: 4, Leader: "a@1", Voters: []string{"a@1", "b@1", "d@1"}, LastIndex: 103})
	if got := servers(); !slices.Equal(got, []string{"a@1", "b@1", "d@1"}) {
		t.Fatalf("with a newer record: %v, want the record's", got)
	}
}
