// Package tlog is an RFC 6962 / RFC 9162 Merkle tree over a log's entries, kept as the hashes
// of its complete subtrees (so that any root and proof costs O(log n) reads), with inclusion
// and consistency proofs and their verification.
package tlog

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"math/bits"
)

// Hash is a SHA-256 tree hash.
type Hash [32]byte

// LeafHash is the hash of a leaf: SHA-256(0x00 ‖ data).
func LeafHash(data []byte) Hash { return sha256.Sum256(append([]byte{0}, data...)) }

// NodeHash is the hash of an interior node: SHA-256(0x01 ‖ left ‖ right).
func NodeHash(l, r Hash) Hash {
	var b [65]byte
	b[0] = 1
	copy(b[1:], l[:])
	copy(b[33:], r[:])
	return sha256.Sum256(b[:])
}

// Reader reads stored nodes: the hash of the complete subtree of 2^level leaves starting at
// leaf index<<level (level 0: the leaves' hashes).
type Reader interface {
	Node(level int, index int64) (Hash, error)
}

// Node is a stored node.
type Node struct {
	Level int
	Index int64
	Hash  Hash
}

// Append returns the nodes to store when leaf n (0-based; the tree then holds n+1 leaves) is
// appended: the leaf, and every complete subtree it completes.
func Append(r Reader, n int64, leaf Hash) ([]Node, error) {
	out := []Node{{0, n, leaf}}
	h, idx := leaf, n
	for level := 0; idx&1 == 1; level++ {
		left, err := r.Node(level, idx-1)
		if err != nil {
			return nil, err
		}
		h, idx = NodeHash(left, h), idx>>1
		out = append(out, Node{level + 1, idx, h})
	}
	return out, nil
}

// split is the largest power of two below n (n ≥ 2): the size of the left subtree.
func split(n int64) int64 { return 1 << (bits.Len64(uint64(n-1)) - 1) }

// subtree is the hash of the leaves [lo, hi), lo a multiple of the largest power of two not
// above hi-lo (as every range the RFC's recursion asks for is).
func subtree(r Reader, lo, hi int64) (Hash, error) {
	n := hi - lo
	if n&(n-1) == 0 && lo%n == 0 {
		level := bits.TrailingZeros64(uint64(n))
		return r.Node(level, lo>>level)
	}
	k := split(n)
	left, err := subtree(r, lo, lo+k)
	if err != nil {
		return Hash{}, err
	}
	right, err := subtree(r, lo+k, hi)
	if err != nil {
		return Hash{}, err
	}
	return NodeHash(left, right), nil
}

// Root is the tree hash of the first size leaves (size ≥ 1).
func Root(r Reader, size int64) (Hash, error) {
	if size < 1 {
		return Hash{}, errors.New("tlog: the empty tree has no root here")
	}
	return subtree(r, 0, size)
}

// InclusionProof is the audit path of leaf index in the tree of the first size leaves
// (RFC 6962 PATH).
func InclusionProof(r Reader, index, size int64) ([]Hash, error) {
	if index < 0 || index >= size {
		return nil, fmt.Errorf("tlog: leaf %d is not in a tree of %d", index, size)
	}
	var path func(lo, hi int64) ([]Hash, error)
	path = func(lo, hi int64) ([]Hash, error) {
		if hi-lo == 1 {
			return nil, nil
		}
		k := split(hi - lo)
		if index < lo+k {
			p, err := path(lo, lo+k)
			if err != nil {
				return nil, err
			}
			h, err := subtree(r, lo+k, hi)
			return append(p, h), err
		}
		p, err := path(lo+k, hi)
		if err != nil {
			return nil, err
		}
		h, err := subtree(r, lo, lo+k)
		return append(p, h), err
	}
	return path(0, size)
}

// ConsistencyProof proves that the tree of the first from leaves is a prefix of the tree of
// the first to leaves (RFC 6962 PROOF; 1 ≤ from ≤ to).
func ConsistencyProof(r Reader, from, to int64) ([]Hash, error) {
	if from < 1 || from > to {
		return nil, fmt.Errorf("tlog: no consistency proof from %d to %d", from, to)
	}
	var sub func(lo, hi int64, whole bool) ([]Hash, error)
	sub = func(lo, hi int64, whole bool) ([]Hash, error) {
		if from == hi {
			if whole {
				return nil, nil
			}
			h, err := subtree(r, lo, hi)
			return []Hash{h}, err
		}
		k := split(hi - lo)
		if from <= lo+k {
			p, err := sub(lo, lo+k, whole)
			if err != nil {
				return nil, err
			}
			h, err := subtree(r, lo+k, hi)
			return append(p, h), err
		}
		p, err := sub(lo+k, hi, false)
		if err != nil {
			return nil, err
		}
		h, err := subtree(r, lo, lo+k)
		return append(p, h), err
	}
	return sub(0, to, true)
}

// ErrProof is returned by the verifications for a proof that does not hold.
var ErrProof = errors.New("tlog: the proof does not hold")

// VerifyInclusion checks that leaf is leaf index of the tree of size leaves whose root is
// root (RFC 9162, 2.1.3.2).
func VerifyInclusion(leaf Hash, index, size int64, proof []Hash, root Hash) error {
	if index < 0 || index >= size {
		return ErrProof
	}
	fn, sn, h := index, size-1, leaf
	for _, p := range proof {
		if sn == 0 {
			return ErrProof
		}
		if fn&1 == 1 || fn == sn {
			h = NodeHash(p, h)
			for fn&1 == 0 && fn != 0 {
				fn, sn = fn>>1, sn>>1
			}
		} else {
			h = NodeHash(h, p)
		}
		fn, sn = fn>>1, sn>>1
	}
	if sn != 0 || h != root {
		return ErrProof
	}
	return nil
}

// VerifyConsistency checks that the tree of from leaves with root fromRoot is a prefix of the
// tree of to leaves with root toRoot (RFC 9162, 2.1.4.2).
func VerifyConsistency(from, to int64, proof []Hash, fromRoot, toRoot Hash) error {
	switch {
	case from < 1 || from > to:
		return ErrProof
	case from == to:
		if len(proof) != 0 || fromRoot != toRoot {
			return ErrProof
		}
		return nil
	case len(proof) == 0:
		return ErrProof
	}
	if from&(from-1) == 0 {
		proof = append([]Hash{fromRoot}, proof...)
	}
	fn, sn := from-1, to-1
	for fn&1 == 1 {
		fn, sn = fn>>1, sn>>1
	}
	fr, sr := proof[0], proof[0]
	for _, c := range proof[1:] {
		if sn == 0 {
			return ErrProof
		}
		if fn&1 == 1 || fn == sn {
			fr, sr = NodeHash(c, fr), NodeHash(c, sr)
			for fn&1 == 0 && fn != 0 {
				fn, sn = fn>>1, sn>>1
			}
		} else {
			sr = NodeHash(sr, c)
		}
		fn, sn = fn>>1, sn>>1
	}
	if sn != 0 || fr != fromRoot || sr != toRoot {
		return ErrProof
	}
	return nil
}
