package ans104

import (
	"bytes"
	"errors"
	"testing"
)

// Parsing arbitrary bytes never panics; what it refuses it refuses as malformed or outside the
// tag limits; what it accepts serializes back to the same bytes, reads again as the same item,
// keeps to the tag limits, and can be verified without panicking.
func FuzzParseDataItem(f *testing.F) {
	v := loadVectors(f)
	for _, c := range v.Items {
		if c.DataSize <= 1000 {
			f.Add(mustStd64(f, c.Binary))
		}
	}
	f.Add(rawItem([]byte{1}, 0, nil, ""))
	f.Add(rawItem([]byte{0, 0}, 2, avro(-2, 10, 1, "a", 1, "b", 3, "Seq", 1, "7", 0), "x"))
	f.Add([]byte{1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := Parse(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTagLimits) {
				t.Fatalf("an error of no kind: %v", err)
			}
			return
		}
		if !bytes.Equal(d.Bytes(), b) {
			t.Fatal("the item's bytes are not the input")
		}
		again, err := Parse(d.Bytes())
		if err != nil || again.ID() != d.ID() || !tagsEqual(again.Tags(), d.Tags()) {
			t.Fatalf("read again: %v", err)
		}
		if err := checkTags(d.Tags()); err != nil {
			t.Fatal(err)
		}
		if len(d.SignatureData()) != 48 {
			t.Fatal("the signature data is not 48 bytes")
		}
		if err := d.Verify(); err != nil && !errors.Is(err, ErrSignature) {
			t.Fatalf("verify: %v", err)
		}
	})
}

// Parsing arbitrary bytes as a bundle never panics, and a bundle read lays out again as the
// same bytes.
func FuzzParseBundle(f *testing.F) {
	v := loadVectors(f)
	f.Add(mustStd64(f, v.Bundle.Binary))
	f.Add(make([]byte, 32))
	small := rawItem([]byte{0, 0}, 0, nil, "d")
	d, err := Parse(small)
	if err != nil {
		f.Fatal(err)
	}
	b, err := EncodeBundle([]*DataItem{d})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		items, err := ParseBundle(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTagLimits) {
				t.Fatalf("an error of no kind: %v", err)
			}
			return
		}
		again, err := EncodeBundle(items)
		if err != nil {
			return // the same item twice: read, but not written
		}
		if !bytes.Equal(again, b) {
			t.Fatal("the bundle lays out as other bytes")
		}
	})
}
