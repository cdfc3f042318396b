package chain

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/actors/actortest"
	"github.com/shardkeeper/shardkeeper/arweave"
	"github.com/shardkeeper/shardkeeper/test/await"
	"github.com/shardkeeper/shardkeeper/test/fakearweave"
)

// The live cross-check of bundle mode against arlocal (make arweave-crosscheck): arlocal
// unpacks every ANS-104 bundle it takes with arbundles, the ecosystem's own library, checks
// the items' signatures, and indexes each item with the wrapper it came in. A chain run
// against it must see its wrappers mined, and then: `chain verify`, through arlocal's own L1
// API and GraphQL, walks the chain whole with no orphan, and arlocal indexed every event's
// item, with the event's tags, and serves its payload.
func TestCrossCheckBundlesOnArlocal(t *testing.T) {
	fakearweave.RequireCrossCheck(t)
	for _, tc := range []struct {
		name   string
		wallet bool // items signed by the wallet (RSA) rather than an Ed25519 key
		pad    int  // manifest padding: bundles larger than a chunk go up by POST /chunk
	}{
		{name: "ed25519"},
		{name: "rsa", wallet: true},
		{name: "chunked", pad: 40 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			arl := fakearweave.StartArlocal(t)
			w := arweave.TestWallet(t)
			arl.Mint(t, w.Address())
			gw := arweave.NewClient(arl.URL, nil)
			cfg := bundleConfig(t, 8)
			if tc.wallet {
				cfg.ItemSigner = nil // the wallet signs the items
			} else {
				// arlocal refuses a bundle's item whose owner holds less than the item's
				// price, though it charges nothing for it.
				arl.Mint(t, arweave.AddressOf(cfg.ItemSigner.Owner()))
			}
			cfg.Gateway, cfg.Wallet, cfg.PollInterval, cfg.ReorgDepth = gw, w, 50*time.Millisecond, 2
			// arlocal prices data at 0.066 AR per MB, above the default cap for a chunk.
			cfg.MaxReward = 1e15
			e := &chainEnv{t: t, gw: gw, cfg: cfg}
			e.h = actortest.New(t, actortest.Options{}, Kind(cfg))

			const n = 20
			for i := range n {
				ev := event(fmt.Sprintf("dev-%d", i%3), int64(i/3+1))
				if tc.pad > 0 {
					ev.Manifest = json.RawMessage(fmt.Sprintf(`{"entity":"dev-%d","pad":%q}`, i, strings.Repeat("x", tc.pad)))
				}
				if _, err := e.append("main", ev); err != nil {
					t.Fatal(err)
				}
			}
			// arlocal unpacks a bundle posted by chunks when it mines it, and mines a bundle
			// whose chunks are not all there without its items: mine only once every bundle
			// the chain has is uploaded, as a real node would have the data by then.
			for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				if e.allUploaded("main") {
					_ = arl.Mine() // a block not mined now is mined by a later attempt
				}
				if h := e.head("main"); h.ConfirmedSeq == n && h.Queued == 0 {
					break
				} else if time.Now().After(deadline) {
					t.Fatalf("not every event confirmed after 90 s: head %+v, event 1 %+v, bundles %s", h, e.event("main", 1), e.bundles("main"))
				}
			}

			// arlocal unpacks a bundle posted whole while it takes the post, and may mine the
			// wrapper before its items: one more block mines those.
			await.True(t, 10*time.Second, "a block mined", func() bool { return arl.Mine() == nil })
			head := e.bundleHead("main")
			wrappers := e.walkBundles("main", head, n)
			r := Verify(context.Background(), gw, head, nil)
			if !r.OK || r.Checked != n || r.Transactions != len(wrappers) {
				t.Fatalf("chain verify through arlocal: %+v, first error %+v", r, r.FirstError)
			}
			if r.OrphanCheck != "ok" || len(r.Orphans) != 0 {
				t.Fatalf("orphans through arlocal's GraphQL: %q %v", r.OrphanCheck, r.Orphans)
			}
			// arlocal found each item by unpacking the wrappers itself; its GraphQL does not
			// resolve bundledIn (nor filter by it), so which wrapper holds an item is left to
			// the walk above.
			for seq := int64(1); seq <= n; seq++ {
				rec := e.event("main", seq)
				if tags := arl.Indexed(t, rec.TxID).Tags; tags["Chain"] != "main" || tags["Seq"] != fmt.Sprint(seq) {
					t.Fatalf("event %d: arlocal indexed item %s with the tags %v", seq, rec.TxID, tags)
				}
				a, _, err := ParsePayload(arl.Get(t, "/"+rec.TxID))
				if err != nil || a.Seq != seq || a.CID != rec.CID {
					t.Fatalf("event %d: arlocal serves item %s as seq %d, cid %s (%v); the chain has cid %s", seq, rec.TxID, a.Seq, a.CID, err, rec.CID)
				}
			}
		})
	}
}

// bundleRecs are chain's bundle records, as committed, in order.
func (e *chainEnv) bundleRecs(chain string) []bundleRec {
	var out []bundleRec
	for _, kv := range e.h.State(KindName, chain).Data {
		if !bytes.HasPrefix(kv.Key, bundleKey(0)[:2]) {
			continue
		}
		var b bundleRec
		if err := json.Unmarshal(kv.Value, &b); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// allUploaded reports whether every bundle of chain is confirmed or has its data uploaded.
func (e *chainEnv) allUploaded(chain string) bool {
	for _, b := range e.bundleRecs(chain) {
		if b.Status != StatusConfirmed && !b.Uploaded {
			return false
		}
	}
	return true
}

// bundles describes chain's bundle records, for a failure's message.
func (e *chainEnv) bundles(chain string) string {
	var out []string
	for _, b := range e.bundleRecs(chain) {
		out = append(out, fmt.Sprintf("%d-%d %s %s uploaded=%v", b.First, b.Last, b.TxID, b.Status, b.Uploaded))
	}
	return strings.Join(out, "; ")
}
