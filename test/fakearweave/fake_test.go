package fakearweave

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/shardkeeper/shardkeeper/arweave"
)

func wallet(t *testing.T) *arweave.Wallet {
	t.Helper()
	w := arweave.TestWallet(t)
	return w
}

func start(t *testing.T) (*Fake, *arweave.Client, string) {
	t.Helper()
	return startWith(t, Config{Manual: true})
}

func startWith(t *testing.T, cfg Config) (*Fake, *arweave.Client, string) {
	t.Helper()
	f := New(cfg)
	srv := httptest.NewServer(f)
	t.Cleanup(func() { srv.Close(); f.Close() })
	return f, arweave.NewClient(srv.URL, nil), srv.URL
}

// signed builds and signs a transaction of size bytes, anchored and paid as the node asks.
func signed(t *testing.T, c *arweave.Client, w *arweave.Wallet, size int, tweak func(*arweave.Tx)) *arweave.Tx {
	t.Helper()
	return signedData(t, c, w, bytes.Repeat([]byte{'x'}, size), []arweave.Tag{{Name: []byte("App-Name"), Value: []byte("test")}}, tweak)
}

// signedData builds and signs a transaction carrying data with tags, anchored and paid as the
// node asks.
func signedData(t *testing.T, c *arweave.Client, w *arweave.Wallet, data []byte, tags []arweave.Tag, tweak func(*arweave.Tx)) *arweave.Tx {
	t.Helper()
	ctx := context.Background()
	size := len(data)
	tx := arweave.NewTx(data, tags)
	var err error
	if tx.LastTx, err = c.Anchor(ctx); err != nil {
		t.Fatal(err)
	}
	if tx.Reward, err = c.Price(ctx, size); err != nil {
		t.Fatal(err)
	}
	if tweak != nil {
		tweak(tx)
	}
	if err := tx.Sign(w); err != nil {
		t.Fatal(err)
	}
	return tx
}

// The node refuses what a real node refuses, takes the rest once (208 after), mines it, and
// serves its status, header and data.
func TestValidationAndLifecycle(t *testing.T) {
	f, c, url := start(t)
	w := wallet(t)
	ctx := context.Background()

	tx := signed(t, c, w, 1000, nil)
	if err := c.Post(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if err := c.Post(ctx, tx); err != nil { // 208
		t.Fatalf("the same bytes again: %v", err)
	}
	if s, err := c.StatusOf(ctx, tx.IDString()); err != nil || !s.Pending {
		t.Fatalf("before mining: %+v %v", s, err)
	}
	f.Mine()
	f.Mine()
	if s, err := c.StatusOf(ctx, tx.IDString()); err != nil || s.Pending || s.Confirmations != 2 {
		t.Fatalf("mined two blocks ago: %+v %v", s, err)
	}
	resp, err := http.Get(url + "/" + tx.IDString())
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(got, tx.Data) {
		t.Fatal("GET /{id} does not serve the data")
	}
	resp, _ = http.Get(url + "/tx/" + tx.IDString())
	var head arweave.Tx
	if err := json.NewDecoder(resp.Body).Decode(&head); err != nil || head.Verify() != nil || head.IDString() != tx.IDString() {
		t.Fatalf("GET /tx/{id}: %v", err)
	}
	resp.Body.Close()

	// Large data: the header, then chunks; the data is served once every chunk arrived.
	large := signed(t, c, w, 700<<10, nil)
	if err := c.Post(ctx, large); err != nil {
		t.Fatal(err)
	}
	f.Mine()
	resp, _ = http.Get(url + "/" + large.IDString())
	got, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(got, large.Data) {
		t.Fatalf("chunked data: %d bytes back of %d", len(got), len(large.Data))
	}

	for name, tweak := range map[string]func(*arweave.Tx){
		"stale anchor": func(tx *arweave.Tx) { tx.LastTx = bytes.Repeat([]byte{1}, 48) },
		"underpaid":    func(tx *arweave.Tx) { tx.Reward = "1" },
	} {
		if err := c.Post(ctx, signed(t, c, w, 10, tweak)); !errors.Is(err, arweave.ErrRejected) {
			t.Errorf("%s: %v, want a refusal", name, err)
		}
	}
	forged := signed(t, c, w, 10, nil)
	forged.Tags = append(forged.Tags, arweave.Tag{Name: []byte("x"), Value: []byte("y")}) // after signing
	if err := c.Post(ctx, forged); !errors.Is(err, arweave.ErrRejected) {
		t.Errorf("changed after signing: %v, want a refusal", err)
	}
	// An anchor older than AnchorDepth blocks is refused.
	old := signed(t, c, w, 10, nil)
	for range 50 {
		f.Mine()
	}
	if err := c.Post(ctx, old); !errors.Is(err, arweave.ErrRejected) {
		t.Errorf("an anchor 50 blocks old: %v, want a refusal", err)
	}
}

// Faults: an answer dropped after the node took the post (the same bytes again are 208), 429
// and 503 without taking it, and a transaction dropped from the mempool (404 afterwards, and
// taken again when posted again while its anchor is valid).
func TestFaults(t *testing.T) {
	f, c, _ := start(t)
	w := wallet(t)
	ctx := context.Background()

	f.SetFaults(Faults{DropAfterAccept: 1})
	tx := signed(t, c, w, 10, nil)
	if err := c.Post(ctx, tx); !errors.Is(err, arweave.ErrUnknownOutcome) {
		t.Fatalf("dropped answer: %v", err)
	}
	f.SetFaults(Faults{})
	if s, err := c.StatusOf(ctx, tx.IDString()); err != nil || !s.Pending {
		t.Fatalf("taken despite the dropped answer: %+v %v", s, err)
	}
	for _, fs := range []Faults{{TooMany: 1}, {Unavailable: 1}} {
		f.SetFaults(fs)
		other := signed(t, c, w, 11, nil)
		if err := c.Post(ctx, other); !errors.Is(err, arweave.ErrUnknownOutcome) {
			t.Fatalf("%+v: %v", fs, err)
		}
		f.SetFaults(Faults{})
		if _, err := c.StatusOf(ctx, other.IDString()); !errors.Is(err, arweave.ErrNotFound) {
			t.Fatalf("%+v: the node took it: %v", fs, err)
		}
	}
	evicted := signed(t, c, w, 12, nil)
	if err := c.Post(ctx, evicted); err != nil {
		t.Fatal(err)
	}
	f.SetFaults(Faults{EvictFromMempool: 1})
	f.Mine()
	f.SetFaults(Faults{})
	if _, err := c.StatusOf(ctx, evicted.IDString()); !errors.Is(err, arweave.ErrNotFound) {
		t.Fatalf("evicted: %v", err)
	}
	if err := c.Post(ctx, evicted); err != nil {
		t.Fatalf("posting the same bytes again: %v", err)
	}
	f.Mine()
	if s, err := c.StatusOf(ctx, evicted.IDString()); err != nil || s.Pending {
		t.Fatalf("mined at last: %+v %v", s, err)
	}
}
