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
}
