package fakearweave

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/shardkeeper/shardkeeper/arweave"
)

// A reorg replaces the last blocks by empty ones of the same heights: exactly the
// transactions they held are dropped (404, not pending), those below stay mined and keep
// counting confirmations, a mempool transaction anchored on a replaced block is dropped, and
// the same bytes posted again are taken as new and mined when their anchor survived; an
// anchor on a replaced block is refused as a node refuses it.
func TestReorg(t *testing.T) {
	f, c, url := start(t)
	w := wallet(t)
	ctx := context.Background()

	below := signed(t, c, w, 10, nil) // anchored on genesis
	post(t, c, below)
	f.Mine()                             // 1: below
	survives := signed(t, c, w, 11, nil) // anchored on block 1, which stays
	post(t, c, survives)
	f.Mine()                           // 2: survives
	doomed := signed(t, c, w, 12, nil) // anchored on block 2, replaced
	post(t, c, doomed)
	f.Mine()                               // 3: doomed
	pendingOld := signed(t, c, w, 13, nil) // anchored on block 3, replaced
	anchoredBelow := signed(t, c, w, 14, func(tx *arweave.Tx) { tx.LastTx = blockHash(t, url, 1) })
	post(t, c, pendingOld, anchoredBelow)
	hashes := []string{blockAt(t, url, 1).Hash, blockAt(t, url, 2).Hash, blockAt(t, url, 3).Hash}

	dropped := f.Reorg(2)
	if got, want := fmt.Sprint(dropped), fmt.Sprint([]string{survives.IDString(), doomed.IDString()}); got != want {
		t.Fatalf("dropped %s, want %s", got, want)
	}
	if f.Height() != 3 {
		t.Fatalf("height %d after the reorg, want 3", f.Height())
	}
	if b := blockAt(t, url, 1); b.Hash != hashes[0] || len(b.Txs) != 1 {
		t.Fatalf("block 1 changed: %+v", b)
	}
	for h := 2; h <= 3; h++ {
		b := blockAt(t, url, h)
		if b.Hash == hashes[h-1] || len(b.Txs) != 0 || b.Previous != blockAt(t, url, h-1).Hash {
			t.Fatalf("block %d after the reorg: %+v", h, b)
		}
	}
	for _, tx := range []*arweave.Tx{survives, doomed, pendingOld} {
		if s, err := c.StatusOf(ctx, tx.IDString()); !errors.Is(err, arweave.ErrNotFound) {
			t.Fatalf("%s after the reorg: %+v %v, want 404", tx.IDString(), s, err)
		}
	}
	if s, err := c.StatusOf(ctx, below.IDString()); err != nil || s.BlockHeight != 1 || s.Confirmations != 3 || s.BlockHash != hashes[0] {
		t.Fatalf("below the fork: %+v %v", s, err)
	}
	if s, err := c.StatusOf(ctx, anchoredBelow.IDString()); err != nil || !s.Pending {
		t.Fatalf("pending, anchored below the fork: %+v %v", s, err)
	}
	if got := f.Mined(); !slices.Equal(got, []string{below.IDString()}) {
		t.Fatalf("Mined %v after the reorg", got)
	}

	// The same bytes again: taken as new when the anchor survived, refused when it did not.
	post(t, c, survives)
	err := c.Post(ctx, doomed)
	if !errors.Is(err, arweave.ErrRejected) || !strings.Contains(err.Error(), msgInvalidAnchor) {
		t.Fatalf("posting again a transaction anchored on a replaced block: %v", err)
	}
	f.Mine()
	for _, tx := range []*arweave.Tx{survives, anchoredBelow} {
		if s, err := c.StatusOf(ctx, tx.IDString()); err != nil || s.BlockHeight != 4 || s.Confirmations != 1 {
			t.Fatalf("%s: %+v %v, want mined at 4", tx.IDString(), s, err)
		}
	}
	if s, _ := c.StatusOf(ctx, below.IDString()); s.Confirmations != 4 {
		t.Fatalf("below the fork: %d confirmations, want 4", s.Confirmations)
	}
	if got := f.Mined(); len(got) != 3 || got[0] != below.IDString() {
		t.Fatalf("Mined %v", got)
	}
	// The anchor window counts the replaced blocks as the blocks they are now.
	fresh := signed(t, c, w, 15, nil)
	post(t, c, fresh)
	f.Mine()
	if s, err := c.StatusOf(ctx, fresh.IDString()); err != nil || s.Pending {
		t.Fatalf("anchored on the new tip: %+v %v", s, err)
	}
}

// A reorg deeper than the chain replaces every block but genesis; none of depth 0 changes
// nothing.
func TestReorgBounds(t *testing.T) {
	f, _, url := start(t)
	genesis := blockAt(t, url, 0).Hash
	f.Mine()
	if f.Reorg(0) != nil || f.Height() != 1 {
		t.Fatal("a reorg of depth 0 changed something")
	}
	f.Reorg(5)
	if f.Height() != 1 || blockAt(t, url, 0).Hash != genesis {
		t.Fatal("a deep reorg replaced genesis or changed the height")
	}
}

// POST /admin/reorg?depth=N does it over HTTP, and refuses a depth out of 1..height.
func TestReorgHTTP(t *testing.T) {
	f, c, url := start(t)
	w := wallet(t)
	tx := signed(t, c, w, 10, nil)
	post(t, c, tx)
	f.Mine()
	f.Mine()
	for _, q := range []string{"", "depth=0", "depth=3", "depth=x"} {
		resp, err := http.Post(url+"/admin/reorg?"+q, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("%q: %d, want 400", q, resp.StatusCode)
		}
	}
	resp, err := http.Post(url+"/admin/reorg?depth=2", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got struct {
		Height  int      `json:"height"`
		Dropped []string `json:"dropped"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || got.Height != 2 || !slices.Equal(got.Dropped, []string{tx.IDString()}) {
		t.Fatalf("POST /admin/reorg?depth=2: %+v %v", got, err)
	}
}

func blockHash(t *testing.T, url string, h int) []byte {
	t.Helper()
	b, err := b64.DecodeString(blockAt(t, url, h).Hash)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
