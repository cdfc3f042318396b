package ans104

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
)

// The tags that mark an Arweave transaction whose data is a bundle (ANS-104 §1.1).
const (
	BundleFormatTag  = "Bundle-Format"
	BundleFormat     = "binary"
	BundleVersionTag = "Bundle-Version"
	BundleVersion    = "2.0.0"
)

// BundleTags are the tags a transaction carrying a bundle must have.
func BundleTags() []Tag {
	return []Tag{
		{Name: []byte(BundleFormatTag), Value: []byte(BundleFormat)},
		{Name: []byte(BundleVersionTag), Value: []byte(BundleVersion)},
	}
}

// A bundle is the number of items, then for each item its size and id, then the items' bytes
// one after the other. Numbers are 32-byte little-endian.
const (
	bundleCountLen  = 32
	bundleHeaderLen = 64
)

// EncodeBundle lays out items as a bundle, in the order given. It refuses an item given twice:
// gateways index items by id, so the second would only cost its bytes.
func EncodeBundle(items []*DataItem) ([]byte, error) {
	size := bundleCountLen + bundleHeaderLen*len(items)
	seen := make(map[[32]byte]int, len(items))
	for i, d := range items {
		if d == nil {
			return nil, fmt.Errorf("ans104: bundle: item %d is nil", i)
		}
		if j, ok := seen[d.id]; ok {
			return nil, fmt.Errorf("ans104: bundle: item %d is item %d again (%s)", i, j, d.IDString())
		}
		seen[d.id] = i
		size += d.Size()
	}
	b := make([]byte, 0, size)
	b = appendU256(b, uint64(len(items)))
	for _, d := range items {
		b = appendU256(b, uint64(d.Size()))
		b = append(b, d.id[:]...)
	}
	for _, d := range items {
		b = append(b, d.raw...)
	}
	return b, nil
}

func appendU256(b []byte, n uint64) []byte {
	b = binary.LittleEndian.AppendUint64(b, n)
	return append(b, make([]byte, 24)...)
}

// u256 reads a 32-byte little-endian number that must fit in an int.
func u256(b []byte, what string) (int, error) {
	if !bytes.Equal(b[8:], make([]byte, 24)) {
		return 0, fmt.Errorf("%w: %s is past 2^64", ErrMalformed, what)
	}
	n := binary.LittleEndian.Uint64(b)
	if n > uint64(int(^uint(0)>>1)) {
		return 0, fmt.Errorf("%w: %s %d is too large", ErrMalformed, what, n)
	}
	return int(n), nil
}

// ParseBundle reads the items of a bundle (it copies b). Each item must be well formed and
// exactly fill the size its header gives, the header's id must be the item's, and the items
// must end where the bundle does. Signatures are not checked here: call Verify on each item.
// The same item twice is read as such: the format allows it.
func ParseBundle(b []byte) ([]*DataItem, error) {
	items, err := parseBundle(bytes.Clone(b))
	if err != nil {
		return nil, fmt.Errorf("ans104: bundle: %w", err)
	}
	return items, nil
}

func parseBundle(b []byte) ([]*DataItem, error) {
	if len(b) < bundleCountLen {
		return nil, fmt.Errorf("%w: %d bytes, too short for the number of items", ErrMalformed, len(b))
	}
	count, err := u256(b[:bundleCountLen], "the number of items")
	if err != nil {
		return nil, err
	}
	// Checked before anything is allocated for the items.
	if room := (len(b) - bundleCountLen) / bundleHeaderLen; count > room {
		return nil, fmt.Errorf("%w: %d items, but the bundle's %d bytes hold at most %d headers", ErrMalformed, count, len(b), room)
	}
	at := bundleCountLen + bundleHeaderLen*count
	items := make([]*DataItem, count)
	for i := range count {
		h := b[bundleCountLen+bundleHeaderLen*i:][:bundleHeaderLen]
		size, err := u256(h[:32], fmt.Sprintf("the size of item %d", i))
		if err != nil {
			return nil, err
		}
		if size > len(b)-at {
			return nil, fmt.Errorf("%w: item %d of %d bytes at offset %d runs past the end of the bundle's %d bytes", ErrMalformed, i, size, at, len(b))
		}
		d, err := parseItem(b[at : at+size : at+size])
		if err != nil {
			return nil, fmt.Errorf("item %d at offset %d: %w", i, at, err)
		}
		if !bytes.Equal(h[32:], d.id[:]) {
			return nil, fmt.Errorf("%w: item %d: the header's id %s is not the item's %s", ErrMalformed, i, base64.RawURLEncoding.EncodeToString(h[32:]), d.IDString())
		}
		items[i] = d
		at += size
	}
	if at != len(b) {
		return nil, fmt.Errorf("%w: %d bytes after the last item", ErrMalformed, len(b)-at)
	}
	return items, nil
}
