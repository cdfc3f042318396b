package ans104

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/big"
	"os"
	"testing"

	"github.com/shardkeeper/shardkeeper/arweave"
)

// vectors are data items and a bundle built and signed by arbundles (testdata/gen/gen.mjs).
type vectors struct {
	Generator        string       `json:"generator"`
	Ed25519Seed      string       `json:"ed25519_seed"`
	Ed25519PublicKey string       `json:"ed25519_public_key"`
	Type1Owner       string       `json:"type1_owner"`
	Items            []itemVector `json:"items"`
	Bundle           struct {
		Items  []string `json:"items"`
		IDs    []string `json:"ids"`
		Binary string   `json:"binary"`
	} `json:"bundle"`
}

type itemVector struct {
	Name          string      `json:"name"`
	SignatureType int         `json:"signature_type"`
	DataSize      int         `json:"data_size"`
	Tags          [][2]string `json:"tags"`
	Target        string      `json:"target"`
	Anchor        string      `json:"anchor"`
	TagsAvro      string      `json:"tags_avro"`
	DeepHash      string      `json:"deep_hash"`
	Signature     string      `json:"signature"`
	ID            string      `json:"id"`
	Binary        string      `json:"binary"`
}

func loadVectors(t testing.TB) vectors {
	t.Helper()
	b, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

var b64url = base64.RawURLEncoding

func mustB64URL(t testing.TB, s string) []byte {
	t.Helper()
	b, err := b64url.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustStd64(t testing.TB, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testData is the data of the vectors' items: (i*31+7) mod 256.
func testData(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte((i*31 + 7) % 256)
	}
	return b
}

// testEd25519Signer signs with the vectors' Ed25519 key, whose seed is (i*7+3) mod 256.
func testEd25519Signer(t testing.TB) *Ed25519Signer {
	t.Helper()
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = byte((i*7 + 3) % 256)
	}
	s, err := NewEd25519Signer(ed25519.NewKeyFromSeed(seed))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testArweaveSigner signs with the test wallet of package arweave, the vectors' type 1 key.
func testArweaveSigner(t testing.TB) *ArweaveSigner {
	t.Helper()
	s, err := NewArweaveSigner(arweave.TestWallet(t))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (c itemVector) options(t testing.TB) Options {
	var o Options
	for _, tag := range c.Tags {
		o.Tags = append(o.Tags, Tag{Name: []byte(tag[0]), Value: []byte(tag[1])})
	}
	if c.Target != "" {
		o.Target = mustB64URL(t, c.Target)
	}
	if c.Anchor != "" {
		o.Anchor = mustB64URL(t, c.Anchor)
	}
	return o
}

// Our Avro tags, deep hash, layout and ids are arbundles', byte for byte, and arbundles'
// signatures verify here. Type 2 (Ed25519) is deterministic, so items signed here are
// arbundles' exactly; type 1 (RSA-PSS) signatures are randomized, so for those the item is laid
// out here and given arbundles' signature.
func TestAgainstArbundles(t *testing.T) {
	v := loadVectors(t)
	rsaSigner, edSigner := testArweaveSigner(t), testEd25519Signer(t)
	if got := b64url.EncodeToString(rsaSigner.Owner()); got != v.Type1Owner {
		t.Fatalf("type 1 owner %s…, arbundles %s…", got[:16], v.Type1Owner[:16])
	}
	if got := hex.EncodeToString(edSigner.Owner()); got != v.Ed25519PublicKey {
		t.Fatalf("ed25519 public key %s, arbundles %s", got, v.Ed25519PublicKey)
	}
	signers := map[int]Signer{1: rsaSigner, 2: edSigner}
	if len(v.Items) < 20 {
		t.Fatalf("%d items in the vectors", len(v.Items))
	}
	for _, c := range v.Items {
		t.Run(c.Name, func(t *testing.T) {
			signer := signers[c.SignatureType]
			opts, data, binary := c.options(t), testData(c.DataSize), mustStd64(t, c.Binary)

			// arbundles' item, read here.
			d, err := Parse(binary)
			if err != nil {
				t.Fatal(err)
			}
			if d.SignatureType() != SignatureType(c.SignatureType) || !bytes.Equal(d.Owner(), signer.Owner()) {
				t.Fatalf("type %d owner %x…, want type %d", d.SignatureType(), d.Owner()[:8], c.SignatureType)
			}
			if !bytes.Equal(d.Target(), opts.Target) || !bytes.Equal(d.Anchor(), opts.Anchor) || !bytes.Equal(d.Data(), data) {
				t.Fatalf("target %x anchor %x data of %d bytes, want %x %x %d", d.Target(), d.Anchor(), len(d.Data()), opts.Target, opts.Anchor, len(data))
			}
			if !tagsEqual(d.Tags(), opts.Tags) {
				t.Fatalf("tags %q, want %q", d.Tags(), opts.Tags)
			}
			if got := hex.EncodeToString(d.RawTags()); got != c.TagsAvro {
				t.Fatalf("raw tags %s, arbundles %s", got, c.TagsAvro)
			}
			if got := hex.EncodeToString(d.SignatureData()); got != c.DeepHash {
				t.Fatalf("deep hash %s, arbundles %s", got, c.DeepHash)
			}
			if b64url.EncodeToString(d.Signature()) != c.Signature || d.IDString() != c.ID {
				t.Fatalf("id %s, arbundles %s", d.IDString(), c.ID)
			}
			if err := d.Verify(); err != nil {
				t.Fatalf("arbundles' item: %v", err)
			}
			if !bytes.Equal(d.Bytes(), binary) {
				t.Fatal("the parsed item's bytes differ from arbundles'")
			}

			// The same item laid out here.
			if got := hex.EncodeToString(encodeTags(opts.Tags)); got != c.TagsAvro {
				t.Fatalf("Avro tags %s, arbundles %s", got, c.TagsAvro)
			}
			u, err := NewUnsigned(signer.SignatureType(), signer.Owner(), data, opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := hex.EncodeToString(u.SignatureData()); got != c.DeepHash {
				t.Fatalf("deep hash %s, arbundles %s", got, c.DeepHash)
			}
			given, err := u.WithSignature(mustB64URL(t, c.Signature))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(given.Bytes(), binary) || given.IDString() != c.ID {
				t.Fatal("laid out here with arbundles' signature, the bytes differ from arbundles'")
			}

			// Signed here.
			signed, err := Build(signer, data, opts)
			if err != nil {
				t.Fatal(err)
			}
			if err := signed.Verify(); err != nil {
				t.Fatal(err)
			}
			if c.SignatureType == 2 && (!bytes.Equal(signed.Bytes(), binary) || signed.IDString() != c.ID) {
				t.Fatalf("signed here: id %s, arbundles %s", signed.IDString(), c.ID)
			}
			if c.SignatureType == 1 && !bytes.Equal(signed.Bytes()[2+512:], binary[2+512:]) {
				t.Fatal("signed here: the bytes after the signature differ from arbundles'")
			}

			// A change anywhere past the signature breaks it.
			for _, at := range []int{len(binary) - 1, 2 + len(d.Signature()) + 3, len(binary) - len(data) - 1} {
				if at >= len(binary) || at < 0 {
					continue
				}
				bad := bytes.Clone(binary)
				bad[at] ^= 1
				if b, err := Parse(bad); err == nil && !errors.Is(b.Verify(), ErrSignature) {
					t.Fatalf("a flipped bit at offset %d still verifies", at)
				}
			}
		})
	}
}

func tagsEqual(a, b []Tag) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i].Name, b[i].Name) || !bytes.Equal(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}

// arbundles' bundle reads here item by item, with its ids, and is laid out again here byte for
// byte.
func TestArbundlesBundle(t *testing.T) {
	v := loadVectors(t)
	byName := map[string]itemVector{}
	for _, c := range v.Items {
		byName[c.Name] = c
	}
	binary := mustStd64(t, v.Bundle.Binary)
	items, err := ParseBundle(binary)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != len(v.Bundle.Items) || len(items) < 3 {
		t.Fatalf("%d items, arbundles %d", len(items), len(v.Bundle.Items))
	}
	for i, d := range items {
		c := byName[v.Bundle.Items[i]]
		if d.IDString() != v.Bundle.IDs[i] || d.IDString() != c.ID {
			t.Fatalf("item %d: id %s, arbundles %s", i, d.IDString(), v.Bundle.IDs[i])
		}
		if !bytes.Equal(d.Bytes(), mustStd64(t, c.Binary)) {
			t.Fatalf("item %d: bytes differ from %s", i, c.Name)
		}
		if err := d.Verify(); err != nil {
			t.Fatalf("item %d: %v", i, err)
		}
	}
	again, err := EncodeBundle(items)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, binary) {
		t.Fatal("the bundle laid out here differs from arbundles'")
	}
}

// arbundles on Node signs type 1 with the longest salt the key allows and ours use 32 bytes:
// both verify here, which is why verification takes any salt length.
func TestSaltLengths(t *testing.T) {
	v := loadVectors(t)
	signer := testArweaveSigner(t)
	pub := &rsa.PublicKey{N: new(big.Int).SetBytes(signer.Owner()), E: arweaveExponent}
	check := func(d *DataItem, salt int) error {
		h := sha256.Sum256(d.SignatureData())
		return rsa.VerifyPSS(pub, crypto.SHA256, h[:], d.Signature(), &rsa.PSSOptions{SaltLength: salt})
	}
	var theirs *DataItem
	for _, c := range v.Items {
		if c.SignatureType == 1 {
			var err error
			if theirs, err = Parse(mustStd64(t, c.Binary)); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	if err := check(theirs, 512-32-2); err != nil {
		t.Errorf("arbundles' signature does not have the longest salt: %v", err)
	}
	ours, err := Build(signer, []byte("x"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := check(ours, 32); err != nil {
		t.Errorf("our signature does not have a 32-byte salt: %v", err)
	}
	for _, d := range []*DataItem{theirs, ours} {
		if err := d.Verify(); err != nil {
			t.Error(err)
		}
	}
}
