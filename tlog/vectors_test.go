package tlog_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/cid"
	"github.com/shardkeeper/shardkeeper/client"
	"github.com/shardkeeper/shardkeeper/services/chain"
	"github.com/shardkeeper/shardkeeper/tlog"
	"golang.org/x/mod/sumdb/note"
)

// The golden vectors of the TypeScript client (clients/typescript): what Go computes for the
// transparency log — leaves, roots, inclusion and consistency proofs, signed checkpoints, and
// the verdict of chain.CheckInclusion and chain.CheckConsistency (the checks of
// `shardkeeper chain proof`) on valid and tampered inputs — and the partition of an actor
// (actors.PartitionOf), which the client's routing must compute alike. The client verifies
// every vector offline; this test checks that the committed files are still what Go computes.
// Every input is fixed and Ed25519 signatures are deterministic, so the files are stable.
//
// Regenerate them with
//
//	SHARDKEEPER_UPDATE_VECTORS=1 go test ./tlog -run TestClientVectors
const vectorsDir = "../clients/typescript/test/vectors"

func TestClientVectors(t *testing.T) {
	files := map[string]any{
		"proofs.json":     proofVectors(t),
		"trees.json":      treeVectors(t),
		"partitions.json": partitionVectors(),
	}
	update := os.Getenv("SHARDKEEPER_UPDATE_VECTORS") == "1"
	for name, v := range files {
		want, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, '\n')
		path := filepath.Join(vectorsDir, name)
		if update {
			if err := os.MkdirAll(vectorsDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (regenerate with SHARDKEEPER_UPDATE_VECTORS=1 go test ./tlog -run TestClientVectors)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what Go computes: regenerate it with SHARDKEEPER_UPDATE_VECTORS=1 go test ./tlog -run TestClientVectors", path)
		}
	}
}

// fixed returns n bytes derived from label.
func fixed(label string) []byte {
	s := sha256.Sum256([]byte("shardkeeper client vectors " + label))
	return s[:]
}

// logKey is a signed-note key pair made from a fixed seed: its signer and verifier key.
func logKey(t *testing.T, name, seedLabel string) (note.Signer, string) {
	t.Helper()
	priv := ed25519.NewKeyFromSeed(fixed(seedLabel))
	vkey, err := note.NewEd25519VerifierKey(name, priv.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	hash := strings.Split(vkey, "+")[1]
	skey := fmt.Sprintf("PRIVATE+KEY+%s+%s+%s", name, hash, base64.StdEncoding.EncodeToString(append([]byte{1}, priv.Seed()...)))
	signer, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	return signer, vkey
}

// mem is a tlog.Reader over stored nodes.
type mem map[[2]int64]tlog.Hash

func (m mem) Node(level int, index int64) (tlog.Hash, error) {
	h, ok := m[[2]int64{int64(level), index}]
	if !ok {
		return tlog.Hash{}, fmt.Errorf("no node %d/%d", level, index)
	}
	return h, nil
}

// tree stores leaves and answers roots and proofs.
type tree struct {
	t *testing.T
	m mem
	n int64
}

func (tr *tree) add(leaf tlog.Hash) {
	nodes, err := tlog.Append(tr.m, tr.n, leaf)
	if err != nil {
		tr.t.Fatal(err)
	}
	for _, nd := range nodes {
		tr.m[[2]int64{int64(nd.Level), nd.Index}] = nd.Hash
	}
	tr.n++
}

func (tr *tree) root(size int64) tlog.Hash {
	r, err := tlog.Root(tr.m, size)
	if err != nil {
		tr.t.Fatal(err)
	}
	return r
}

func (tr *tree) inclusion(index, size int64) []string {
	p, err := tlog.InclusionProof(tr.m, index, size)
	if err != nil {
		tr.t.Fatal(err)
	}
	return b64s(p)
}

func (tr *tree) consistency(from, to int64) []string {
	p, err := tlog.ConsistencyProof(tr.m, from, to)
	if err != nil {
		tr.t.Fatal(err)
	}
	return b64s(p)
}

func b64s(hs []tlog.Hash) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = base64.StdEncoding.EncodeToString(h[:])
	}
	return out
}

func b64(h tlog.Hash) string { return base64.StdEncoding.EncodeToString(h[:]) }

// flip changes one bit of the first hash of a proof.
func flip(hashes []string) []string {
	out := append([]string(nil), hashes...)
	b, _ := base64.StdEncoding.DecodeString(out[0])
	b[0] ^= 1
	out[0] = base64.StdEncoding.EncodeToString(b)
	return out
}

// event is an event as GET /v1/chains/{chain}/events/{seq} answers it: the Go client's.
type event client.SignedEvent

func (e event) attestation() chain.Attestation {
	return chain.Attestation{PI: e.EntityID, Ver: e.Ver, CID: e.CID, Op: e.Op, Vis: e.Vis, TS: e.TS, PrevTx: e.PrevTx, PrevCID: e.PrevCID, Seq: e.Seq}
}

type leafVector struct {
	Seq       int64  `json:"seq"`
	Canonical string `json:"canonical"` // the leaf: the attestation's canonical JSON
	Hash      string `json:"hash"`      // SHA-256(0x00 ‖ leaf), base64
}

type inclusionVector struct {
	Name       string      `json:"name"`
	LogKey     string      `json:"log_key"`
	Checkpoint string      `json:"checkpoint"`
	Event      event       `json:"event"`
	Proof      chain.Proof `json:"proof"`
	OK         bool        `json:"ok"`
	Error      string      `json:"error,omitempty"` // Go's reason, for people; the client words its own
}

type consistencyVector struct {
	Name   string      `json:"name"`
	LogKey string      `json:"log_key"`
	Older  string      `json:"older"`
	Newer  string      `json:"newer"`
	Proof  chain.Proof `json:"proof"`
	OK     bool        `json:"ok"`
	Error  string      `json:"error,omitempty"`
}

type proofFile struct {
	Generator   string              `json:"generator"`
	LogKey      string              `json:"log_key"`
	Origin      string              `json:"origin"`
	Events      []event             `json:"events"`
	Leaves      []leafVector        `json:"leaves"`
	Checkpoints map[string]string   `json:"checkpoints"` // by size
	Inclusion   []inclusionVector   `json:"inclusion"`
	Consistency []consistencyVector `json:"consistency"`
}

// proofVectors is a chain of seven events, its checkpoints of every size, and the checks of
// `shardkeeper chain proof` on proofs of it, valid and tampered.
func proofVectors(t *testing.T) proofFile {
	const keyName, chainName, n = "log.example.com", "main", 7
	signer, vkey := logKey(t, keyName, "log key")
	otherSigner, otherVKey := logKey(t, keyName, "another log key")
	f := proofFile{Generator: "tlog/vectors_test.go", LogKey: vkey, Origin: chain.Origin(keyName, chainName), Checkpoints: map[string]string{}}

	tr := &tree{t: t, m: mem{}}
	var prevTx, prevCID *string
	for i := int64(1); i <= n; i++ {
		_, id, err := cid.OfJSON(fmt.Appendf(nil, `{"title":"report %d","sha256":"%x"}`, i, fixed(fmt.Sprint("manifest ", i))))
		if err != nil {
			t.Fatal(err)
		}
		entity := []string{"doc-1", "doc-2", "a.b:c@d-e_f"}[i%3]
		e := event{Seq: i, EntityID: entity, Ver: (i + 2) / 3, CID: id, Op: []string{"create", "update"}[i%2], Vis: "public",
			TS: 1795623859529 + i*1013, TxID: base64.RawURLEncoding.EncodeToString(fixed(fmt.Sprint("tx ", i))),
			PrevTx: prevTx, PrevCID: prevCID, Status: "confirmed"}
		f.Events = append(f.Events, e)
		leaf := chain.Leaf(e.attestation())
		h := tlog.LeafHash(leaf)
		f.Leaves = append(f.Leaves, leafVector{Seq: i, Canonical: string(leaf), Hash: b64(h)})
		tr.add(h)
		tx, c := e.TxID, e.CID
		prevTx, prevCID = &tx, &c
	}

	sign := func(s note.Signer, text string) string {
		b, err := note.Sign(&note.Note{Text: text}, s)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	body := func(size int64) string {
		return fmt.Sprintf("%s\n%d\n%s\n", f.Origin, size, b64(tr.root(size)))
	}
	for size := int64(1); size <= n; size++ {
		f.Checkpoints[fmt.Sprint(size)] = sign(signer, body(size))
	}
	cp := func(size int64) string { return f.Checkpoints[fmt.Sprint(size)] }
	proof := func(seq, size int64) chain.Proof {
		return chain.Proof{Seq: seq, Size: size, Hashes: tr.inclusion(seq-1, size)}
	}

	inclusion := func(name, key, checkpoint string, e event, p chain.Proof) {
		v := inclusionVector{Name: name, LogKey: key, Checkpoint: checkpoint, Event: e, Proof: p}
		if err := chain.CheckInclusion([]byte(checkpoint), key, e.attestation(), p); err != nil {
			v.Error = err.Error()
		} else {
			v.OK = true
		}
		f.Inclusion = append(f.Inclusion, v)
	}
	for size := int64(1); size <= n; size++ {
		for seq := int64(1); seq <= size; seq++ {
			inclusion(fmt.Sprintf("event %d in the tree of %d", seq, size), vkey, cp(size), f.Events[seq-1], proof(seq, size))
		}
	}
	e3 := f.Events[2]
	changed := func(edit func(*event)) event {
		e := e3
		edit(&e)
		return e
	}
	inclusion("an event with another ts", vkey, cp(n), changed(func(e *event) { e.TS++ }), proof(3, n))
	inclusion("an event with another entity", vkey, cp(n), changed(func(e *event) { e.EntityID = "doc-9" }), proof(3, n))
	inclusion("an event with another cid", vkey, cp(n), changed(func(e *event) { e.CID = f.Events[3].CID }), proof(3, n))
	inclusion("an event with another previous transaction", vkey, cp(n), changed(func(e *event) { e.PrevTx = &f.Events[0].TxID }), proof(3, n))
	inclusion("an event without its previous event", vkey, cp(n), changed(func(e *event) { e.PrevTx, e.PrevCID = nil, nil }), proof(3, n))
	inclusion("an event that is another", vkey, cp(n), f.Events[3], proof(3, n))
	inclusion("a proof hash flipped", vkey, cp(n), e3, chain.Proof{Seq: 3, Size: n, Hashes: flip(proof(3, n).Hashes)})
	p := proof(3, n)
	inclusion("a proof cut short", vkey, cp(n), e3, chain.Proof{Seq: 3, Size: n, Hashes: p.Hashes[:len(p.Hashes)-1]})
	inclusion("a proof with a hash too many", vkey, cp(n), e3, chain.Proof{Seq: 3, Size: n, Hashes: append(append([]string(nil), p.Hashes...), p.Hashes[0])})
	inclusion("a proof with no hashes", vkey, cp(n), e3, chain.Proof{Seq: 3, Size: n, Hashes: []string{}})
	inclusion("a proof of another tree size", vkey, cp(n), e3, proof(3, 4))
	inclusion("a proof of another event", vkey, cp(n), e3, proof(4, n))
	inclusion("a proof hash that is not base64", vkey, cp(n), e3, chain.Proof{Seq: 3, Size: n, Hashes: append([]string{"not base64!"}, p.Hashes[1:]...)})
	inclusion("a proof hash of 31 bytes", vkey, cp(n), e3, chain.Proof{Seq: 3, Size: n, Hashes: append([]string{base64.StdEncoding.EncodeToString(make([]byte, 31))}, p.Hashes[1:]...)})
	inclusion("a checkpoint signed by another key", vkey, sign(otherSigner, body(n)), e3, proof(3, n))
	inclusion("a checkpoint checked with another key", otherVKey, cp(n), e3, proof(3, n))
	parts := strings.Split(vkey, "+")
	inclusion("a log key with a wrong hash", parts[0]+"+00000000+"+parts[2], cp(n), e3, proof(3, n))
	inclusion("a log key that is not one", "log.example.com", cp(n), e3, proof(3, n))
	forged := strings.Replace(cp(n), b64(tr.root(n)), b64(tr.root(n-1)), 1)
	inclusion("a checkpoint whose root was replaced", vkey, forged, e3, proof(3, n))
	resized := strings.Replace(cp(n), fmt.Sprintf("\n%d\n", n), fmt.Sprintf("\n%d\n", n+1), 1)
	inclusion("a checkpoint whose size was replaced", vkey, resized, e3, proof(3, n))
	inclusion("a checkpoint without its signature", vkey, body(n), e3, proof(3, n))
	inclusion("a checkpoint with a blank signature line", vkey, body(n)+"\n", e3, proof(3, n))
	inclusion("a checkpoint signed by both keys", vkey, signBoth(t, body(n), signer, otherSigner), e3, proof(3, n))
	inclusion("a checkpoint signed by both keys checked with the other", otherVKey, signBoth(t, body(n), signer, otherSigner), e3, proof(3, n))
	inclusion("a checkpoint with a control character", vkey, strings.Replace(cp(n), f.Origin, f.Origin+"\t", 1), e3, proof(3, n))
	inclusion("a checkpoint that is not one", vkey, sign(signer, "just a note\n"), e3, proof(3, n))
	inclusion("a checkpoint of size zero", vkey, sign(signer, fmt.Sprintf("%s\n0\n%s\n", f.Origin, b64(tr.root(n)))), e3, proof(3, n))
	inclusion("a checkpoint with an extension line", vkey, sign(signer, body(n)+"extension\n"), e3, proof(3, n))

	consistency := func(name, key, older, newer string, p chain.Proof) {
		v := consistencyVector{Name: name, LogKey: key, Older: older, Newer: newer, Proof: p}
		if err := chain.CheckConsistency([]byte(older), []byte(newer), key, p); err != nil {
			v.Error = err.Error()
		} else {
			v.OK = true
		}
		f.Consistency = append(f.Consistency, v)
	}
	cproof := func(from, to int64) chain.Proof {
		return chain.Proof{From: from, To: to, Hashes: tr.consistency(from, to)}
	}
	for to := int64(1); to <= n; to++ {
		for from := int64(1); from <= to; from++ {
			consistency(fmt.Sprintf("the tree of %d in the tree of %d", from, to), vkey, cp(from), cp(to), cproof(from, to))
		}
	}
	consistency("checkpoints given in the wrong order", vkey, cp(n), cp(4), cproof(4, n))
	consistency("a proof hash flipped", vkey, cp(4), cp(n), chain.Proof{From: 4, To: n, Hashes: flip(cproof(4, n).Hashes)})
	consistency("a proof of other sizes", vkey, cp(3), cp(n), cproof(4, n))
	consistency("a proof with no hashes", vkey, cp(3), cp(n), chain.Proof{From: 3, To: n, Hashes: []string{}})
	cp37 := cproof(3, n)
	consistency("a proof cut short", vkey, cp(3), cp(n), chain.Proof{From: 3, To: n, Hashes: cp37.Hashes[:len(cp37.Hashes)-1]})
	consistency("a proof between equal trees with a hash", vkey, cp(n), cp(n), chain.Proof{From: n, To: n, Hashes: cp37.Hashes[:1]})
	consistency("an older checkpoint signed by another key", vkey, sign(otherSigner, body(4)), cp(n), cproof(4, n))
	consistency("a newer checkpoint signed by another key", vkey, cp(4), sign(otherSigner, body(n)), cproof(4, n))
	consistency("an older checkpoint of another tree", vkey, sign(signer, fmt.Sprintf("%s\n4\n%s\n", f.Origin, b64(tlog.LeafHash([]byte("another tree"))))), cp(n), cproof(4, n))
	consistency("a newer checkpoint whose root was replaced", vkey, cp(4), forged, cproof(4, n))
	return f
}

// signBoth signs text with two keys.
func signBoth(t *testing.T, text string, a, b note.Signer) string {
	s, err := note.Sign(&note.Note{Text: text}, a, b)
	if err != nil {
		t.Fatal(err)
	}
	return string(s)
}

type treeInclusion struct {
	Index  int64    `json:"index"`
	Size   int64    `json:"size"`
	Hashes []string `json:"hashes"`
}

type treeConsistency struct {
	From   int64    `json:"from"`
	To     int64    `json:"to"`
	Hashes []string `json:"hashes"`
}

type treeFile struct {
	Generator   string            `json:"generator"`
	Leaves      []string          `json:"leaves"` // the leaves' data, base64
	LeafHashes  []string          `json:"leaf_hashes"`
	Roots       []string          `json:"roots"` // roots[i] is the root of the first i+1 leaves
	Inclusion   []treeInclusion   `json:"inclusion"`
	Consistency []treeConsistency `json:"consistency"`
}

// treeVectors is every root, inclusion proof and consistency proof of a tree of 17 leaves
// (a power of two, one past it, and the sizes between), the RFC 6962 hashing alone.
func treeVectors(t *testing.T) treeFile {
	const n = 17
	f := treeFile{Generator: "tlog/vectors_test.go"}
	tr := &tree{t: t, m: mem{}}
	for i := 0; i < n; i++ {
		data := fixed(fmt.Sprint("leaf ", i))[:i%5+1]
		f.Leaves = append(f.Leaves, base64.StdEncoding.EncodeToString(data))
		h := tlog.LeafHash(data)
		f.LeafHashes = append(f.LeafHashes, b64(h))
		tr.add(h)
		f.Roots = append(f.Roots, b64(tr.root(int64(i+1))))
	}
	for size := int64(1); size <= n; size++ {
		for index := int64(0); index < size; index++ {
			f.Inclusion = append(f.Inclusion, treeInclusion{Index: index, Size: size, Hashes: tr.inclusion(index, size)})
		}
		for from := int64(1); from <= size; from++ {
			f.Consistency = append(f.Consistency, treeConsistency{From: from, To: size, Hashes: tr.consistency(from, size)})
		}
	}
	return f
}

type partitionVector struct {
	Kind       string `json:"kind"`
	ID         string `json:"id"`
	Partitions int    `json:"partitions"`
	Partition  uint32 `json:"partition"`
}

// partitionVectors is the partition of actors of every kind the client routes, for several
// partition counts (the server's --partitions is 1..4096).
func partitionVectors() map[string]any {
	var out []partitionVector
	for _, kind := range []string{"device-registry", "server-registry", "nonce-oracle", "chain"} {
		for _, id := range []string{"default", "acme", "prod", "main", "5b", "10", "Zz", "a", "registry_with-64-characters-0123456789abcdefghijklmnopqrstuvwxyzAB", "é"} {
			for _, p := range []int{1, 3, 16, 256, 4096} {
				out = append(out, partitionVector{Kind: kind, ID: id, Partitions: p, Partition: actors.PartitionOf(kind, id, p)})
			}
		}
	}
	return map[string]any{"generator": "tlog/vectors_test.go", "partitions": out}
}
