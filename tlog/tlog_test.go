package tlog

import (
	"fmt"
	"testing"

	xtlog "golang.org/x/mod/sumdb/tlog"
)

// mem is a Reader over a map of stored nodes.
type mem map[[2]int64]Hash

func (m mem) Node(level int, index int64) (Hash, error) {
	h, ok := m[[2]int64{int64(level), index}]
	if !ok {
		return Hash{}, fmt.Errorf("no node %d/%d", level, index)
	}
	return h, nil
}

// Roots and proofs agree with golang.org/x/mod/sumdb/tlog (the Go checksum database's RFC 6962
// tree) for every tree of up to 70 leaves, every leaf and every prefix, and verify; a wrong
// leaf, root or size does not.
func TestAgainstSumdbTlog(t *testing.T) {
	ours := mem{}
	var stored []xtlog.Hash
	reader := xtlog.HashReaderFunc(func(idx []int64) ([]xtlog.Hash, error) {
		out := make([]xtlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = stored[x]
		}
		return out, nil
	})
	const n = 70
	var roots []Hash
	for i := int64(0); i < n; i++ {
		data := []byte(fmt.Sprintf(`{"seq":%d}`, i+1))
		nodes, err := Append(ours, i, LeafHash(data))
		if err != nil {
			t.Fatal(err)
		}
		for _, nd := range nodes {
			ours[[2]int64{int64(nd.Level), nd.Index}] = nd.Hash
		}
		hs, err := xtlog.StoredHashes(i, data, reader)
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, hs...)
		root, err := Root(ours, i+1)
		if err != nil {
			t.Fatal(err)
		}
		want, err := xtlog.TreeHash(i+1, reader)
		if err != nil {
			t.Fatal(err)
		}
		if root != Hash(want) {
			t.Fatalf("root of %d leaves differs", i+1)
		}
		roots = append(roots, root)
	}
	for size := int64(1); size <= n; size++ {
		root := roots[size-1]
		for m := int64(0); m < size; m++ {
			proof, err := InclusionProof(ours, m, size)
			if err != nil {
				t.Fatal(err)
			}
			want, err := xtlog.ProveRecord(size, m, reader)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(proof) != fmt.Sprint(toOurs(want)) {
				t.Fatalf("inclusion of %d in %d differs", m, size)
			}
			leaf, _ := ours.Node(0, m)
			if err := VerifyInclusion(leaf, m, size, proof, root); err != nil {
				t.Fatalf("inclusion of %d in %d: %v", m, size, err)
			}
			if VerifyInclusion(LeafHash([]byte("other")), m, size, proof, root) == nil ||
				(size > 1 && VerifyInclusion(leaf, m, size, proof, roots[size-2]) == nil) {
				t.Fatalf("inclusion of %d in %d holds for what it does not prove", m, size)
			}
			if m == 0 {
				continue
			}
			cp, err := ConsistencyProof(ours, m, size)
			if err != nil {
				t.Fatal(err)
			}
			wantCP, err := xtlog.ProveTree(size, m, reader)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(cp) != fmt.Sprint(toOurs(wantCP)) {
				t.Fatalf("consistency %d→%d differs", m, size)
			}
			if err := VerifyConsistency(m, size, cp, roots[m-1], root); err != nil {
				t.Fatalf("consistency %d→%d: %v", m, size, err)
			}
			if m < size && VerifyConsistency(m, size, cp, roots[m-1], roots[max(m-2, 0)]) == nil && roots[max(m-2, 0)] != root {
				t.Fatalf("consistency %d→%d holds for another root", m, size)
			}
		}
	}
}

func toOurs(hs []xtlog.Hash) []Hash {
	out := make([]Hash, len(hs))
	for i, h := range hs {
		out[i] = Hash(h)
	}
	return out
}
