package cluster

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/hashicorp/raft"
)

// A leaving node waits for the groups that list it while others are there to take its
// replica, and for none when too few are: a 3-node cluster restarting one node at a time, or
// stopping as a whole, moves nothing.
func TestAwaitingHandOff(t *testing.T) {
	all := nodes(5)
	leaving := func(ms []NodeMeta, ids ...string) []NodeMeta {
		out := slices.Clone(ms)
		for i := range out {
			out[i].Leaving = slices.Contains(ids, out[i].ID)
		}
		return out
	}
	// Group g lists the nodes the placement over all five puts it on.
	var configs []GroupConfig
	holds := map[string][]uint32{}
	for g := range uint32(16) {
		c := GroupConfig{ID: g}
		for _, d := range Desired(g, all, 3) {
			c.Servers = append(c.Servers, raft.Server{ID: raft.ServerID(d.ServerID), Suffrage: raft.Voter})
			holds[d.ID] = append(holds[d.ID], g)
		}
		configs = append(configs, c)
	}

	alive := leaving(all, "n1")
	got := AwaitingHandOff(configs, alive, 3, alive[0])
	if !slices.Equal(got, holds["n1"]) || len(got) == 0 {
		t.Fatalf("n1 leaving five nodes waits for %v, want every group it holds %v", got, holds["n1"])
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

	// Three of five leaving at once: each group keeps its best-placed leaving replica, so the
	// two others left plus one leaving node make R, and that node waits for nothing there.
	alive = leaving(all, "n1", "n2", "n3")
	for _, self := range alive[:3] {
		for _, g := range AwaitingHandOff(configs, alive, 3, self) {
			if slices.ContainsFunc(Desired(g, alive, 3), func(d NodeMeta) bool { return d.ID == self.ID }) {
				t.Fatalf("%s waits for group %d, which still desires it", self.ID, g)
			}
		}
	}

	// Three nodes, one leaving (a rolling restart), or all leaving: nothing to wait for.
	three := nodes(3)
	var threeConfigs []GroupConfig
	for g := range uint32(16) {
		threeConfigs = append(threeConfigs, GroupConfig{ID: g, Servers: voters("n1@x", "n2@x", "n3@x")})
	}
	for _, l := range [][]string{{"n1"}, {"n1", "n2", "n3"}} {
		alive := leaving(three, l...)
		if got := AwaitingHandOff(threeConfigs, alive, 3, alive[0]); len(got) != 0 {
			t.Fatalf("three nodes, %v leaving: n1 waits for %v, want nothing", l, got)
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
