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
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
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
	// The bytes stay until the wrappers are ReorgDepth (here 50 blocks of 20 ms) deep.
	await.True(t, 30*time.Second, "every bundle final", func() bool {
		var m meta
		return e.stored("main", metaKey, &m) == nil && m.FinalSeq == n
	})
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
	// Each event's item is what the chain's storage no longer needs once final.
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

// The verifier finds a transaction of the chain's wallet, tagged with its name and mined, that
// the walk from the head does not pass — here a copy of an upload signed again on another
// anchor, as a replaced one would be — in both modes; while such a copy only waits in the
// mempool the chain still verifies.
func TestVerifyFindsOrphans(t *testing.T) {
	for _, mode := range []string{ModeL1, ModeBundle} {
		t.Run(mode, func(t *testing.T) {
			cfg := Config{}
			if mode == ModeBundle {
				cfg = bundleConfig(t, 2)
			}
			e := newChainEnvOn(t, cfg, fakearweave.Config{Manual: true})
			for i := range 5 {
				if _, err := e.append("main", event("dev", int64(i+1))); err != nil {
					t.Fatal(err)
				}
			}
			stop := make(chan struct{})
			mined := make(chan struct{})
			go func() {
				defer close(mined)
				for {
					select {
					case <-stop:
						return
					case <-time.After(20 * time.Millisecond):
						e.fake.Mine()
					}
				}
			}()
			await.True(t, 30*time.Second, "5 events confirmed", func() bool { return e.head("main").ConfirmedSeq == 5 })
			close(stop)
			<-mined
			head := *e.head("main").TxID
			if mode == ModeBundle {
				head = e.bundleHead("main")
			}
			ctx := context.Background()
			r := Verify(ctx, e.gw, head, nil)
			if !r.OK || r.OrphanCheck != "ok" || len(r.Orphans) != 0 {
				t.Fatalf("the chain as uploaded: %+v %+v", r, r.FirstError)
			}
			if want := map[string]int{ModeL1: 5, ModeBundle: 3}[mode]; r.Transactions != want {
				t.Errorf("walked %d transactions, want %d", r.Transactions, want)
			}
			// A gateway that ignores the listing's bundledIn filter lists the events' items
			// too: they are on the walk, not orphans.
			var items []arweave.Listed
			for seq := int64(1); seq <= 5; seq++ {
				items = append(items, arweave.Listed{ID: e.event("main", seq).TxID, Height: 1})
			}
			if r := Verify(ctx, listingItems{e.gw, items}, head, nil); !r.OK || r.OrphanCheck != "ok" || len(r.Orphans) != 0 {
				t.Fatalf("the events listed too: %+v %+v", r, r.FirstError)
			}
			// The upload holding event 3, signed again on the current anchor.
			var of string
			if mode == ModeBundle {
				of = e.walkBundles("main", head, 5)[1]
			} else {
				of = e.event("main", 3).TxID
			}
			tx, err := e.gw.Tx(ctx, of)
			if err != nil {
				t.Fatal(err)
			}
			if tx.Data, err = e.gw.Data(ctx, of); err != nil {
				t.Fatal(err)
			}
			copied := arweave.NewTx(tx.Data, tx.Tags)
			if copied.LastTx, err = e.gw.Anchor(ctx); err != nil {
				t.Fatal(err)
			}
			copied.Reward = tx.Reward
			if err := copied.Sign(e.cfg.Wallet); err != nil {
				t.Fatal(err)
			}
			if err := e.gw.Post(ctx, copied); err != nil {
				t.Fatal(err)
			}
			if r := Verify(ctx, e.gw, head, nil); !r.OK || len(r.Orphans) != 0 {
				t.Fatalf("with the copy pending: %+v %+v", r, r.FirstError)
			}
			e.fake.Mine()
			r = Verify(ctx, e.gw, head, nil)
			if r.OK || r.OrphanCheck != "ok" || fmt.Sprint(r.Orphans) != fmt.Sprint([]string{copied.IDString()}) ||
				r.FirstError == nil || r.FirstError.TxID != copied.IDString() || r.FirstError.Seq != 3 || !strings.Contains(r.FirstError.Reason, "orphan") {
				t.Fatalf("with the copy mined: %+v %+v", r, r.FirstError)
			}
			t.Logf("%s", r.FirstError.Reason)
		})
	}
}

// listingItems lists what the gateway lists, and items: a gateway that does not honour the
// listing's bundledIn filter (arlocal) lists the wallet's data items with its transactions.
type listingItems struct {
	*arweave.Client
	items []arweave.Listed
}

func (l listingItems) Transactions(ctx context.Context, address string, tags map[string]string) ([]arweave.Listed, error) {
	ls, err := l.Client.Transactions(ctx, address, tags)
	return append(ls, l.items...), err
}

// A chain switched from the L1 mode to bundles (the node restarted in bundle mode) goes on
// from its last L1 event, once that is confirmed: the first bundle starts after it, its first
// item names it, and the chain verifies from the last bundle down through the L1 events.
// Back on a node in the L1 mode, the chain stays in bundles.
func TestSwitchToBundles(t *testing.T) {
	e := newChainEnv(t, Config{})
	for i := range 3 {
		if _, err := e.append("main", event("dev", int64(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	e.waitConfirmed("main", 3)
	l1Head := *e.head("main").TxID
	cfg := bundleConfig(t, 2)
	cfg.Gateway, cfg.Wallet, cfg.PollInterval = e.cfg.Gateway, e.cfg.Wallet, e.cfg.PollInterval
	e.cfg = cfg
	e.h.Restart(Kind(cfg))
	for i := range 5 {
		if _, err := e.append("main", event("dev", int64(i+4))); err != nil {
			t.Fatal(err)
		}
	}
	await.True(t, 30*time.Second, "8 events confirmed", func() bool {
		h := e.head("main")
		return h.ConfirmedSeq == 8 && h.Queued == 0
	})
	r := Verify(context.Background(), e.gw, e.bundleHead("main"), nil)
	if !r.OK || r.Checked != 8 || r.OrphanCheck != "ok" || r.Transactions != 3+3 {
		t.Fatalf("verify: %+v %+v", r, r.FirstError)
	}
	// The first bundle's first item (served by the gateway by its id) names the last L1 event.
	data, err := e.gw.Data(context.Background(), e.event("main", 4).TxID)
	if err != nil {
		t.Fatal(err)
	}
	at, _, err := ParsePayload(data)
	if err != nil || at.Seq != 4 || at.PrevTx == nil || *at.PrevTx != l1Head {
		t.Fatalf("event 4 (seq %d) names %v, the last L1 event is %s (%v)", at.Seq, at.PrevTx, l1Head, err)
	}

	// The node back in the L1 mode (its signer key kept: a chain has one): three more events,
	// bundled.
	l1 := Config{Gateway: cfg.Gateway, Wallet: cfg.Wallet, ItemSigner: cfg.ItemSigner, PollInterval: cfg.PollInterval, BundleInterval: cfg.BundleInterval}
	e.h.Restart(Kind(l1))
	for i := range 3 {
		if _, err := e.append("main", event("dev", int64(i+9))); err != nil {
			t.Fatal(err)
		}
	}
	await.True(t, 30*time.Second, "11 events confirmed", func() bool {
		h := e.head("main")
		return h.ConfirmedSeq == 11 && h.Queued == 0 && h.BundleTx != nil && *h.BundleTx == e.bundleHead("main")
	})
	r = Verify(context.Background(), e.gw, e.bundleHead("main"), nil)
	if !r.OK || r.Checked != 11 || r.OrphanCheck != "ok" || r.Transactions < 3+4 {
		t.Fatalf("verify after the node went back to the L1 mode: %+v %+v", r, r.FirstError)
	}
	if tx, err := e.gw.Tx(context.Background(), e.event("main", 11).TxID); err == nil {
		t.Fatalf("event 11 is a transaction of its own (%s), not an item", tx.IDString())
	}

	// A node without the chain's signer key (its wallet would sign) signs none of its events;
	// with the key back, the chain goes on.
	l1.ItemSigner = nil
	e.h.Restart(Kind(l1))
	if _, err := e.append("main", event("dev", 12)); err != nil {
		t.Fatal(err)
	}
	height, _ := e.gw.Height(context.Background())
	await.True(t, 10*time.Second, "ten blocks", func() bool {
		h, err := e.gw.Height(context.Background())
		return err == nil && h >= height+10
	})
	if h := e.head("main"); h.Seq != 11 || h.Queued != 1 {
		t.Fatalf("a node with another item signer signed: %+v", h)
	}
	l1.ItemSigner = cfg.ItemSigner
	e.h.Restart(Kind(l1))
	await.True(t, 30*time.Second, "12 events confirmed", func() bool { return e.head("main").ConfirmedSeq == 12 })
}

// A reorg deeper than one block drops confirmed bundles: the chain posts their wrappers again
// with the same bytes when their anchors survive it, and signs them again (the wrappers only:
// the same items, ids and links) when the reorg dropped the block they anchor to; either way
// every event ends in exactly one mined bundle on the walk, and no bundle is orphaned.
func TestBundlesSurviveReorg(t *testing.T) {
	for _, c := range []struct {
		name        string
		anchorDepth int // the fake's SuggestedAnchorDepth
	}{{"anchors-survive", 12}, {"anchors-dropped", 1}} {
		t.Run(c.name, func(t *testing.T) {
			// Anchors valid 100 blocks (5 s here): re-posting in time is not what is tested.
			cfg := bundleConfig(t, 4)
			cfg.AnchorDepth = 100
			e := newChainEnvOn(t, cfg, fakearweave.Config{Manual: true, AnchorDepth: 100, SuggestedAnchorDepth: c.anchorDepth})
			mining := make(chan bool)
			done := make(chan struct{})
			t.Cleanup(func() { close(done) })
			go func() {
				on := true
				tick := time.NewTicker(50 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-done:
						return
					case on = <-mining:
					case <-tick.C:
						if on {
							e.fake.Mine()
						}
					}
				}
			}()
			for range c.anchorDepth { // blocks for the anchors to name
				e.fake.Mine()
			}
			// Six bundles of four, each mined before the next is made: a block each, at least.
			const n = 24
			for i := range n {
				if _, err := e.append("main", event(fmt.Sprintf("dev-%d", i%3), int64(i/3+1))); err != nil {
					t.Fatal(err)
				}
				if i%4 == 3 {
					await.True(t, 30*time.Second, "the bundle confirmed", func() bool { return e.head("main").ConfirmedSeq == int64(i+1) })
				}
			}
			before := e.waitBundled("main", n)
			mining <- false
			// Deep enough to drop the last two wrappers (and, with anchors at the tip, the
			// blocks they anchor to: the one before the older's block, at least).
			st, err := e.gw.StatusOf(context.Background(), before[len(before)-2])
			if err != nil {
				t.Fatal(err)
			}
			height, err := e.gw.Height(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			depth := int(height - st.BlockHeight + 1)
			if c.name == "anchors-dropped" {
				depth = int(height) // every block but the genesis: the anchors, the tips of then, too
			}
			dropped := e.fake.Reorg(depth)
			if len(dropped) < 2 || depth < 2 {
				t.Fatalf("a reorg of depth %d dropped %d wrappers", depth, len(dropped))
			}
			t.Logf("a reorg of depth %d dropped %d of %d wrappers", depth, len(dropped), len(before))
			mining <- true
			// Every event still confirmed, the dropped wrappers mined again (or replaced), the
			// walk whole and no orphan.
			after := e.waitBundledAgain("main", n)
			same := 0
			for _, id := range dropped {
				if slices.Contains(after, id) {
					same++
				}
			}
			switch c.name {
			case "anchors-survive":
				if same != len(dropped) || fmt.Sprint(after) != fmt.Sprint(before) {
					t.Errorf("the wrappers, posted again with the same bytes, changed: %v, then %v", before, after)
				}
			case "anchors-dropped":
				if same == len(dropped) {
					t.Errorf("every dropped wrapper was mined again as it was, though its anchor went with the reorg")
				}
			}
			// The items, their ids and links never changed.
			for seq := int64(1); seq <= n; seq++ {
				if rec := e.event("main", seq); rec.Status != StatusConfirmed {
					t.Errorf("event %d: %s", seq, rec.Status)
				}
			}
		})
	}
}

// waitBundledAgain is waitBundled after a reorg: the chain settles once every bundle's
// wrapper, as the chain names it, is mined on the node and confirmed, then the same checks
// hold.
func (e *chainEnv) waitBundledAgain(chain string, n int64) []string {
	e.t.Helper()
	await.True(e.t, 60*time.Second, "every bundle confirmed again after the reorg", func() bool {
		var m meta
		if e.stored(chain, metaKey, &m) != nil || m.ReorgFrom != 0 || m.RewrapFrom != 0 {
			return false
		}
		mined := e.fake.Mined()
		for first := int64(1); first <= n; {
			var b bundleRec
			if e.stored(chain, bundleKey(first), &b) != nil || b.Status != StatusConfirmed || !slices.Contains(mined, b.TxID) {
				return false
			}
			first = b.Last + 1
		}
		return true
	})
	return e.waitBundled(chain, n)
}

// noChunks is a gateway whose chunk uploads fail while refuse is set.
type noChunks struct {
	*arweave.Client
	refuse atomic.Bool
	tried  atomic.Int32
}

func (g *noChunks) PostChunks(ctx context.Context, t *arweave.Tx) error {
	g.tried.Add(1)
	if g.refuse.Load() {
		return fmt.Errorf("%w: POST /chunk: connection reset", arweave.ErrUnknownOutcome)
	}
	return g.Client.PostChunks(ctx, t)
}

// A bundle larger than a chunk is taken once its header is; its data follows by chunks. While
// they fail, the wrapper is mined but its events are not confirmed (their data is not on the
// node); the polls upload it again — a new activation, which knows nothing of the upload,
// too — and then the events are confirmed and the chain verifies, its data read back.
func TestBundleDataFollowsHeader(t *testing.T) {
	cfg := bundleConfig(t, 40)
	cfg.BundleInterval = time.Minute // the bundle is made once full: one of 40
	e := newChainEnv(t, cfg)
	gw := &noChunks{Client: e.gw}
	gw.refuse.Store(true)
	e.cfg.Gateway = gw
	e.h.Restart(Kind(e.cfg))
	big := strings.Repeat("x", 10_000) // 40 such events: about 400 KB, two chunks
	for i := range 40 {
		ev := event("dev", int64(i+1))
		ev.Manifest = json.RawMessage(fmt.Sprintf(`{"n":%d,"pad":%q}`, i, big))
		if _, err := e.append("main", ev); err != nil {
			t.Fatal(err)
		}
	}
	await.True(t, 30*time.Second, "the wrapper mined three deep", func() bool {
		id := e.bundleHead("main")
		if id == "" {
			return false
		}
		st, err := e.gw.StatusOf(context.Background(), id)
		return err == nil && !st.Pending && st.Confirmations >= 3
	})
	await.True(t, 10*time.Second, "uploads tried again by the polls", func() bool { return gw.tried.Load() >= 3 })
	t.Logf("uploads tried %d times", gw.tried.Load())
	if h := e.head("main"); h.ConfirmedSeq != 0 {
		t.Fatalf("events confirmed while their bundle's data never reached the node: %+v", h)
	}
	if _, err := e.gw.Data(context.Background(), e.bundleHead("main")); err == nil {
		t.Fatal("the node serves the data of a bundle whose chunks never came")
	}
	gw.refuse.Store(false)
	e.h.Restart(Kind(e.cfg))
	if ids := e.waitBundled("main", 40); len(ids) != 1 {
		t.Fatalf("%d bundles for 40 events, want one", len(ids))
	}
}

// missing is a gateway behind on one transaction: it answers 404 for its status, as a node
// that never saw it does, while another node mined it.
type missing struct {
	*arweave.Client
	id atomic.Value // string
}

func (g *missing) StatusOf(ctx context.Context, id string) (arweave.Status, error) {
	if v, _ := g.id.Load().(string); v == id {
		return arweave.Status{}, arweave.ErrNotFound
	}
	return g.Client.StatusOf(ctx, id)
}

// A gateway that lags behind — it says the last wrapper is missing while it was mined — makes
// the chain sign that wrapper again once its anchor looks expired. The chain keeps asking
// about the replaced wrapper; once the gateway catches up and shows it mined, the fork is
// recorded (forked, and a metric), and chain verify finds the replaced wrapper off the walk.
func TestBundleReplacedMinedIsForked(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := bundleConfig(t, 2)
	cfg.AnchorDepth, cfg.Metrics = 5, NewMetrics(reg)
	e := newChainEnvOn(t, cfg, fakearweave.Config{Manual: true, AnchorDepth: 5})
	gw := &missing{Client: e.gw}
	e.cfg.Gateway = gw
	e.h.Restart(Kind(e.cfg))
	for i := range 4 {
		if _, err := e.append("main", event("dev", int64(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	await.True(t, 10*time.Second, "two wrappers posted", func() bool {
		var b bundleRec
		return e.stored("main", bundleKey(3), &b) == nil && b.Status == StatusPosted
	})
	var last bundleRec
	if err := e.stored("main", bundleKey(3), &last); err != nil {
		t.Fatal(err)
	}
	gw.id.Store(last.TxID) // the gateway never shows it
	e.fake.Mine()          // both mined
	for range 12 {         // past its anchor's validity, as the chain judges it
		e.fake.Mine()
		time.Sleep(40 * time.Millisecond)
	}
	await.True(t, 10*time.Second, "the last wrapper signed again", func() bool {
		var b bundleRec
		return e.stored("main", bundleKey(3), &b) == nil && b.TxID != last.TxID && slices.Contains(b.Replaced, last.TxID)
	})
	e.fake.Mine()
	gw.id.Store("") // caught up: both wrappers of events 3-4 are mined
	await.True(t, 10*time.Second, "the fork recorded", func() bool {
		var b bundleRec
		return e.stored("main", bundleKey(3), &b) == nil && slices.Contains(b.Forked, last.TxID)
	})
	if got := testutil.ToFloat64(cfg.Metrics.events.WithLabelValues(eventForked)); got != 1 {
		t.Errorf("forked counted %v times, want 1", got)
	}
	r := Verify(context.Background(), e.gw, e.bundleHead("main"), nil)
	if r.OK || fmt.Sprint(r.Orphans) != fmt.Sprint([]string{last.TxID}) {
		t.Fatalf("verify: %+v %+v", r, r.FirstError)
	}
}
