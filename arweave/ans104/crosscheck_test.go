package ans104

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// crossCheckItem is what testdata/gen/verify.mjs expects arbundles to read from an item.
type crossCheckItem struct {
	Name          string      `json:"name"`
	File          string      `json:"file"`
	Valid         bool        `json:"valid"`
	ID            string      `json:"id"`
	SignatureType int         `json:"signature_type"`
	SignatureData string      `json:"signature_data"`
	Owner         string      `json:"owner"`
	Target        string      `json:"target"`
	Anchor        string      `json:"anchor"`
	Tags          [][2]string `json:"tags"`
	DataSHA256    string      `json:"data_sha256"`
}

// Items and a bundle made here, checked by arbundles itself (testdata/gen/verify.mjs): each item
// valid with the fields written here, a changed one invalid, and the bundle unbundled to the
// same ids. Needs Node and testdata/gen/node_modules (npm ci there).
func TestCrossCheckArbundlesVerifiesOurs(t *testing.T) {
	if os.Getenv("SHARDKEEPER_ARWEAVE_CROSSCHECK") == "" {
		t.Skip("set SHARDKEEPER_ARWEAVE_CROSSCHECK=1 (needs Node and npm ci in arweave/ans104/testdata/gen)")
	}
	if _, err := os.Stat("testdata/gen/node_modules/@dha-team/arbundles"); err != nil {
		t.Fatal("testdata/gen/node_modules is missing: run npm ci in arweave/ans104/testdata/gen")
	}
	_, fresh, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	freshSigner, err := NewEd25519Signer(fresh)
	if err != nil {
		t.Fatal(err)
	}
	target, anchor := make([]byte, 32), []byte("anchor-made-by-shardkeeper-0123!")
	for i := range target {
		target[i] = byte(i * 5)
	}
	cases := []struct {
		name string
		size int
		opts Options
	}{
		{"no tags, target or anchor", 11, Options{}},
		{"several tags", 1000, Options{Tags: tags("App-Name", "shardkeeper", "Content-Type", "application/json", "Seq", "42")}},
		{"target only", 32, Options{Target: target, Tags: tags("Seq", "1")}},
		{"anchor only", 32, Options{Anchor: anchor, Tags: tags("Seq", "2")}},
		{"target and anchor", 32, Options{Target: target, Anchor: anchor, Tags: tags("Seq", "3")}},
		{"empty data", 0, Options{}},
		{"larger data", 300 << 10, Options{Tags: tags("Content-Type", "application/octet-stream")}},
		{"unicode tags", 7, Options{Tags: tags("Unicode", "é→✓", "Emoji", "🔐 shard 🗝", "Ключ", strings.Repeat("значение→✓🗝", 8))}},
		{"long tag", 5, Options{Tags: tags(strings.Repeat("N", 1000), strings.Repeat("v", 3000))}},
		{"128 tags", 5, Options{Tags: func() []Tag {
			var ts []Tag
			for i := range 128 {
				ts = append(ts, Tag{Name: fmt.Appendf(nil, "T%d", i), Value: fmt.Appendf(nil, "%d", i*i)})
			}
			return ts
		}()}},
	}

	dir := t.TempDir()
	var manifest struct {
		Items  []crossCheckItem `json:"items"`
		Bundle struct {
			File string   `json:"file"`
			IDs  []string `json:"ids"`
		} `json:"bundle"`
	}
	var bundled []*DataItem
	write := func(name string, d *DataItem, valid bool, b []byte) {
		file := fmt.Sprintf("item%02d.bin", len(manifest.Items))
		if err := os.WriteFile(filepath.Join(dir, file), b, 0o644); err != nil {
			t.Fatal(err)
		}
		it := crossCheckItem{Name: name, File: file, Valid: valid, ID: d.IDString(), SignatureType: int(d.SignatureType()),
			SignatureData: hex.EncodeToString(d.SignatureData()), Owner: b64url.EncodeToString(d.Owner()),
			Target: b64url.EncodeToString(d.Target()), Anchor: b64url.EncodeToString(d.Anchor()), Tags: [][2]string{}}
		for _, tag := range d.Tags() {
			it.Tags = append(it.Tags, [2]string{string(tag.Name), string(tag.Value)})
		}
		sum := sha256.Sum256(d.Data())
		it.DataSHA256 = hex.EncodeToString(sum[:])
		manifest.Items = append(manifest.Items, it)
	}
	for _, s := range []struct {
		name   string
		signer Signer
	}{{"type 1", testArweaveSigner(t)}, {"type 2", testEd25519Signer(t)}, {"type 2, new key", freshSigner}} {
		for _, c := range cases {
			d, err := Build(s.signer, testData(c.size), c.opts)
			if err != nil {
				t.Fatal(err)
			}
			write(s.name+": "+c.name, d, true, d.Bytes())
			if c.size < 100<<10 {
				bundled = append(bundled, d)
			}
		}
	}
	// The checker must see a change: the last byte of the data of an item signed here.
	d := bundled[1]
	changed := append([]byte(nil), d.Bytes()...)
	changed[len(changed)-1] ^= 1
	write("changed data (must be invalid)", d, false, changed)

	b, err := EncodeBundle(bundled)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bundle.bin"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	manifest.Bundle.File = "bundle.bin"
	for _, d := range bundled {
		manifest.Bundle.IDs = append(manifest.Bundle.IDs, d.IDString())
	}
	js, err := json.MarshalIndent(manifest, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "node", "testdata/gen/verify.mjs", dir).CombinedOutput()
	t.Logf("node testdata/gen/verify.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("arbundles does not take what Go made: %v", err)
	}
}
