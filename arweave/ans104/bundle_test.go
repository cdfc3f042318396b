package ans104

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

func testItems(t *testing.T) []*DataItem {
	t.Helper()
	var items []*DataItem
	for i, s := range []Signer{testEd25519Signer(t), testArweaveSigner(t), testEd25519Signer(t)} {
		d, err := Build(s, testData(100*i), Options{Tags: tags("Seq", string(rune('0'+i)))})
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, d)
	}
	return items
}

func TestBundleRoundTrip(t *testing.T) {
	items := testItems(t)
	b, err := EncodeBundle(items)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseBundle(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(items) {
		t.Fatalf("%d items, want %d", len(back), len(items))
	}
	for i, d := range back {
		if d.ID() != items[i].ID() || !bytes.Equal(d.Bytes(), items[i].Bytes()) || d.Verify() != nil {
			t.Fatalf("item %d differs after the bundle", i)
		}
	}
	// Items read from a bundle are views of their own bytes: appending to one leaves the next
	// alone.
	_ = append(back[0].Bytes(), 0xff)
	if back[1].Verify() != nil {
		t.Fatal("an append to item 0 changed item 1")
	}

	empty, err := EncodeBundle(nil)
	if err != nil || !bytes.Equal(empty, make([]byte, 32)) {
		t.Fatalf("the empty bundle: %x %v", empty, err)
	}
	if items, err := ParseBundle(empty); err != nil || len(items) != 0 {
		t.Fatalf("the empty bundle: %v", err)
	}

	tags := BundleTags()
	if len(tags) != 2 || string(tags[0].Name) != "Bundle-Format" || string(tags[0].Value) != "binary" ||
		string(tags[1].Name) != "Bundle-Version" || string(tags[1].Value) != "2.0.0" {
		t.Fatalf("bundle tags %q", tags)
	}
}

func TestBundleRefusals(t *testing.T) {
	items := testItems(t)
	if _, err := EncodeBundle([]*DataItem{items[0], items[1], items[0]}); err == nil || !strings.Contains(err.Error(), "item 2 is item 0 again") {
		t.Errorf("an item twice: %v", err)
	}
	if _, err := EncodeBundle([]*DataItem{items[0], nil}); err == nil {
		t.Error("a nil item was bundled")
	}
	good, err := EncodeBundle(items[:2])
	if err != nil {
		t.Fatal(err)
	}
	first := items[0].Size()
	with := func(at int, v byte) []byte {
		b := bytes.Clone(good)
		b[at] = v
		return b
	}
	withU64 := func(at int, v uint64) []byte {
		b := bytes.Clone(good)
		binary.LittleEndian.PutUint64(b[at:], v)
		return b
	}
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"short", good[:31], "31 bytes, too short for the number of items"},
		{"count past 2^64", with(31, 1), "the number of items is past 2^64"},
		{"count past the headers", withU64(0, uint64((len(good)-32)/64+1)), "items, but the bundle's"},
		{"huge count", withU64(0, 1<<62), "items, but the bundle's"},
		{"size past 2^64", with(32+31, 1), "the size of item 0 is past 2^64"},
		{"size past the end", withU64(32, uint64(len(good))), "item 0 of"},
		{"size too small for the item", withU64(32, uint64(first-1)), "item 0 at offset 160"},
		{"header id", with(32+32, good[32+32]^1), "item 0: the header's id"},
		{"a malformed item", with(32+128+98, 5), "item 0 at offset 160: malformed: target presence byte at offset 98 is 5"},
		{"trailing bytes", append(bytes.Clone(good), 1, 2, 3), "3 bytes after the last item"},
		{"a truncated item", good[:len(good)-1], "item 1 of"},
	} {
		_, err := ParseBundle(c.b)
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "ans104: bundle: ") {
			t.Errorf("%s:\n got %v\nwant ErrMalformed containing %q", c.name, err, c.want)
		}
	}
	// The format allows the same item twice, so reading does.
	twice := append(append(append(append(make([]byte, 0), good[:32]...), good[32:96]...), good[32:96]...), append(bytes.Clone(items[0].Bytes()), items[0].Bytes()...)...)
	twice[0] = 2
	if got, err := ParseBundle(twice); err != nil || len(got) != 2 || got[0].ID() != got[1].ID() {
		t.Errorf("an item twice: %v", err)
	}
}
