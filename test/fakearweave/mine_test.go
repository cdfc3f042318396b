package fakearweave

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/arweave"
)

// blockAt reads GET /block/height/{h}.
func blockAt(t *testing.T, url string, h int) (b struct {
	Hash     string   `json:"indep_hash"`
	Previous string   `json:"previous_block"`
	Height   int      `json:"height"`
	Txs      []string `json:"txs"`
}) {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("%s/block/height/%d", url, h))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /block/height/%d: %d", h, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
		t.Fatal(err)
	}
	return b
}

func post(t *testing.T, c *arweave.Client, txs ...*arweave.Tx) {
	t.Helper()
	for _, tx := range txs {
		if err := c.Post(context.Background(), tx); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDefaults(t *testing.T) {
	f := New(Config{Manual: true})
	defer f.Close()
	if f.cfg.MaxBlockTxs != 1000 || f.cfg.AnchorDepth != 50 || f.cfg.SuggestedAnchorDepth != 1 {
		t.Fatalf("defaults: %+v", f.cfg)
	}
}

// A block holds at most MaxBlockTxs transactions, equal rewards in the order taken; the rest
// wait, still pending, for the next blocks.
func TestBlockCapacity(t *testing.T) {
	f, c, url := startWith(t, Config{Manual: true, MaxBlockTxs: 3})
	w := wallet(t)
	var ids []string
	for i := range 8 {
		tx := signed(t, c, w, 10+i, nil) // one chunk each: one price
		post(t, c, tx)
		ids = append(ids, tx.IDString())
	}
	for h, want := range [][]string{ids[0:3], ids[3:6], ids[6:8], nil} {
		f.Mine()
		if got := blockAt(t, url, h+1).Txs; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("block %d holds %v, want %v", h+1, got, want)
		}
		for _, id := range ids[min(3*(h+1), 8):] {
			if s, err := c.StatusOf(context.Background(), id); err != nil || !s.Pending {
				t.Fatalf("after block %d, %s: %+v %v, want pending", h+1, id, s, err)
			}
		}
	}
	if fmt.Sprint(f.Mined()) != fmt.Sprint(ids) {
		t.Fatalf("mined %v, want %v", f.Mined(), ids)
	}
}

// At Arweave's own limit: 1001 transactions take two blocks, 1000 and 1.
func TestBlockCapacityAtDefault(t *testing.T) {
	if testing.Short() {
		t.Skip("signs 1001 transactions")
	}
	f, c, url := startWith(t, Config{Manual: true})
	w, err := arweave.GenerateWallet(2048) // signs faster than the test wallet
	if err != nil {
		t.Fatal(err)
	}
	anchor, _ := c.Anchor(context.Background())
	price, _ := c.Price(context.Background(), 1)
	for i := range 1001 {
		tx := arweave.NewTx([]byte(strconv.Itoa(i)), nil)
		tx.LastTx, tx.Reward = anchor, price
		if err := tx.Sign(w); err != nil {
			t.Fatal(err)
		}
		post(t, c, tx)
	}
	f.Mine()
	f.Mine()
	if n1, n2 := len(blockAt(t, url, 1).Txs), len(blockAt(t, url, 2).Txs); n1 != 1000 || n2 != 1 {
		t.Fatalf("blocks of %d and %d transactions, want 1000 and 1", n1, n2)
	}
}

// A node packs the highest rewards first: a transaction paying more, taken later, is mined
// before one paying the price when only one fits.
func TestBlockPriority(t *testing.T) {
	f, c, url := startWith(t, Config{Manual: true, MaxBlockTxs: 1})
	w := wallet(t)
	cheap := signed(t, c, w, 10, nil)
	rich := signed(t, c, w, 10, func(tx *arweave.Tx) {
		r, _ := new(big.Int).SetString(tx.Reward, 10)
		tx.Reward = r.Add(r, big.NewInt(1)).String()
	})
	post(t, c, cheap, rich)
	f.Mine()
	f.Mine()
	if a, b := blockAt(t, url, 1).Txs, blockAt(t, url, 2).Txs; fmt.Sprint(a, b) != fmt.Sprint([]string{rich.IDString()}, []string{cheap.IDString()}) {
		t.Fatalf("blocks hold %v then %v: the higher reward is not first", a, b)
	}
}

// An anchor valid when the transaction is posted is valid in the next block (a node checks a
// block's transactions against the AnchorDepth blocks before it); one no longer among them
// when its turn comes is dropped.
func TestAnchorWindowAtMining(t *testing.T) {
	f, c, _ := startWith(t, Config{Manual: true, AnchorDepth: 3, MaxBlockTxs: 1})
	w := wallet(t)
	ctx := context.Background()
	anchor, err := c.Anchor(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.Mine()
	f.Mine()
	// The anchor is the oldest of the three valid ones.
	oldest := func(tx *arweave.Tx) { tx.LastTx = anchor }
	first, second := signed(t, c, w, 10, oldest), signed(t, c, w, 11, oldest)
	post(t, c, first, second)
	f.Mine()
	if s, err := c.StatusOf(ctx, first.IDString()); err != nil || s.Pending {
		t.Fatalf("anchored on the oldest valid block, not mined in the next: %+v %v", s, err)
	}
	f.Mine()
	if _, err := c.StatusOf(ctx, second.IDString()); !errors.Is(err, arweave.ErrNotFound) {
		t.Fatalf("its anchor out of the window at its turn: %v, want dropped", err)
	}
}

// GET /tx_anchor names the block SuggestedAnchorDepth from the tip (genesis while the chain
// is shorter).
func TestSuggestedAnchor(t *testing.T) {
	f, c, url := startWith(t, Config{Manual: true, SuggestedAnchorDepth: 6})
	check := func(h int) {
		t.Helper()
		a, err := c.Anchor(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got, want := b64.EncodeToString(a), blockAt(t, url, h).Hash; got != want {
			t.Fatalf("at height %d the anchor is not block %d", f.Height(), h)
		}
	}
	f.Mine()
	check(0)
	for range 9 {
		f.Mine()
	}
	check(5)
}

// With a latency of one answer, many requests wait it out together: none holds the node
// while it waits, and a request whose client went away stops waiting.
func TestLatencyIsConcurrent(t *testing.T) {
	f, _, url := start(t)
	const lat, n = 400 * time.Millisecond, 8
	f.SetFaults(Faults{Latency: lat})
	began := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			resp, err := http.Get(url + "/info")
			if err != nil {
				errs <- err
				return
			}
			resp.Body.Close()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Serialized they would take n·lat; together, about lat.
	if took := time.Since(began); took < lat || took >= n*lat/2 {
		t.Fatalf("%d answers of %v latency took %v", n, lat, took)
	}

	// A client that gives up: the request ends with it, and the server closes at once.
	f.SetFaults(Faults{Latency: time.Minute})
	srv := httptest.NewServer(f)
	hc := &http.Client{Timeout: 100 * time.Millisecond}
	if _, err := hc.Get(srv.URL + "/info"); err == nil {
		t.Fatal("answered within the timeout despite a minute's latency")
	}
	began = time.Now()
	srv.Close()
	if took := time.Since(began); took > 10*time.Second {
		t.Fatalf("closing took %v: a request kept waiting after its client left", took)
	}
	// /admin answers at once.
	began = time.Now()
	resp, err := http.Post(url+"/admin/mine", "", nil)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("POST /admin/mine: %v %v", resp, err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Fatalf("/admin waited %v", took)
	}
}

// Arweave's own pace, a block every two minutes: the node answers at once meanwhile.
func TestLongBlockInterval(t *testing.T) {
	f, c, url := startWith(t, Config{BlockInterval: 2 * time.Minute})
	w := wallet(t)
	tx := signed(t, c, w, 10, nil)
	post(t, c, tx)
	if s, err := c.StatusOf(context.Background(), tx.IDString()); err != nil || !s.Pending {
		t.Fatalf("status: %+v %v", s, err)
	}
	resp, err := http.Get(url + "/info")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"height":0`) || f.Height() != 0 {
		t.Fatalf("GET /info: %s", body)
	}
}
