package arweave

import (
	"bytes"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"
)

// vectors are transactions built and signed by arweave-js (testdata/gen, make arweave-vectors).
type vectors struct {
	WalletAddress string `json:"wallet_address"`
	Cases         []struct {
		Name          string          `json:"name"`
		DataSize      int             `json:"data_size"`
		Tx            json.RawMessage `json:"tx"`
		SignatureData string          `json:"signature_data"`
		Proofs        []struct {
			Offset   int    `json:"offset"`
			DataPath string `json:"data_path"`
		} `json:"proofs"`
	} `json:"cases"`
}

func loadVectors(t *testing.T) vectors {
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

// testData is the data of the vectors' cases: (i*31+7) mod 256.
func testData(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte((i*31 + 7) % 256)
	}
	return b
}

// Our deep hash, data root and chunk proofs are arweave-js's, byte for byte, and arweave-js's
// signatures verify here.
func TestAgainstArweaveJS(t *testing.T) {
	v := loadVectors(t)
	for _, c := range v.Cases {
		t.Run(c.Name, func(t *testing.T) {
			var tx Tx
			if err := json.Unmarshal(c.Tx, &tx); err != nil {
				t.Fatal(err)
			}
			tx.Data = testData(c.DataSize)
			if got := hex.EncodeToString(tx.SignatureData()); got != c.SignatureData {
				t.Fatalf("signature data %s, arweave-js %s", got, c.SignatureData)
			}
			if !bytes.Equal(DataRoot(tx.Data), tx.DataRoot) {
				t.Fatalf("data root %x, arweave-js %x", DataRoot(tx.Data), tx.DataRoot)
			}
			if err := tx.Verify(); err != nil {
				t.Fatalf("arweave-js's transaction: %v", err)
			}
			if AddressOf(tx.Owner) != v.WalletAddress {
				t.Fatalf("address %s, arweave-js %s", AddressOf(tx.Owner), v.WalletAddress)
			}
			proofs := Proofs(tx.Data)
			if len(proofs) != len(c.Proofs) {
				t.Fatalf("%d proofs, arweave-js %d", len(proofs), len(c.Proofs))
			}
			for i, p := range proofs {
				if p.Offset != c.Proofs[i].Offset || b64.EncodeToString(p.Path) != c.Proofs[i].DataPath {
					t.Fatalf("proof %d: offset %d path %x…, arweave-js %d %s…", i, p.Offset, p.Path[:8], c.Proofs[i].Offset, c.Proofs[i].DataPath[:8])
				}
			}
			// A change anywhere in what is signed breaks the signature.
			tampered := tx
			tampered.Reward = tx.Reward + "0"
			if tampered.Verify() == nil {
				t.Fatal("a changed reward still verifies")
			}
		})
	}
}

// A transaction signed here verifies, its id is the hash of its signature, it survives its
// JSON form, and the wallet survives its JWK.
func TestSignHere(t *testing.T) {
	b, err := os.ReadFile("testdata/wallet.json")
	if err != nil {
		t.Fatal(err)
	}
	w, err := ParseWallet(b)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := ParseWallet(w.JWK()); err != nil || again.Address() != w.Address() {
		t.Fatalf("JWK round trip: %v", err)
	}
	tx := NewTx(testData(300*1024), []Tag{{Name: []byte("App-Name"), Value: []byte("shardkeeper")}})
	tx.LastTx, tx.Reward = bytes.Repeat([]byte{9}, 48), "42"
	if err := tx.Sign(w); err != nil {
		t.Fatal(err)
	}
	if err := tx.Verify(); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(tx)
	if err != nil {
		t.Fatal(err)
	}
	var back Tx
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if err := back.Verify(); err != nil || back.IDString() != tx.IDString() {
		t.Fatalf("after JSON: %v, id %s vs %s", err, back.IDString(), tx.IDString())
	}
	if _, err := ParseWallet([]byte(`{"kty":"RSA","n":"AQAB"}`)); err == nil {
		t.Fatal("an incomplete wallet was accepted")
	}
}

// The deep hash of a small nested value, written out by hand from its definition.
func TestDeepHashDefinition(t *testing.T) {
	h := func(parts ...[]byte) []byte {
		s := sha384(bytes.Join(parts, nil))
		return s[:]
	}
	blob := func(b []byte) []byte { return h(h([]byte("blob"), []byte{byte('0' + len(b))}), h(b)) }
	// list ["ab", ["c"]]
	inner := h(h([]byte("list1")), blob([]byte("c")))
	want := h(h(h([]byte("list2")), blob([]byte("ab"))), inner)
	got := DeepHash([]any{[]byte("ab"), []any{[]byte("c")}})
	if !bytes.Equal(got[:], want) {
		t.Fatalf("deep hash %x, want %x", got, want)
	}
}

func sha384(b []byte) [48]byte { return sha512.Sum384(b) }

// Every chunk's proof validates against the data root, and proves nothing else.
func TestValidatePath(t *testing.T) {
	data := testData(1024*1024 + 100)
	root, chunks, proofs := DataRoot(data), Chunks(data), Proofs(data)
	for i, p := range proofs {
		c := data[chunks[i].Min:chunks[i].Max]
		lo, hi, ok := ValidatePath(root, p.Offset, len(data), p.Path, c)
		if !ok || lo != chunks[i].Min || hi != chunks[i].Max {
			t.Fatalf("chunk %d: %d..%d %v, want %d..%d", i, lo, hi, ok, chunks[i].Min, chunks[i].Max)
		}
		bad := append([]byte(nil), c...)
		bad[0] ^= 1
		if _, _, ok := ValidatePath(root, p.Offset, len(data), p.Path, bad); ok {
			t.Fatalf("chunk %d: a changed chunk validates", i)
		}
		if i > 0 {
			if _, _, ok := ValidatePath(root, p.Offset, len(data), proofs[i-1].Path, c); ok {
				t.Fatalf("chunk %d validates with chunk %d's path", i, i-1)
			}
		}
	}
}
