package chain

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/arweave"
	"github.com/shardkeeper/shardkeeper/arweave/ans104"
	"github.com/shardkeeper/shardkeeper/test/await"
	"github.com/shardkeeper/shardkeeper/test/fakearweave"
)

// testSigner is an Ed25519 item signer from a fixed seed.
func testSigner(t *testing.T) ans104.Signer {
	seed := sha256.Sum256([]byte("chain bundle test signer"))
	s, err := ans104.NewEd25519Signer(ed25519.NewKeyFromSeed(seed[:]))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func bundleConfig(t *testing.T, maxItems int) Config {
	return Config{Mode: ModeBundle, ItemSigner: testSigner(t), BundleInterval: 50 * time.Millisecond, BundleMaxItems: maxItems}
}

// tagOf is tag name's value in tags ("" when absent).
func tagOf(tags []arweave.Tag, name string) string {
	for _, t := range tags {
		if string(t.Name) == name {
			return string(t.Value)
		}
	}
	return ""
}

// walkBundles walks chain's bundles on the node from the head wrapper back to the first, by
// their Prev-Bundle tags, and checks each: tags, an ANS-104 bundle whose items verify and are
// the chain's events in seq order, each linking to the item before it. It returns the
// wrappers' ids, oldest first.
func (e *chainEnv) walkBundles(chain string, head string, n int64) []string {
	e.t.Helper()
	ctx := context.Background()
	var ids []string
	next := n // the last seq the next bundle back must end at
	var after *ans104.DataItem
	for id := head; id != ""; {
		tx, err := e.gw.Tx(ctx, id)
		if err != nil {
			e.t.Fatalf("wrapper %s: %v", id, err)
		}
		if err := tx.Verify(); err != nil {
			e.t.Fatalf("wrapper %s: %v", id, err)
		}
		data, err := e.gw.Data(ctx, id)
		if err != nil {
			e.t.Fatalf("wrapper %s data: %v", id, err)
		}
		first, _ := strconv.ParseInt(tagOf(tx.Tags, "First-Seq"), 10, 64)
		last, _ := strconv.ParseInt(tagOf(tx.Tags, "Last-Seq"), 10, 64)
		if tagOf(tx.Tags, "Bundle-Format") != "binary" || tagOf(tx.Tags, "Bundle-Version") != "2.0.0" || tagOf(tx.Tags, "Chain") != chain || last != next || first < 1 || first > last {
			e.t.Fatalf("wrapper %s: tags %v, want the bundle ending at %d", id, tx.Tags, next)
		}
		items, err := ans104.ParseBundle(data)
		if err != nil || int64(len(items)) != last-first+1 {
			e.t.Fatalf("wrapper %s: %d items for events %d-%d: %v", id, len(items), first, last, err)
		}
		for i := len(items) - 1; i >= 0; i-- {
			it := items[i]
			if err := it.Verify(); err != nil {
				e.t.Fatalf("item %d: %v", first+int64(i), err)
			}
			at, _, err := ParsePayload(it.Data())
			if err != nil || at.Seq != first+int64(i) {
				e.t.Fatalf("item %d: seq %d, %v", first+int64(i), at.Seq, err)
			}
			rec := e.event(chain, at.Seq)
			if rec.TxID != it.IDString() {
				e.t.Fatalf("event %d names item %s, the bundle holds %s", at.Seq, rec.TxID, it.IDString())
			}
			if after != nil {
				next, _, _ := ParsePayload(after.Data())
				if next.PrevTx == nil || *next.PrevTx != it.IDString() {
					e.t.Fatalf("item %d does not link to item %d", next.Seq, at.Seq)
				}
			}
			after = it
		}
		ids = append(ids, id)
		next = first - 1
		id = tagOf(tx.Tags, "Prev-Bundle")
	}
	if next != 0 {
		e.t.Fatalf("the walk ended before seq 1, at %d", next+1)
	}
	slices.Reverse(ids)
	return ids
}

// waitBundled waits until n events of chain are confirmed, walks its bundles, and checks that
// the node mined exactly those wrappers: no orphan, no fork.
func (e *chainEnv) waitBundled(chain string, n int64) []string {
	e.t.Helper()
	await.True(e.t, 60*time.Second, fmt.Sprintf("%d events of %s confirmed", n, chain), func() bool {
		h := e.head(chain)
		return h.ConfirmedSeq == n && h.Queued == 0
	})
	head := e.bundleHead(chain)
	ids := e.walkBundles(chain, head, n)
	if r := Verify(context.Background(), e.gw, head, nil); !r.OK || r.Checked != int(n) || r.Head.Seq != n {
		e.t.Fatalf("verify: %+v %+v", r, r.FirstError)
	}
	mined := e.fake.Mined()
	slices.Sort(mined)
	sorted := slices.Sorted(slices.Values(ids))
	if fmt.Sprint(mined) != fmt.Sprint(sorted) {
		e.t.Fatalf("the node mined %v, the chain's bundles are %v: an orphan or a fork", mined, sorted)
	}
	return ids
}

// stored reads key of chain's committed storage into v.
func (e *chainEnv) stored(chain string, key []byte, v any) error {
	b, ok := e.h.State(KindName, chain).Get(string(key))
	if !ok {
		return fmt.Errorf("no %s in chain %s", key, chain)
	}
	return json.Unmarshal(b, v)
}

// bundleHead is the wrapper of chain's last bundle, read from its storage.
func (e *chainEnv) bundleHead(chain string) string {
	e.t.Helper()
	var m meta
	if err := e.stored(chain, metaKey, &m); err != nil {
		e.t.Fatal(err)
	}
	return m.BundleTx
}

// Events become data items in bundles: one wrapper per full bundle (or per interval), the
// wrappers chained by Prev-Bundle, the items by prev_tx, every event confirmed once its
// bundle is mined; the event's tx_id is its item's id.
func TestBundlesAnchorInOrder(t *testing.T) {
	e := newChainEnv(t, bundleConfig(t, 10))
	const n = 35
	for i := range n {
		if _, err := e.append("main", event(fmt.Sprintf("dev-%d", i%4), int64(i/4+1))); err != nil {
			t.Fatal(err)
		}
	}
	ids := e.waitBundled("main", n)
	if len(ids) > n/2 {
		t.Fatalf("%d wrappers for %d events in bundles of up to 10", len(ids), n)
	}
	for first := int64(1); first <= n; {
		var b bundleRec
		if err := e.stored("main", bundleKey(first), &b); err != nil {
			t.Fatal(err)
		}
		if b.Last-b.First+1 > 10 || b.Status != StatusConfirmed || b.Tx != nil {
			t.Fatalf("bundle %d-%d: %d items (at most 10), status %s, header kept %v", b.First, b.Last, b.Last-b.First+1, b.Status, b.Tx != nil)
		}
		first = b.Last + 1
	}
	// Each event's item is what the chain's storage no longer needs.
	for seq := int64(1); seq <= n; seq++ {
		var r record
		if err := e.stored("main", eventKey(seq), &r); err != nil || r.Item != nil || r.Status != StatusConfirmed {
			t.Fatalf("event %d: %v, item kept %v, status %s", seq, err, r.Item != nil, r.Status)
		}
	}
}

// A wrapper the node drops from its mempool is posted again with the same bytes, and one
// whose anchor expires unmined is signed again — only the wrapper: the items, their ids and
// their links stay — and the chain on the node is whole, with no orphan.
func TestBundleWrapperExpiredSignedAgain(t *testing.T) {
	e := newChainEnvOn(t, bundleConfig(t, 5), fakearweave.Config{Manual: true, AnchorDepth: 5})
	for i := range 12 {
		if _, err := e.append("main", event("dev", int64(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	await.True(t, 20*time.Second, "12 events in bundles, each wrapper taken", func() bool {
		var m meta
		if e.stored("main", metaKey, &m) != nil || m.BundledSeq != 12 {
			return false
		}
		for first := int64(1); first <= 12; first += 5 {
			var b bundleRec
			if e.stored("main", bundleKey(first), &b) != nil || b.Status != StatusPosted {
				return false
			}
		}
		return true
	})
	items := map[int64]string{}
	for seq := int64(1); seq <= 12; seq++ {
		items[seq] = e.event("main", seq).TxID
	}
	e.expireUnmined(t)
	e.waitBundled("main", 12)
	for seq := int64(1); seq <= 12; seq++ {
		if got := e.event("main", seq).TxID; got != items[seq] {
			t.Fatalf("event %d: item %s, was %s: items are never signed again", seq, got, items[seq])
		}
	}
	var replaced int
	for first := int64(1); first <= 12; first += 5 {
		var b bundleRec
		if err := e.stored("main", bundleKey(first), &b); err != nil {
			t.Fatal(err)
		}
		replaced += len(b.Replaced)
	}
	if replaced == 0 {
		t.Fatal("no wrapper was signed again, though every anchor expired")
	}
}

// Answers dropped after the node took a wrapper, wrappers dropped from the mempool and posts
// refused, across failovers while items are signed and bundles posted: every event lands in
// exactly one mined bundle, and no wrapper the node mined is off the chain.
func TestBundlesUnderFaults(t *testing.T) {
	e := newChainEnv(t, bundleConfig(t, 4))
	e.fake.SetFaults(fakearweave.Faults{DropAfterAccept: 0.3, EvictFromMempool: 0.2, TooMany: 0.1})
	for i := range 30 {
		if _, err := e.append("faulty", event("e", int64(i+1))); err != nil {
			t.Fatal(err)
		}
		if i == 10 || i == 20 {
			e.h.Failover()
		}
	}
	await.True(t, 30*time.Second, "some bundles made", func() bool {
		var m meta
		return e.stored("faulty", metaKey, &m) == nil && m.BundledSeq >= 12
	})
	e.h.Failover()
	e.fake.SetFaults(fakearweave.Faults{})
	e.waitBundled("faulty", 30)
}

// The verifier finds a bundle whose data a gateway serves altered, and names it.
func TestVerifyBundleBreaks(t *testing.T) {
	e := newChainEnv(t, bundleConfig(t, 3))
	for i := range 7 {
		if _, err := e.append("main", event("dev", int64(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	ids := e.waitBundled("main", 7)
	// The middle bundle's data, one byte changed: its data root no longer holds.
	data, err := e.gw.Data(context.Background(), ids[1])
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 1
	e.fake.Tamper(ids[1], data)
	r := Verify(context.Background(), e.gw, ids[len(ids)-1], nil)
	if r.OK || r.FirstError == nil || !strings.Contains(r.FirstError.Reason, "bundle "+ids[1]) {
		t.Fatalf("a tampered bundle: %+v %+v", r, r.FirstError)
	}
}
