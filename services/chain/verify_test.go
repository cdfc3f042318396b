package chain

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/shardkeeper/shardkeeper/arweave"
	"github.com/shardkeeper/shardkeeper/test/fakearweave"
)

// anchorer builds and posts events on the fake node, as the chain actor would, with hooks to
// break what a faulty or forged chain would break.
type anchorer struct {
	t    *testing.T
	c    *arweave.Client
	fake *fakearweave.Fake
	w    *arweave.Wallet
}

func newAnchorer(t *testing.T) *anchorer {
	f := fakearweave.New(fakearweave.Config{Manual: true})
	srv := httptest.NewServer(f)
	t.Cleanup(func() { srv.Close(); f.Close() })
	w := arweave.TestWallet(t)
	return &anchorer{t: t, c: arweave.NewClient(srv.URL, nil), fake: f, w: w}
}

// post anchors an event linked to prev, signed by w (a.w if nil), after mutate changes its
// data; it returns the link to it.
func (a *anchorer) post(prev Link, ver int64, w *arweave.Wallet, mutate func(data []byte) []byte) Link {
	a.t.Helper()
	e := &Event{EntityID: "device:" + fmt.Sprint(ver), Ver: ver, Op: "create", Vis: "public", TS: 1700000000000 + ver,
		Manifest: json.RawMessage(fmt.Sprintf(`{"n":%d, "name":"thing"}`, ver))}
	return a.postEvent("main", prev, e, w, mutate)
}

// postEvent anchors e as the event after prev in chain.
func (a *anchorer) postEvent(chain string, prev Link, e *Event, w *arweave.Wallet, mutate func(data []byte) []byte) Link {
	a.t.Helper()
	ctx := context.Background()
	if err := e.Normalize(); err != nil {
		a.t.Fatal(err)
	}
	data, tags := Payload(chain, e, prev)
	if mutate != nil {
		data = mutate(data)
	}
	tx := arweave.NewTx(data, tags)
	var err error
	if tx.LastTx, err = a.c.Anchor(ctx); err != nil {
		a.t.Fatal(err)
	}
	if tx.Reward, err = a.c.Price(ctx, len(data)); err != nil {
		a.t.Fatal(err)
	}
	if w == nil {
		w = a.w
	}
	if err := tx.Sign(w); err != nil {
		a.t.Fatal(err)
	}
	if err := a.c.Post(ctx, tx); err != nil {
		a.t.Fatal(err)
	}
	a.fake.Mine()
	return Link{Seq: prev.Seq + 1, TxID: tx.IDString(), CID: e.CID}
}

func TestVerify(t *testing.T) {
	a := newAnchorer(t)
	var head Link
	for i := range 5 {
		head = a.post(head, int64(i+1), nil, nil)
	}
	var seen []int64
	r := Verify(context.Background(), a.c, head.TxID, func(_ int, at Attestation) { seen = append(seen, at.Seq) })
	if !r.OK || r.Checked != 5 || r.Head.Seq != 5 || r.FirstError != nil || fmt.Sprint(seen) != "[5 4 3 2 1]" {
		t.Fatalf("a sound chain: %+v %v", r, seen)
	}

	other, err := arweave.NewWallet()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		build  func() Link
		seq    int64
		reason string
	}{
		{"a gap", func() Link {
			one := a.post(Link{}, 1, nil, nil)
			two := a.post(one, 2, nil, nil)
			return a.post(Link{Seq: 3, TxID: two.TxID, CID: two.CID}, 5, nil, nil) // seq 4 naming seq 2
		}, 2, "seq 2 where 3 was due"},
		{"a wrong prev_cid", func() Link {
			one := a.post(Link{}, 1, nil, nil)
			return a.post(Link{Seq: 1, TxID: one.TxID, CID: "bafkreicecnx2gvntm6fbcrvnc336qze6st5u7qq7457igegamd3bzkx7ri"}, 2, nil, nil)
		}, 1, "names prev_cid"},
		{"another signer", func() Link {
			one := a.post(Link{}, 1, other, nil)
			return a.post(one, 2, nil, nil)
		}, 1, "signed by wallet"},
		{"a manifest that is not the one attested", func() Link {
			return a.post(Link{}, 1, nil, func(d []byte) []byte {
				return []byte(strings.Replace(string(d), `"name":"thing"`, `"name":"other"`, 1))
			})
		}, 1, "the manifest's cid is"},
		{"a first event naming a previous one", func() Link {
			return a.post(Link{}, 1, nil, func(d []byte) []byte {
				return []byte(strings.Replace(string(d), `"prev_tx":null`, `"prev_tx":"`+strings.Repeat("B", 43)+`"`, 1))
			})
		}, 1, "the first event names a previous one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			head := tc.build()
			r := Verify(context.Background(), a.c, head.TxID, nil)
			if r.OK || r.FirstError == nil || r.FirstError.Seq != tc.seq || !strings.Contains(r.FirstError.Reason, tc.reason) {
				t.Fatalf("%+v %+v, want seq %d: %q", r, r.FirstError, tc.seq, tc.reason)
			}
		})
	}
	if r := Verify(context.Background(), a.c, strings.Repeat("A", 43), nil); r.OK || !strings.Contains(r.FirstError.Reason, "does not know") {
		t.Fatalf("unknown head: %+v", r.FirstError)
	}
}
