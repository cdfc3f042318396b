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
	for p := range uint32(64) {
		got := BootstrapReplicas(p, all, 3, "n1")
		desired := Desired(p, all, 3)
		if len(got) != 3 || !slices.ContainsFunc(got, func(m NodeMeta) bool { return m.ID == "n1" }) {
			t.Fatalf("partition %d: %v lacks n1", p, ids(got))
		}
		if !slices.Equal(ids(got[:2]), ids(desired[:2])) {
			t.Fatalf("partition %d: %v, want the best two of %v first", p, ids(got), ids(desired))
		}
	}
}
