package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/shardkeeper/shardkeeper/actors/chain"
	"github.com/shardkeeper/shardkeeper/arweave"
	"github.com/shardkeeper/shardkeeper/test/fakearweave"
)

// chain verify on a chain of three events on the fake node: whole, then with a head whose
// prev_cid names another manifest.
func TestChainVerify(t *testing.T) {
	f := fakearweave.New(fakearweave.Config{Manual: true})
	srv := httptest.NewServer(f)
	defer srv.Close()
	defer f.Close()
	c := arweave.NewClient(srv.URL, nil)
	w := arweave.TestWallet(t)
	post := func(prev chain.Link, n int) chain.Link {
		e := &chain.Event{EntityID: "e", Ver: int64(n), Op: "create", Vis: "public", TS: 1, Manifest: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n))}
		if err := e.Normalize(); err != nil {
			t.Fatal(err)
		}
		data, tags := chain.Payload("main", e, prev)
		tx := arweave.NewTx(data, tags)
		tx.LastTx, _ = c.Anchor(context.Background())
		tx.Reward, _ = c.Price(context.Background(), len(data))
		if err := tx.Sign(w); err != nil {
			t.Fatal(err)
		}
		if err := c.Post(context.Background(), tx); err != nil {
			t.Fatal(err)
		}
		f.Mine()
		return chain.Link{Seq: prev.Seq + 1, TxID: tx.IDString(), CID: e.CID}
	}
	one := post(chain.Link{}, 1)
	two := post(one, 2)
	three := post(two, 3)

	var out, errOut bytes.Buffer
	if code := run([]string{"chain", "verify", "--gateway", srv.URL, "--head", three.TxID, "--json"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s %s", code, out.String(), errOut.String())
	}
	var r chain.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil || !r.OK || r.Checked != 3 || r.Head.Seq != 3 || r.FirstError != nil {
		t.Fatalf("report %s (%v)", out.String(), err)
	}

	forged := post(chain.Link{Seq: 2, TxID: two.TxID, CID: one.CID}, 3)
	out.Reset()
	errOut.Reset()
	if code := run([]string{"chain", "verify", "--gateway", srv.URL, "--head", forged.TxID}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "chain broken at seq 2") || !strings.Contains(errOut.String(), "prev_cid") {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if code := run([]string{"chain", "verify", "--head", "x"}, &out, &errOut); code != 2 {
		t.Fatalf("without --gateway: exit %d", code)
	}
	if code := run([]string{"chain", "verify", "--gateway", srv.URL, "--head", "x", "--chain", "main"}, &out, &errOut); code != 2 {
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
	if code := run([]string{"chain", "verify", "--gateway", srv.URL, "--chain", "main", "--addr", node.URL}, &out, &errOut); code != 0 ||
		!strings.Contains(out.String(), "chain whole: 3 events") {
		t.Fatalf("--chain: exit %d: %s %s", code, out.String(), errOut.String())
	}
}
