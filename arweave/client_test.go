package arweave

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
)

// gateway is a minimal node for the client's tests: it checks what it is sent as a node
// would, and answers as the test sets.
type gateway struct {
	mu     sync.Mutex
	txs    map[string]*Tx
	chunks map[string][]byte // data root → data assembled from chunks
	answer int               // when set, POST /tx answers this
	drop   bool              // when set, POST /tx drops the connection after reading
}

func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	body, _ := io.ReadAll(r.Body)
	switch {
	case r.Method == "GET" && r.URL.Path == "/tx_anchor":
		io.WriteString(w, b64.EncodeToString(bytes.Repeat([]byte{7}, 48)))
	case r.Method == "GET" && r.URL.Path == "/price/1000":
		io.WriteString(w, "4242")
	case r.Method == "POST" && r.URL.Path == "/tx":
		if g.drop {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		if g.answer != 0 {
			w.WriteHeader(g.answer)
			return
		}
		var t Tx
		if err := json.Unmarshal(body, &t); err != nil || t.Verify() != nil {
			http.Error(w, "invalid transaction", http.StatusBadRequest)
			return
		}
		if _, ok := g.txs[t.IDString()]; ok {
			w.WriteHeader(http.StatusAlreadyReported)
			return
		}
		g.txs[t.IDString()] = &t
	case r.Method == "POST" && r.URL.Path == "/chunk":
		var c map[string]string
		_ = json.Unmarshal(body, &c)
		chunk, _ := b64.DecodeString(c["chunk"])
		g.chunks[c["data_root"]] = append(g.chunks[c["data_root"]], chunk...)
	case r.Method == "GET" && r.URL.Path == "/tx/mined/status":
		io.WriteString(w, `{"block_height":12,"block_indep_hash":"abc","number_of_confirmations":3}`)
	case r.Method == "GET" && r.URL.Path == "/tx/pending/status":
		w.WriteHeader(http.StatusAccepted)
	default:
		http.NotFound(w, r)
	}
}

func TestClient(t *testing.T) {
	g := &gateway{txs: map[string]*Tx{}, chunks: map[string][]byte{}}
	srv := httptest.NewServer(g)
	defer srv.Close()
	c := NewClient(srv.URL, nil)
	ctx := context.Background()
	w := TestWallet(t)
	if a, err := c.Anchor(ctx); err != nil || len(a) != 48 {
		t.Fatalf("anchor %x %v", a, err)
	}
	if p, err := c.Price(ctx, 1000); err != nil || p != "4242" {
		t.Fatalf("price %q %v", p, err)
	}
	sign := func(size int) *Tx {
		tx := NewTx(testData(size), nil)
		tx.LastTx, tx.Reward = bytes.Repeat([]byte{7}, 48), "4242"
		if err := tx.Sign(w); err != nil {
			t.Fatal(err)
		}
		return tx
	}
	// One chunk: the data goes in the body; posting the same bytes again is 208, a success.
	small := sign(1000)
	for range 2 {
		if err := c.Post(ctx, small); err != nil {
			t.Fatal(err)
		}
	}
	if got := g.txs[small.IDString()]; got == nil || !bytes.Equal(got.Data, small.Data) {
		t.Fatal("the small transaction did not arrive with its data")
	}
	// Three chunks: the header alone, then the chunks, which make up the data again.
	large := sign(600 << 10)
	if err := c.Post(ctx, large); err != nil {
		t.Fatal(err)
	}
	if got := g.txs[large.IDString()]; got == nil || got.Data != nil {
		t.Fatal("the large transaction's header did not arrive alone")
	}
	if !bytes.Equal(g.chunks[b64.EncodeToString(large.DataRoot)], large.Data) {
		t.Fatal("the chunks do not make up the data")
	}
	// Outcomes.
	for _, tc := range []struct {
		answer int
		drop   bool
		want   error
	}{{answer: 429, want: ErrUnknownOutcome}, {answer: 503, want: ErrUnknownOutcome}, {drop: true, want: ErrUnknownOutcome},
		{answer: 400, want: ErrRejected}} {
		g.mu.Lock()
		g.answer, g.drop = tc.answer, tc.drop
		g.mu.Unlock()
		if err := c.Post(ctx, sign(10)); !errors.Is(err, tc.want) {
			t.Errorf("answer %d drop %v: %v, want %v", tc.answer, tc.drop, err, tc.want)
		}
	}
	if s, err := c.StatusOf(ctx, "mined"); err != nil || s.Pending || s.Confirmations != 3 || s.BlockHeight != 12 {
		t.Fatalf("mined: %+v %v", s, err)
	}
	if s, err := c.StatusOf(ctx, "pending"); err != nil || !s.Pending {
		t.Fatalf("pending: %+v %v", s, err)
	}
	if _, err := c.StatusOf(ctx, "unknown"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown: %v", err)
	}
}

// A quote is any decimal integer, beyond 64 bits too (a caller capping rewards must see a
// huge quote as too high, not as unreadable); anything else is not a price.
func TestPriceQuotes(t *testing.T) {
	var quote atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, quote.Load().(string)) }))
	defer srv.Close()
	c := NewClient(srv.URL, nil)
	for _, q := range []string{"0", "4242", "18446744073709551615", "18446744073709551616", "123456789012345678901234567890"} {
		quote.Store(q + "\n")
		if p, err := c.Price(context.Background(), 1); err != nil || p != q {
			t.Errorf("quote %s: %q %v", q, p, err)
		}
	}
	for _, q := range []string{"", "-1", "+5", "007", "12a", "1e9", "1.5", string(bytes.Repeat([]byte("9"), 65))} {
		quote.Store(q)
		if p, err := c.Price(context.Background(), 1); err == nil {
			t.Errorf("quote %q: accepted as %q", q, p)
		}
	}
}
