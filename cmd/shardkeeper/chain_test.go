package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/arweave"
	"github.com/shardkeeper/shardkeeper/client"
	"github.com/shardkeeper/shardkeeper/services/chain"
	"github.com/shardkeeper/shardkeeper/test/fakearweave"
	"github.com/shardkeeper/shardkeeper/tlog"
	"golang.org/x/mod/sumdb/note"
)

// onFake posts chain events on a fake Arweave node mining by hand.
type onFake struct {
	t   *testing.T
	url string
	c   *arweave.Client
	f   *fakearweave.Fake
	w   *arweave.Wallet
}

func newOnFake(t *testing.T) *onFake {
	f := fakearweave.New(fakearweave.Config{Manual: true})
	srv := httptest.NewServer(f)
	t.Cleanup(func() { srv.Close(); f.Close() })
	return &onFake{t: t, url: srv.URL, c: arweave.NewClient(srv.URL, nil), f: f, w: arweave.TestWallet(t)}
}

// post anchors e as the event after prev, and mines it.
func (o *onFake) post(prev chain.Link, e *chain.Event) chain.Link {
	if err := e.Normalize(); err != nil {
		o.t.Fatal(err)
	}
	data, tags := chain.Payload("main", e, prev)
	tx := arweave.NewTx(data, tags)
	tx.LastTx, _ = o.c.Anchor(context.Background())
	tx.Reward, _ = o.c.Price(context.Background(), len(data))
	if err := tx.Sign(o.w); err != nil {
		o.t.Fatal(err)
	}
	if err := o.c.Post(context.Background(), tx); err != nil {
		o.t.Fatal(err)
	}
	o.f.Mine()
	return chain.Link{Seq: prev.Seq + 1, TxID: tx.IDString(), CID: e.CID}
}

// postN anchors event n of entity e after prev.
func (o *onFake) postN(prev chain.Link, n int) chain.Link {
	return o.post(prev, &chain.Event{EntityID: "e", Ver: int64(n), Op: "create", Vis: "public", TS: 1, Manifest: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))})
}

// chain verify on a chain of three events on the fake node: whole, then with a head whose
// prev_cid names another manifest.
func TestChainVerify(t *testing.T) {
	o := newOnFake(t)
	one := o.postN(chain.Link{}, 1)
	two := o.postN(one, 2)
	three := o.postN(two, 3)

	var out, errOut bytes.Buffer
	if code := run([]string{"chain", "verify", "--gateway", o.url, "--head", three.TxID, "--json"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s %s", code, out.String(), errOut.String())
	}
	var r chain.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil || !r.OK || r.Checked != 3 || r.Head.Seq != 3 || r.FirstError != nil {
		t.Fatalf("report %s (%v)", out.String(), err)
	}

	if code := run([]string{"chain", "verify", "--head", "x"}, &out, &errOut); code != 2 {
		t.Fatalf("without --gateway: exit %d", code)
	}
	if code := run([]string{"chain", "verify", "--gateway", o.url, "--head", "x", "--chain", "main"}, &out, &errOut); code != 2 {
		t.Fatalf("with --head and --chain: exit %d", code)
	}
	// --chain: the head comes from a node's GET /v1/chains/{chain}/head.
	node := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chains/main/head" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, `{"chain":"main","seq":3,"tx_id":%q}`, three.TxID)
	}))
	defer node.Close()
	out.Reset()
	if code := run([]string{"chain", "verify", "--gateway", o.url, "--chain", "main", "--addr", node.URL}, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "chain whole: 3 events in 3 transactions") || !strings.Contains(out.String(), "no orphan") {
		t.Fatalf("--chain: exit %d: %s %s", code, out.String(), errOut.String())
	}

	// A second event 3, naming event 2 but event 1's manifest, is mined: walked from, it
	// breaks at seq 2; the walk from the first event 3 finds it off the chain, a fork.
	forged := o.postN(chain.Link{Seq: 2, TxID: two.TxID, CID: one.CID}, 3)
	out.Reset()
	errOut.Reset()
	if code := run([]string{"chain", "verify", "--gateway", o.url, "--head", forged.TxID}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "chain broken at seq 2") || !strings.Contains(errOut.String(), "prev_cid") {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	errOut.Reset()
	if code := run([]string{"chain", "verify", "--gateway", o.url, "--head", three.TxID}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "chain broken at seq 3 (transaction "+forged.TxID+")") || !strings.Contains(errOut.String(), "orphan or a fork") {
		t.Fatalf("the fork: exit %d: %s", code, errOut.String())
	}
}

// chain verify --log-key checks the signatures of the checkpoints a chain anchors: the
// checkpoint of three events, anchored as event 4, holds with its log key and breaks the
// chain at seq 4 with another.
func TestChainVerifyAnchoredCheckpoints(t *testing.T) {
	o := newOnFake(t)
	var head chain.Link
	for n := 1; n <= 3; n++ {
		head = o.postN(head, n)
	}
	r := chain.Verify(context.Background(), o.c, head.TxID, nil)
	if !r.OK {
		t.Fatalf("%+v", r.FirstError)
	}
	tree := map[[2]int64]tlog.Hash{}
	reader := treeOf(tree)
	for i, leaf := range r.Leaves {
		nodes, _ := tlog.Append(reader, int64(i), leaf)
		for _, nd := range nodes {
			tree[[2]int64{int64(nd.Level), nd.Index}] = nd.Hash
		}
	}
	root, _ := tlog.Root(reader, 3)
	skey, vkey, _ := note.GenerateKey(nil, "log.test")
	signer, _ := note.NewSigner(skey)
	signed, _ := note.Sign(&note.Note{Text: fmt.Sprintf("%s\n3\n%s\n", chain.Origin("log.test", "main"), base64.StdEncoding.EncodeToString(root[:]))}, signer)
	manifest, _ := json.Marshal(map[string]string{"checkpoint": string(signed)})
	head = o.post(head, &chain.Event{EntityID: chain.CheckpointEntity, Ver: 3, Op: "checkpoint", Vis: "public", TS: 1, Manifest: manifest})

	var out, errOut bytes.Buffer
	if code := run([]string{"chain", "verify", "--gateway", o.url, "--head", head.TxID, "--log-key", vkey}, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "1 checkpoints anchored in it, the latest of 3 events") || !strings.Contains(out.String(), "signed by the log key") {
		t.Fatalf("exit %d: %s %s", code, out.String(), errOut.String())
	}
	_, otherKey, _ := note.GenerateKey(nil, "log.test")
	out.Reset()
	if code := run([]string{"chain", "verify", "--gateway", o.url, "--head", head.TxID, "--log-key", otherKey}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "chain broken at seq 4") || !strings.Contains(errOut.String(), "signature") {
		t.Fatalf("another key: exit %d: %s", code, errOut.String())
	}
}

// treeOf reads a tree kept in a map (tlog.Reader).
type treeOf map[[2]int64]tlog.Hash

func (m treeOf) Node(level int, index int64) (tlog.Hash, error) {
	h, ok := m[[2]int64{int64(level), index}]
	if !ok {
		return h, fmt.Errorf("node %d/%d missing", level, index)
	}
	return h, nil
}

// chain verify walks a chain of 10,000 events, saying where it is on stderr, and names the
// event whose data the gateway serves tampered.
func TestChainVerifyLongChain(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a chain of 10,000 events")
	}
	o := newOnFake(t)
	var err error
	if o.w, err = arweave.GenerateWallet(2048); err != nil {
		t.Fatal(err)
	}
	const n = 10000
	ids := make([]string, n+1)
	var head chain.Link
	anchor, _ := o.c.Anchor(context.Background())
	for i := 1; i <= n; i++ {
		e := &chain.Event{EntityID: fmt.Sprintf("device-%d", i%500), Ver: int64(i/500 + 1), Op: "update", Vis: "public", TS: int64(i),
			Manifest: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}
		if err := e.Normalize(); err != nil {
			t.Fatal(err)
		}
		data, tags := chain.Payload("main", e, head)
		tx := arweave.NewTx(data, tags)
		tx.LastTx, tx.Reward = anchor, "1000000000000"
		if err := tx.Sign(o.w); err != nil {
			t.Fatal(err)
		}
		if err := o.c.Post(context.Background(), tx); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		head = chain.Link{Seq: int64(i), TxID: tx.IDString(), CID: e.CID}
		ids[i] = head.TxID
		if i%500 == 0 { // a block now and then, and a fresh anchor
			o.f.Mine()
			anchor, _ = o.c.Anchor(context.Background())
		}
	}
	var out, errOut bytes.Buffer
	start := time.Now()
	if code := run([]string{"chain", "verify", "--gateway", o.url, "--head", head.TxID}, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "chain whole: 10000 events in 10000 transactions, head seq 10000") {
		t.Fatalf("exit %d: %s %s", code, out.String(), errOut.String())
	}
	took := time.Since(start)
	if took > 4*time.Second && !strings.Contains(errOut.String(), "checked ") {
		t.Errorf("a %v walk said nothing of its progress: %q", took, errOut.String())
	}
	t.Logf("verified %d events in %v", n, took)

	// The gateway serves event 4321's data changed by one byte.
	data, err := o.c.Data(context.Background(), ids[4321])
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.Replace(data, []byte(`"n":4321`), []byte(`"n":4329`), 1)
	if !o.f.Tamper(ids[4321], data) {
		t.Fatal("the fake lost event 4321")
	}
	out.Reset()
	errOut.Reset()
	if code := run([]string{"chain", "verify", "--gateway", o.url, "--head", head.TxID}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "chain broken at seq 4321") {
		t.Fatalf("tampered: exit %d: %s", code, errOut.String())
	}
}

// chain proof checks inclusion and consistency proofs offline against signed checkpoints, and
// refuses a proof of another event, of another tree, or checkpoints of another key.
func TestChainProof(t *testing.T) {
	skey, vkey, _ := note.GenerateKey(nil, "log.test")
	signer, _ := note.NewSigner(skey)
	dir := t.TempDir()
	write := func(name string, v any) string {
		path := filepath.Join(dir, name)
		b, ok := v.([]byte)
		if !ok {
			b, _ = json.Marshal(v)
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	// Seven events, as GET …/events/{seq} answers them (client.SignedEvent), and their tree.
	tree := treeOf{}
	var events []client.SignedEvent
	for seq := int64(1); seq <= 7; seq++ {
		e := client.SignedEvent{Seq: seq, EntityID: "dev-" + fmt.Sprint(seq), Ver: 1, CID: "bafkreicecnx2gvntm6fbcrvnc336qze6st5u7qq7457igegamd3bzkx7ri",
			Op: "create", Vis: "public", TS: seq, TxID: fmt.Sprintf("tx%d", seq), Status: "confirmed"}
		if seq > 1 {
			tx, c := fmt.Sprintf("tx%d", seq-1), e.CID
			e.PrevTx, e.PrevCID = &tx, &c
		}
		events = append(events, e)
		a := chain.Attestation{PI: e.EntityID, Ver: e.Ver, CID: e.CID, Op: e.Op, Vis: e.Vis, TS: e.TS, PrevTx: e.PrevTx, PrevCID: e.PrevCID, Seq: seq}
		nodes, _ := tlog.Append(tree, seq-1, tlog.LeafHash(chain.Leaf(a)))
		for _, nd := range nodes {
			tree[[2]int64{int64(nd.Level), nd.Index}] = nd.Hash
		}
	}
	checkpoint := func(s note.Signer, size int64) []byte {
		root, _ := tlog.Root(tree, size)
		b, _ := note.Sign(&note.Note{Text: fmt.Sprintf("%s\n%d\n%s\n", chain.Origin("log.test", "main"), size, base64.StdEncoding.EncodeToString(root[:]))}, s)
		return b
	}
	proof := func(p chain.Proof, hs []tlog.Hash) chain.Proof {
		for _, h := range hs {
			p.Hashes = append(p.Hashes, base64.StdEncoding.EncodeToString(h[:]))
		}
		return p
	}
	cp7, cp4 := write("cp7", checkpoint(signer, 7)), write("cp4", checkpoint(signer, 4))
	inc, _ := tlog.InclusionProof(tree, 2, 7)
	incFile := write("inclusion.json", proof(chain.Proof{Seq: 3, Size: 7}, inc))
	cons, _ := tlog.ConsistencyProof(tree, 4, 7)
	consFile := write("consistency.json", proof(chain.Proof{From: 4, To: 7}, cons))
	ev3 := write("event3.json", events[2])
	forged := events[2]
	forged.Ver = 2
	ev3forged := write("event3-forged.json", forged)
	_, otherVkey, _ := note.GenerateKey(nil, "log.test")

	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"inclusion", []string{"--log-key", vkey, "--checkpoint", cp7, "--inclusion", incFile, "--event", ev3}, 0, "event 3 is in the checkpoint's tree of 7 events"},
		{"consistency", []string{"--log-key", vkey, "--checkpoint", cp7, "--consistency", consFile, "--older", cp4}, 0, "the tree of 4 events is a prefix of the tree of 7"},
		{"another event", []string{"--log-key", vkey, "--checkpoint", cp7, "--inclusion", incFile, "--event", ev3forged}, 1, "not in the checkpoint's tree"},
		{"another key", []string{"--log-key", otherVkey, "--checkpoint", cp7, "--inclusion", incFile, "--event", ev3}, 1, "checkpoint signature"},
		{"a checkpoint of another size", []string{"--log-key", vkey, "--checkpoint", cp4, "--inclusion", incFile, "--event", ev3}, 1, "the checkpoint's tree has 4"},
		{"the older checkpoint swapped", []string{"--log-key", vkey, "--checkpoint", cp4, "--consistency", consFile, "--older", cp7}, 1, "the checkpoints have 7 and 4"},
		{"no proof", []string{"--log-key", vkey, "--checkpoint", cp7}, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(append([]string{"chain", "proof"}, tc.args...), &out, &errOut)
			if code != tc.code || !strings.Contains(out.String()+errOut.String(), tc.want) {
				t.Fatalf("exit %d (want %d): %s %s", code, tc.code, out.String(), errOut.String())
			}
		})
	}
}

// chain signer-key writes an owner-only key that the node's --chain-signer-key reads, prints
// its owner and address, and never replaces a file.
func TestSignerKeyCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "signer.key")
	var out, errOut bytes.Buffer
	if code := run([]string{"chain", "signer-key", "--out", path}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var printed struct{ Owner, Address string }
	if err := json.Unmarshal(out.Bytes(), &printed); err != nil || printed.Owner == "" || printed.Address == "" {
		t.Fatalf("printed %q: %v", out.String(), err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, mode %v", err, st.Mode())
	}
	b, _ := os.ReadFile(path)
	s, err := chain.ParseSignerKey(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := base64.RawURLEncoding.EncodeToString(s.Owner()); got != printed.Owner {
		t.Fatalf("the key's owner %s, printed %s", got, printed.Owner)
	}
	sum := sha256.Sum256(s.Owner())
	if base64.RawURLEncoding.EncodeToString(sum[:]) != printed.Address {
		t.Fatal("the printed address is not SHA-256 of the owner")
	}
	out.Reset()
	if code := run([]string{"chain", "signer-key", "--out", path}, &out, &errOut); code == 0 {
		t.Fatal("an existing key file was replaced")
	}
	if again, _ := os.ReadFile(path); !bytes.Equal(again, b) {
		t.Fatal("the key file changed")
	}
	if _, err := chain.ParseSignerKey([]byte("ed25519:short")); err == nil || strings.Contains(err.Error(), "short") {
		t.Fatalf("a bad key: %v (an error that does not repeat the content)", err)
	}
}
