package persistence

import (
	"slices"
	"testing"
)

// Where ranges overlap the group starting later holds the partition (a split's child beside
// a parent that has not applied the split yet); partitions no group covers hold NoGroup; the
// caller's slice keeps its order.
func TestHolders(t *testing.T) {
	child := Group{ID: 0x80010004, First: 4, End: 8}
	groups := []Group{child, {ID: 1, First: 0, End: 8}, {ID: 2, First: 10, End: 12}}
	got := Holders(groups, 12)
	want := []uint32{1, 1, 1, 1, child.ID, child.ID, child.ID, child.ID, NoGroup, NoGroup, 2, 2}
	if !slices.Equal(got, want) {
		t.Fatalf("Holders = %v, want %v", got, want)
	}
	if groups[0] != child {
		t.Fatalf("Holders reordered its argument: %v", groups)
	}
	// A merge's group (a higher generation) holds its whole range, beside the stale ranges
	// of the groups it took in, whichever starts later.
	merged := Group{ID: 1, First: 0, End: 12, Gen: 3}
	got = Holders([]Group{{ID: 7, First: 8, End: 12, Gen: 2}, merged, child}, 12)
	for p, id := range got {
		if id != merged.ID {
			t.Fatalf("Holders after a merge = %v, want group 1 everywhere (partition %d)", got, p)
		}
	}
}
