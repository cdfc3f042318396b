package ans104

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/shardkeeper/shardkeeper/arweave"
)

func tags(kv ...string) []Tag {
	var ts []Tag
	for i := 0; i+1 < len(kv); i += 2 {
		ts = append(ts, Tag{Name: []byte(kv[i]), Value: []byte(kv[i+1])})
	}
	return ts
}

// An item built here reads back the same, field by field, and verifies; Ed25519 items are the
// same bytes each time they are built.
func TestBuildParseRoundTrip(t *testing.T) {
	for _, s := range []Signer{testArweaveSigner(t), testEd25519Signer(t)} {
		for _, opts := range []Options{
			{},
			{Tags: tags("App-Name", "shardkeeper", "Seq", "1")},
			{Target: bytes.Repeat([]byte{7}, 32), Anchor: bytes.Repeat([]byte{9}, 32), Tags: tags("k", "v")},
			{Anchor: bytes.Repeat([]byte{9}, 32)},
		} {
			for _, data := range [][]byte{nil, []byte("x"), testData(70000)} {
				d, err := Build(s, data, opts)
				if err != nil {
					t.Fatal(err)
				}
				if err := d.Verify(); err != nil {
					t.Fatal(err)
				}
				back, err := Parse(d.Bytes())
				if err != nil {
					t.Fatal(err)
				}
				if back.ID() != d.ID() || !bytes.Equal(back.Bytes(), d.Bytes()) || back.Verify() != nil {
					t.Fatal("the item does not survive its bytes")
				}
				if back.SignatureType() != s.SignatureType() || !bytes.Equal(back.Owner(), s.Owner()) ||
					!bytes.Equal(back.Target(), opts.Target) || !bytes.Equal(back.Anchor(), opts.Anchor) ||
					!bytes.Equal(back.Data(), data) || !tagsEqual(back.Tags(), opts.Tags) {
					t.Fatalf("%s item read back with other fields", s.SignatureType())
				}
				if (opts.Target == nil) != (back.Target() == nil) || (opts.Anchor == nil) != (back.Anchor() == nil) {
					t.Fatal("an absent target or anchor reads back present, or the other way")
				}
				if s.SignatureType() == SignatureEd25519 {
					again, err := Build(s, data, opts)
					if err != nil || again.ID() != d.ID() {
						t.Fatalf("ed25519 items are not deterministic: %v", err)
					}
				}
			}
		}
	}
}

func TestBuildRefusals(t *testing.T) {
	s := testEd25519Signer(t)
	long := func(n int) string { return strings.Repeat("a", n) }
	for _, c := range []struct {
		name string
		opts Options
		is   error
		want string
	}{
		{"short target", Options{Target: make([]byte, 31)}, ErrMalformed, "the target has 31 bytes, want 32 or none"},
		{"long anchor", Options{Anchor: make([]byte, 33)}, ErrMalformed, "the anchor has 33 bytes"},
		{"129 tags", Options{Tags: make([]Tag, 129)}, ErrTagLimits, "129 tags, at most 128"},
		{"empty name", Options{Tags: tags("a", "b", "", "v")}, ErrTagLimits, "tag 1 has an empty name"},
		{"empty value", Options{Tags: tags("Seq", "")}, ErrTagLimits, `tag 0 ("Seq") has an empty value`},
		{"long name", Options{Tags: tags(long(1025), "v")}, ErrTagLimits, "a name of 1025 bytes, at most 1024"},
		{"long value", Options{Tags: tags("n", long(3073))}, ErrTagLimits, "a value of 3073 bytes, at most 3072"},
		{"too many tag bytes", Options{Tags: tags("a", long(3000), "b", long(3000))}, ErrTagLimits, "arbundles reads at most 4096"},
	} {
		_, err := Build(s, []byte("data"), c.opts)
		if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %v containing %q", c.name, err, c.is, c.want)
		}
	}
	// Limits are inclusive.
	if _, err := Build(s, nil, Options{Tags: tags(long(1024), "v")}); err != nil {
		t.Error(err)
	}
	if _, err := Build(s, nil, Options{Tags: tags("n", long(3072))}); err != nil {
		t.Error(err)
	}

	if _, err := NewUnsigned(SignatureEd25519, make([]byte, 31), nil, Options{}); !errors.Is(err, ErrMalformed) {
		t.Errorf("a 31-byte ed25519 owner: %v", err)
	}
	if _, err := NewUnsigned(3, make([]byte, 65), nil, Options{}); !errors.Is(err, ErrMalformed) {
		t.Errorf("signature type 3: %v", err)
	}
	u, err := NewUnsigned(SignatureEd25519, make([]byte, 32), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.Sign(s); err == nil || !strings.Contains(err.Error(), "the signer's key is not the item's owner") {
		t.Errorf("signed by another key: %v", err)
	}
	if _, err := u.Sign(testArweaveSigner(t)); err == nil || !strings.Contains(err.Error(), "an arweave signer for an item of ed25519") {
		t.Errorf("signed by another type of key: %v", err)
	}
	if _, err := u.WithSignature(make([]byte, 63)); !errors.Is(err, ErrMalformed) {
		t.Errorf("a 63-byte signature: %v", err)
	}
	if _, err := NewEd25519Signer(make([]byte, 32)); err == nil {
		t.Error("a 32-byte ed25519 private key was taken")
	}
	small, err := arweave.GenerateWallet(2048)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewArweaveSigner(small); err == nil || !strings.Contains(err.Error(), "2048-bit") {
		t.Errorf("a 2048-bit wallet: %v", err)
	}
}

// A signature over other fields, a changed signature, or a signature changed through the
// accessor's view of it, fails Verify with ErrSignature.
func TestVerifyRefusals(t *testing.T) {
	for _, s := range []Signer{testArweaveSigner(t), testEd25519Signer(t)} {
		d, err := Build(s, []byte("attestation"), Options{Tags: tags("Seq", "7")})
		if err != nil {
			t.Fatal(err)
		}
		bad := bytes.Clone(d.Bytes())
		bad[5] ^= 0x10 // in the signature
		b, err := Parse(bad)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Verify(); !errors.Is(err, ErrSignature) {
			t.Errorf("%s: a changed signature: %v", s.SignatureType(), err)
		}
		other, err := Build(s, []byte("attestation!"), Options{Tags: tags("Seq", "7")})
		if err != nil {
			t.Fatal(err)
		}
		u, err := NewUnsigned(s.SignatureType(), s.Owner(), []byte("attestation"), Options{Tags: tags("Seq", "8")})
		if err != nil {
			t.Fatal(err)
		}
		swapped, err := u.WithSignature(other.Signature())
		if err != nil {
			t.Fatal(err)
		}
		if err := swapped.Verify(); !errors.Is(err, ErrSignature) {
			t.Errorf("%s: another item's signature: %v", s.SignatureType(), err)
		}
		d.Signature()[0] ^= 1
		if err := d.Verify(); !errors.Is(err, ErrSignature) || !strings.Contains(err.Error(), "id is not the hash") {
			t.Errorf("%s: a signature changed in place: %v", s.SignatureType(), err)
		}
	}
}

// rawItem lays out an unsigned type 2 item by hand, with any header counts and tag bytes.
func rawItem(presence []byte, nTags uint64, rawTags []byte, data string) []byte {
	b := binary.LittleEndian.AppendUint16(nil, 2)
	b = append(b, make([]byte, 64+32)...)
	b = append(b, presence...)
	b = binary.LittleEndian.AppendUint64(b, nTags)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(rawTags)))
	b = append(b, rawTags...)
	return append(b, data...)
}

func avro(parts ...any) []byte {
	var b []byte
	for _, p := range parts {
		switch p := p.(type) {
		case int:
			b = appendLong(b, int64(p))
		case string:
			b = append(b, p...)
		}
	}
	return b
}

// Malformed items are refused with an error that says what is wrong and where.
func TestParseRefusals(t *testing.T) {
	none := []byte{0, 0}
	good := rawItem(none, 1, avro(1, 3, "Seq", 1, "7", 0), "data")
	if _, err := Parse(good); err != nil {
		t.Fatalf("the base case: %v", err)
	}
	withCount := func(nTags uint64, size uint64) []byte {
		b := rawItem(none, 0, nil, "")
		b = b[:len(b)-16]
		b = binary.LittleEndian.AppendUint64(b, nTags)
		return binary.LittleEndian.AppendUint64(b, size)
	}
	for _, c := range []struct {
		name string
		b    []byte
		is   error
		want string
	}{
		{"empty", nil, ErrMalformed, "signature type (2 bytes at offset 0) runs past the end of the item's 0 bytes"},
		{"unknown type", []byte{3, 0, 1, 2, 3}, ErrMalformed, "unknown signature type 3"},
		{"short signature", good[:40], ErrMalformed, "signature (64 bytes at offset 2) runs past"},
		{"short owner", good[:80], ErrMalformed, "owner (32 bytes at offset 66) runs past"},
		{"no target presence", good[:98], ErrMalformed, "target presence byte (1 bytes at offset 98) runs past"},
		{"target presence 2", rawItem([]byte{2, 0}, 0, nil, ""), ErrMalformed, "target presence byte at offset 98 is 2, want 0 or 1"},
		{"anchor presence 7", rawItem([]byte{0, 7}, 0, nil, ""), ErrMalformed, "anchor presence byte at offset 99 is 7"},
		{"short target", rawItem([]byte{1}, 0, nil, "")[:110], ErrMalformed, "target (32 bytes at offset 99) runs past"},
		{"short anchor", rawItem([]byte{0, 1}, 0, nil, "")[:110], ErrMalformed, "anchor (32 bytes at offset 100) runs past"},
		{"short counts", good[:105], ErrMalformed, "number of tags (8 bytes at offset 100) runs past"},
		{"129 tags in the header", withCount(129, 0), ErrTagLimits, "the header says 129 tags, at most 128"},
		{"2^64-1 tags in the header", withCount(1<<64-1, 0), ErrTagLimits, "18446744073709551615 tags"},
		{"4097 tag bytes", withCount(1, 4097), ErrTagLimits, "4097 tag bytes, arbundles reads at most 4096"},
		{"2^64-1 tag bytes", withCount(1, 1<<64-1), ErrTagLimits, "arbundles reads at most 4096"},
		{"tag bytes past the end", withCount(1, 40), ErrMalformed, "tags (40 bytes at offset 116) runs past"},
		{"header count above the array's", rawItem(none, 2, avro(1, 1, "a", 1, "b", 0), ""), ErrMalformed, "the header says 2 tags, the Avro array holds 1"},
		{"tags but a zero count", rawItem(none, 0, avro(1, 1, "a", 1, "b", 0), ""), ErrMalformed, "the header says 0 tags, the Avro array holds 1"},
		{"bytes after the array", rawItem(none, 1, avro(1, 1, "a", 1, "b", 0, "zz"), ""), ErrMalformed, "2 bytes after the end of the Avro array"},
		{"no closing block", rawItem(none, 1, avro(1, 1, "a", 1, "b"), "data"), ErrMalformed, "block count at byte 5 runs past the end of the 5 tag bytes"},
		{"negative name length", rawItem(none, 1, avro(1, -1, "a", 1, "b", 0), ""), ErrMalformed, "tag 0 name at byte 1 says -1 bytes"},
		{"name past the end", rawItem(none, 1, avro(1, 50, "a"), ""), ErrMalformed, "tag 0 name at byte 1 says 50 bytes, 1 remain"},
		{"empty name", rawItem(none, 1, avro(1, 0, 1, "b", 0), ""), ErrTagLimits, "tag 0 has an empty name"},
		{"empty value", rawItem(none, 1, avro(1, 1, "a", 0, 0), ""), ErrTagLimits, `tag 0 ("a") has an empty value`},
		{"long name", rawItem(none, 1, avro(1, 1025, strings.Repeat("n", 1025), 1, "v", 0), ""), ErrTagLimits, "a name of 1025 bytes"},
		{"long value", rawItem(none, 1, avro(1, 1, "n", 3073, strings.Repeat("v", 3073), 0), ""), ErrTagLimits, "a value of 3073 bytes"},
		{"129 tags in the array", rawItem(none, 128, avro(129, 0), ""), ErrTagLimits, "more than 128 tags"},
		{"129 tags over two blocks", rawItem(none, 128, append(avro(128), append(bytes.Repeat(avro(1, "a", 1, "b"), 128), avro(1, 1, "a", 1, "b", 0)...)...), ""), ErrTagLimits, "more than 128 tags"},
		{"overlong varint", rawItem(none, 1, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, ""), ErrMalformed, "block count at byte 0 overflows a 64-bit long"},
		{"block size not its items'", rawItem(none, 1, avro(-1, 5, 1, "a", 1, "b", 0), ""), ErrMalformed, "block at byte 0 says 5 bytes, its items take 4"},
		{"negative block size", rawItem(none, 1, avro(-1, -4, 1, "a", 1, "b", 0), ""), ErrMalformed, "negative size -4"},
		{"smallest block count", rawItem(none, 1, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, ""), ErrMalformed, "block count at byte 0 out of range"},
	} {
		d, err := Parse(c.b)
		if err == nil {
			t.Errorf("%s: parsed, id %s", c.name, d.IDString())
			continue
		}
		if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "ans104: data item: ") {
			t.Errorf("%s:\n got %v\nwant %v containing %q", c.name, err, c.is, c.want)
		}
	}
}

// Tags in any block form Avro allows are read, kept as they were signed, and verify: items from
// other writers are not refused for encoding their tags otherwise than arbundles.
func TestOtherAvroBlockForms(t *testing.T) {
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32))
	want := tags("a", "b", "Seq", "7", "c", "d")
	for name, raw := range map[string][]byte{
		"two blocks":     avro(2, 1, "a", 1, "b", 3, "Seq", 1, "7", 1, 1, "c", 1, "d", 0),
		"negative count": avro(-2, 10, 1, "a", 1, "b", 3, "Seq", 1, "7", 1, 1, "c", 1, "d", 0),
		"padded varint":  append([]byte{0x86, 0x00}, avro(1, "a", 1, "b", 3, "Seq", 1, "7", 1, "c", 1, "d", 0)...),
	} {
		b := rawItem([]byte{0, 0}, 3, raw, "data")
		copy(b[2+64:], key.Public().(ed25519.PublicKey))
		u, err := Parse(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		copy(b[2:], ed25519.Sign(key, u.SignatureData()))
		d, err := Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		if !tagsEqual(d.Tags(), want) || !bytes.Equal(d.RawTags(), raw) || !bytes.Equal(d.Bytes(), b) {
			t.Fatalf("%s: tags %q", name, d.Tags())
		}
		if err := d.Verify(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	// No tags may also be the one-byte empty array.
	d, err := Parse(rawItem([]byte{0, 0}, 0, []byte{0}, ""))
	if err != nil || len(d.Tags()) != 0 || len(d.RawTags()) != 1 {
		t.Fatalf("the empty Avro array: %v", err)
	}
}

func TestSignatureTypeString(t *testing.T) {
	if SignatureArweave.String() != "arweave" || SignatureEd25519.String() != "ed25519" || SignatureType(7).String() != "signature type 7" {
		t.Fatal(SignatureArweave, SignatureEd25519, SignatureType(7))
	}
}
