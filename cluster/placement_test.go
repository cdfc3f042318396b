package cluster

import (
	"fmt"
	"slices"
	"testing"
)

func nodes(n int) []NodeMeta {
	var out []NodeMeta
	for i := range n {
		id := fmt.Sprintf("n%d", i+1)
		out = append(out, NodeMeta{ID: id, ServerID: id + "@x"})
	}
	return out
}

func ids(ms []NodeMeta) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

func TestDesiredIsDeterministicAndCapped(t *testing.T) {
	all := nodes(5)
	for p := range uint32(64) {
		a := ids(Desired(p, all, 3))
		rev := slices.Clone(all)
		slices.Reverse(rev)
		if b := ids(Desired(p, rev, 3)); !slices.Equal(a, b) {
			t.Fatalf("partition %d: %v vs %v depending on input order", p, a, b)
		}
		if len(a) != 3 || len(slices.Compact(slices.Sorted(slices.Values(a)))) != 3 {
			t.Fatalf("partition %d: %v, want 3 distinct", p, a)
		}
	}
	if got := Desired(0, nodes(2), 3); len(got) != 2 {
		t.Fatalf("R capped by members: got %d", len(got))
	}
}

// Rendezvous hashing moves only what it must: removing a node changes only the partitions
// that had it, and adding one changes only the partitions it enters.
func TestDesiredMovesMinimally(t *testing.T) {
	all := nodes(6)
	without := all[:5] // n6 removed
	for p := range uint32(512) {
		before, after := ids(Desired(p, all, 3)), ids(Desired(p, without, 3))
		if !slices.Contains(before, "n6") && !slices.Equal(before, after) {
			t.Fatalf("partition %d changed %v → %v though n6 was not a replica", p, before, after)
		}
		if slices.Contains(before, "n6") {
			kept := slices.DeleteFunc(slices.Clone(before), func(s string) bool { return s == "n6" })
			for _, k := range kept {
				if !slices.Contains(after, k) {
					t.Fatalf("partition %d lost %s when n6 left: %v → %v", p, k, before, after)
				}
			}
		}
	}
}

// Replicas spread evenly: with 4096 partitions, R=3 over 6 nodes, each node holds about half.
func TestDesiredSpreadsEvenly(t *testing.T) {
	all := nodes(6)
	count := map[string]int{}
	const parts = 4096
	for p := range uint32(parts) {
		for _, id := range ids(Desired(p, all, 3)) {
			count[id]++
		}
	}
	want := parts * 3 / 6
	for id, c := range count {
		if c < want*9/10 || c > want*11/10 {
			t.Errorf("%s holds %d replicas, want %d ± 10%%", id, c, want)
		}
	}
}

// The bootstrapping node is in every partition's first configuration, else no partition it
// is not desired for could ever elect a leader; the others are the desired ones, best first.
func TestBootstrapReplicasIncludeSelf(t *testing.T) {
	all := nodes(5)
	groups := make([]uint32, 64)
	for i := range groups {
		groups[i] = uint32(i)
	}
	placement := Placement(groups, all, 3)
	for p := range uint32(64) {
		got := BootstrapReplicas(p, groups, all, 3, "n1")
		desired := placement[p]
		if len(got) != 3 || !slices.ContainsFunc(got, func(m NodeMeta) bool { return m.ID == "n1" }) {
			t.Fatalf("partition %d: %v lacks n1", p, ids(got))
		}
		if !slices.Equal(ids(got[:2]), ids(desired[:2])) {
			t.Fatalf("partition %d: %v, want the best two of %v first", p, ids(got), ids(desired))
		}
	}
}

// Placement evens the replicas out where rendezvous alone would not: nine groups of three
// replicas on nine nodes give every node three (rendezvous alone leaves some with none, which
// then can lead nothing). Each group has three distinct replicas, the result does not depend
// on the order of the nodes, and retiring nodes hold nothing while enough others are left.
func TestPlacementEven(t *testing.T) {
	for _, tt := range []struct{ groups, nodes int }{{9, 9}, {6, 6}, {16, 5}, {3, 3}, {12, 9}, {4, 2}} {
		all := nodes(tt.nodes)
		var groups []uint32
		for i := range tt.groups {
			groups = append(groups, uint32(i))
			if i%2 == 1 {
				groups[i] |= 1 << 31 // split-born ids too
			}
		}
		got := Placement(groups, all, 3)
		rev := slices.Clone(all)
		slices.Reverse(rev)
		again := Placement(groups, rev, 3)
		load := map[string]int{}
		for _, g := range groups {
			if !slices.Equal(ids(got[g]), ids(again[g])) {
				t.Fatalf("%d groups on %d nodes: group %d placed %v, and %v with the nodes in another order", tt.groups, tt.nodes, g, ids(got[g]), ids(again[g]))
			}
			set := map[string]bool{}
			for _, n := range got[g] {
				set[n.ID] = true
				load[n.ID]++
			}
			if len(set) != min(3, tt.nodes) {
				t.Fatalf("%d groups on %d nodes: group %d on %v", tt.groups, tt.nodes, g, ids(got[g]))
			}
		}
		share := (tt.groups*min(3, tt.nodes) + tt.nodes - 1) / tt.nodes
		for _, n := range all {
			if load[n.ID] > share || load[n.ID] < share-1 {
				t.Errorf("%d groups on %d nodes: %s holds %d replicas, want %d or %d", tt.groups, tt.nodes, n.ID, load[n.ID], share-1, share)
			}
		}
	}
	all := nodes(5)
	all[0].Retiring = true
	for g, placed := range Placement([]uint32{0, 1, 2, 3, 4, 5}, all, 3) {
		if slices.ContainsFunc(placed, func(n NodeMeta) bool { return n.Retiring }) {
			t.Errorf("group %d placed on retiring %v with four others left", g, ids(placed))
		}
	}
}
