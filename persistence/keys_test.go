package persistence

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func TestComponentRoundTrip(t *testing.T) {
	cases := [][]byte{
		nil,
		{},
		{0x00},
		{0xff},
		{0x00, 0x00},
		{0xff, 0xff, 0xff},
		[]byte("a"),
		[]byte("a\x00b"),
		bytes.Repeat([]byte{0xff}, 127), // longest one-byte length prefix
		bytes.Repeat([]byte{0x00}, 128), // shortest two-byte length prefix
		bytes.Repeat([]byte{0x80}, 300),
		bytes.Repeat([]byte("xyz"), 1<<14), // three-byte length prefix
	}
	for _, c := range cases {
		// Alone, after a prefix, and followed by more bytes.
		for _, prefix := range [][]byte{nil, []byte("pre\xff")} {
			buf := AppendComponent(append([]byte(nil), prefix...), c)
			if !bytes.HasPrefix(buf, prefix) {
				t.Fatalf("AppendComponent clobbered dst prefix %x", prefix)
			}
			buf = append(buf, "tail\x00"...)
			got, rest, err := ReadComponent(buf[len(prefix):])
			if err != nil {
				t.Fatalf("ReadComponent(%d bytes): %v", len(c), err)
			}
			if !bytes.Equal(got, c) {
				t.Fatalf("component of %d bytes read back as %d bytes", len(c), len(got))
			}
			if string(rest) != "tail\x00" {
				t.Fatalf("rest = %q, want %q", rest, "tail\x00")
			}
		}
	}
}

func TestComponentSequenceRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 500; iter++ {
		comps := make([][]byte, rng.IntN(6))
		var buf []byte
		for i := range comps {
			comps[i] = randBytes(rng, rng.IntN(200))
			buf = AppendComponent(buf, comps[i])
		}
		rest := buf
		for i, want := range comps {
			var got []byte
			var err error
			got, rest, err = ReadComponent(rest)
			if err != nil {
				t.Fatalf("iter %d component %d: %v", iter, i, err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("iter %d component %d = %x, want %x", iter, i, got, want)
			}
		}
		if len(rest) != 0 {
			t.Fatalf("iter %d: %d bytes left over", iter, len(rest))
		}
	}
}

func TestReadComponentMalformed(t *testing.T) {
	for _, in := range [][]byte{
		nil,                            // no length
		{0x80},                         // truncated uvarint
		{0x01},                         // length 1, no bytes
		{0x05, 'a', 'b'},               // length beyond the input
		{0x80, 0x01, 'a'},              // length 128, 1 byte
		bytes.Repeat([]byte{0xff}, 11), // uvarint overflow
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 'a'}, // length 2^64-1
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 'a'},             // length 2^63-1
	} {
		c, rest, err := ReadComponent(in)
		if !errors.Is(err, ErrBadComponent) {
			t.Errorf("ReadComponent(%x) = %x, %x, %v; want ErrBadComponent", in, c, rest, err)
		}
	}
}

func TestPrefixEnd(t *testing.T) {
	for _, tc := range []struct{ in, want []byte }{
		{nil, nil},
		{[]byte{}, nil},
		{[]byte{0x00}, []byte{0x01}},
		{[]byte("ab"), []byte("ac")},
		{[]byte{'a', 0xff}, []byte{'b'}},
		{[]byte{0x01, 0xff, 0xff}, []byte{0x02}},
		{[]byte{0x00, 0xfe}, []byte{0x00, 0xff}},
		{[]byte{0xff}, nil},
		{[]byte{0xff, 0xff, 0xff}, nil},
	} {
		in := append([]byte(nil), tc.in...)
		got := PrefixEnd(in)
		if !bytes.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
			t.Errorf("PrefixEnd(%x) = %x (nil=%v), want %x (nil=%v)", tc.in, got, got == nil, tc.want, tc.want == nil)
		}
		if !bytes.Equal(in, tc.in) {
			t.Errorf("PrefixEnd modified its input: %x -> %x", tc.in, in)
		}
	}
}

// TestPrefixEndBounds checks the defining property on random prefixes: every key with the
// prefix sorts before PrefixEnd, and PrefixEnd itself does not carry the prefix.
func TestPrefixEndBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 2000; i++ {
		prefix := randBytes(rng, 1+rng.IntN(6))
		if rng.IntN(3) == 0 { // plenty of 0xff tails
			prefix = append(prefix, bytes.Repeat([]byte{0xff}, rng.IntN(4))...)
		}
		end := PrefixEnd(prefix)
		if end == nil {
			if len(bytes.Trim(prefix, "\xff")) != 0 {
				t.Fatalf("PrefixEnd(%x) = nil but the prefix is not all 0xff", prefix)
			}
			continue
		}
		if bytes.HasPrefix(end, prefix) || bytes.Compare(end, prefix) <= 0 {
			t.Fatalf("PrefixEnd(%x) = %x is not past the prefix", prefix, end)
		}
		key := append(append([]byte(nil), prefix...), bytes.Repeat([]byte{0xff}, 1+rng.IntN(8))...)
		if bytes.Compare(key, end) >= 0 {
			t.Fatalf("key %x with prefix %x sorts at or after PrefixEnd %x", key, prefix, end)
		}
	}
}

// TestStateKeyOrdering checks that the state keys of a partition form one contiguous range
// that no other partition's keys fall into, whatever bytes the relative keys hold.
func TestStateKeyOrdering(t *testing.T) {
	parts := []uint32{0, 1, 2, 0xfe, 0xff, 0x100, 0x1ff, 0xffff, 0x10000, math.MaxUint32 - 1, math.MaxUint32}
	rels := [][]byte{nil, {0x00}, {0xff}, bytes.Repeat([]byte{0xff}, 64), []byte("a"), {'p', 0, 0, 0, 1, 's'}}
	for i, p := range parts {
		lo, hi := partitionPrefix(p, sectionState), partitionPrefix(p, sectionState+1)
		for _, k := range rels {
			sk := StateKey(p, k)
			if bytes.Compare(sk, lo) < 0 || bytes.Compare(sk, hi) >= 0 {
				t.Fatalf("StateKey(%d, %x) = %x outside the partition's state range [%x, %x)", p, k, sk, lo, hi)
			}
			for _, q := range parts[i+1:] {
				for _, k2 := range rels {
					if sq := StateKey(q, k2); bytes.Compare(sk, sq) >= 0 {
						t.Fatalf("StateKey(%d, %x) = %x does not sort before StateKey(%d, %x) = %x", p, k, sk, q, k2, sq)
					}
				}
			}
		}
		// Relative order is kept within a partition.
		if a, b := StateKey(p, []byte("a")), StateKey(p, []byte("a\x00")); bytes.Compare(a, b) >= 0 {
			t.Fatalf("relative order lost in partition %d", p)
		}
	}
}

// TestSectionLayout checks that the sections of a partition do not overlap and that a
// group's snapshot range [snapshotBounds) holds exactly the metadata and state sections of
// its partitions: never its Raft log or stable store, which are local to each replica, nor
// another group's keys.
func TestSectionLayout(t *testing.T) {
	for _, g := range []Group{{0, 0, 1, 0}, {1, 3, 7, 0}, {2, 4090, 4096, 2}, {3, math.MaxUint32 - 1, math.MaxUint32, 0}} {
		lo, hi := snapshotBounds(g)
		in := func(k []byte) bool { return bytes.Compare(k, lo) >= 0 && bytes.Compare(k, hi) < 0 }
		for p := g.First; p < g.End; p++ {
			for _, k := range [][]byte{metaKey(p, metaApplied), metaKey(p, metaTime), StateKey(p, nil), StateKey(p, []byte{0xff, 0xff})} {
				if !in(k) || !inGroupState(k, g) {
					t.Errorf("group %+v: key %x is outside the snapshot range [%x, %x)", g, k, lo, hi)
				}
			}
		}
		p := g.First
		for _, k := range []struct {
			what string
			key  []byte
		}{
			{"first log entry", logKey(p, 0)},
			{"last log entry", logKey(p, math.MaxUint64)},
			{"stable key CurrentTerm", stableKey(p, []byte("CurrentTerm"))},
			{"node key", nodeKey(nodeParts)},
			{"metadata of the partition after", metaKey(g.End, metaApplied)},
		} {
			if in(k.key) || inGroupState(k.key, g) {
				t.Errorf("group %+v: %s %x is inside the snapshot range [%x, %x)", g, k.what, k.key, lo, hi)
			}
		}
		if p > 0 && (in(StateKey(p-1, []byte{0xff})) || inGroupState(StateKey(p-1, nil), g)) {
			t.Errorf("group %+v: the state of partition %d is inside the snapshot range", g, p-1)
		}
		// Log keys sort by index.
		if bytes.Compare(logKey(p, 255), logKey(p, 256)) >= 0 {
			t.Errorf("group %+v: log keys not in index order", g)
		}
	}
}

func randBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		switch rng.IntN(4) {
		case 0:
			b[i] = 0x00
		case 1:
			b[i] = 0xff
		default:
			b[i] = byte(rng.Uint32())
		}
	}
	return b
}
