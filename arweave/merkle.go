package arweave

import (
	"crypto/sha256"
	"math/big"
)

// Chunk sizes of transaction data: chunks are MaxChunkSize bytes, but the last two are
// rebalanced so that none is under MinChunkSize (a last chunk may still be smaller when the
// data is).
const (
	MaxChunkSize = 256 << 10
	MinChunkSize = 32 << 10
)

// Chunk is one chunk of a transaction's data: its byte range and SHA-256.
type Chunk struct {
	DataHash [32]byte
	Min, Max int // byte range [Min, Max)
}

// Chunks splits data as Arweave does.
func Chunks(data []byte) []Chunk {
	var out []Chunk
	cursor := 0
	rest := data
	for len(rest) >= MaxChunkSize {
		size := MaxChunkSize
		if next := len(rest) - MaxChunkSize; next > 0 && next < MinChunkSize {
			size = (len(rest) + 1) / 2 // ceil: the two last chunks share the rest
		}
		out = append(out, Chunk{DataHash: sha256.Sum256(rest[:size]), Min: cursor, Max: cursor + size})
		cursor += size
		rest = rest[size:]
	}
	return append(out, Chunk{DataHash: sha256.Sum256(rest), Min: cursor, Max: cursor + len(rest)})
}

// node is a node of the data's Merkle tree.
type node struct {
	id          [32]byte
	dataHash    [32]byte // leaves
	maxByte     int      // the end of the node's byte range
	boundary    int      // branches: the end of the left child's range
	left, right *node
}

// note is an offset as the tree hashes it: 32 bytes, big-endian.
func note(n int) []byte {
	b := make([]byte, 32)
	return big.NewInt(int64(n)).FillBytes(b)
}

func hashOf(parts ...[]byte) [32]byte {
	h := sha256.New()
	for _, p := range parts {
		h.Write(p)
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

func h32(b []byte) []byte { s := sha256.Sum256(b); return s[:] }

// tree builds the Merkle tree over chunks: leaves H(H(dataHash) ‖ H(note(max))), branches
// H(H(left) ‖ H(right) ‖ H(note(left.max))), pairing left to right, an odd node rising as it
// is.
func tree(chunks []Chunk) *node {
	layer := make([]*node, len(chunks))
	for i, c := range chunks {
		layer[i] = &node{id: hashOf(h32(c.DataHash[:]), h32(note(c.Max))), dataHash: c.DataHash, maxByte: c.Max}
	}
	for len(layer) > 1 {
		var next []*node
		for i := 0; i < len(layer); i += 2 {
			if i+1 == len(layer) {
				next = append(next, layer[i])
				continue
			}
			l, r := layer[i], layer[i+1]
			next = append(next, &node{id: hashOf(h32(l.id[:]), h32(r.id[:]), h32(note(l.maxByte))),
				maxByte: r.maxByte, boundary: l.maxByte, left: l, right: r})
		}
		layer = next
	}
	return layer[0]
}

// DataRoot is the root of data's Merkle tree (empty for empty data).
func DataRoot(data []byte) []byte {
	if len(data) == 0 {
		return nil
	}
	r := tree(Chunks(data)).id
	return r[:]
}

// Proof is what POST /chunk needs of one chunk besides its bytes.
type Proof struct {
	Offset int    // the chunk's last byte
	Path   []byte // data_path
}

// Proofs returns the data path of every chunk of data, in order (none for empty data; a
// trailing empty chunk is left out, as arweave-js does).
func Proofs(data []byte) []Proof {
	if len(data) == 0 {
		return nil
	}
	var out []Proof
	var walk func(n *node, path []byte)
	walk = func(n *node, path []byte) {
		if n.left == nil {
			p := append(append(append([]byte(nil), path...), n.dataHash[:]...), note(n.maxByte)...)
			out = append(out, Proof{Offset: n.maxByte - 1, Path: p})
			return
		}
		p := append(append(append(append([]byte(nil), path...), n.left.id[:]...), n.right.id[:]...), note(n.boundary)...)
		walk(n.left, p)
		walk(n.right, p)
	}
	walk(tree(Chunks(data)), nil)
	if cs := Chunks(data); cs[len(cs)-1].Max == cs[len(cs)-1].Min {
		out = out[:len(out)-1]
	}
	return out
}

// ValidatePath checks that chunk is the chunk of a data root's data that ends at byte offset
// (its last byte), with the data path a node is given by POST /chunk, for data of size bytes.
// It returns the chunk's byte range [lo, hi).
func ValidatePath(root []byte, offset, size int, path, chunk []byte) (lo, hi int, ok bool) {
	if offset < 0 || offset >= size || len(root) != 32 {
		return 0, 0, false
	}
	want := root
	lo, hi = 0, size
	for len(path) > 64 {
		if len(path) < 96 {
			return 0, 0, false
		}
		l, r, n := path[:32], path[32:64], path[64:96]
		id := hashOf(h32(l), h32(r), h32(n))
		if string(id[:]) != string(want) {
			return 0, 0, false
		}
		boundary := int(new(big.Int).SetBytes(n).Int64())
		if offset < boundary {
			want, hi = l, min(hi, boundary)
		} else {
			want, lo = r, max(lo, boundary)
		}
		path = path[96:]
	}
	if len(path) != 64 {
		return 0, 0, false
	}
	dataHash, n := path[:32], path[32:]
	id := hashOf(h32(dataHash), h32(n))
	end := int(new(big.Int).SetBytes(n).Int64())
	sum := sha256.Sum256(chunk)
	if string(id[:]) != string(want) || string(sum[:]) != string(dataHash) || end > hi || end-len(chunk) < lo || offset >= end {
		return 0, 0, false
	}
	return end - len(chunk), end, true
}
