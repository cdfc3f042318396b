package chain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/shardkeeper/shardkeeper/actors/actortest"
	"github.com/shardkeeper/shardkeeper/arweave"
	"github.com/shardkeeper/shardkeeper/test/await"
	"github.com/shardkeeper/shardkeeper/test/fakearweave"
)

// quotingNode is the fake node behind a front that answers GET /price with quote while it is
// set, and records the reward of every POST /tx it receives, taken or not.
type quotingNode struct {
	fake  http.Handler
	quote atomic.Pointer[string]

	mu      sync.Mutex
	rewards []string
}

func (q *quotingNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p := q.quote.Load(); p != nil && r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/price/") {
		io.WriteString(w, *p)
		return
	}
	if r.Method == http.MethodPost && r.URL.Path == "/tx" {
		body, _ := io.ReadAll(r.Body)
		var tx struct {
			Reward string `json:"reward"`
		}
		_ = json.Unmarshal(body, &tx)
		q.mu.Lock()
		q.rewards = append(q.rewards, tx.Reward)
		q.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	q.fake.ServeHTTP(w, r)
}

func (q *quotingNode) posted() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]string(nil), q.rewards...)
}

func (q *quotingNode) setQuote(s string) { q.quote.Store(&s) }

// A quote above --chain-max-reward is never signed: each is a failed prepare (fee_too_high),
// counted, retried, and after MaxAttempts the event is failed; the node never receives a
// transaction. A quote of exactly the cap is signed, and the event confirmed.
func TestChainRefusesRewardAboveCap(t *testing.T) {
	const maxReward = 5000
	// The node prices every transaction at exactly the cap.
	f := fakearweave.New(fakearweave.Config{BlockInterval: 20 * time.Millisecond, BasePrice: maxReward})
	node := &quotingNode{fake: f}
	srv := httptest.NewServer(node)
	t.Cleanup(func() { srv.Close(); f.Close() })
	reg := prometheus.NewRegistry()
	gw := arweave.NewClient(srv.URL, nil)
	cfg := Config{Gateway: gw, Wallet: arweave.TestWallet(t), MaxReward: maxReward, PollInterval: 5 * time.Millisecond, Metrics: NewMetrics(reg)}
	e := &chainEnv{t: t, fake: f, gw: gw, cfg: cfg, h: actortest.New(t, actortest.Options{}, Kind(cfg))}
	refused := func() float64 { return testutil.ToFloat64(NewMetrics(reg).quotesRefused) }

	for i, quote := range []string{"18446744073709551615", "5001", "123456789012345678901234567890"} {
		node.setQuote(quote)
		entity := string(rune('a' + i))
		if _, err := e.append("fees", event(entity, 1)); err != nil {
			t.Fatal(err)
		}
		await.True(t, 10*time.Second, "the event quoted "+quote+" failed", func() bool { return e.head("fees").Failed == i+1 })
		var v struct {
			Status string  `json:"status"`
			Error  *string `json:"error"`
		}
		if err := json.Unmarshal(e.h.MustCall(KindName, "fees", MethodVersion, []byte(entity+"\x001")), &v); err != nil ||
			v.Status != StatusFailed || v.Error == nil || !strings.HasPrefix(*v.Error, "fee_too_high: ") {
			t.Fatalf("quote %s: version %+v %v", quote, v, err)
		}
		if n := refused(); n != float64((i+1)*MaxAttempts) {
			t.Fatalf("quote %s: %v quotes refused, want %d", quote, n, (i+1)*MaxAttempts)
		}
	}
	if h := e.head("fees"); h.Seq != 0 || h.Queued != 0 {
		t.Fatalf("head after the refusals: %+v", h)
	}
	if got := node.posted(); len(got) != 0 {
		t.Fatalf("the node received transactions above the cap: rewards %v", got)
	}

	// The node's own price, exactly the cap: the failed events, requeued, are signed.
	node.quote.Store(nil)
	var out struct{ Requeued int }
	if err := json.Unmarshal(e.h.MustCall(KindName, "fees", MethodRetry, nil), &out); err != nil || out.Requeued != 3 {
		t.Fatalf("retry: %+v %v", out, err)
	}
	e.waitConfirmed("fees", 3)
	got := node.posted()
	if len(got) < 3 {
		t.Fatalf("the node received %d transactions, want at least 3", len(got))
	}
	for _, r := range got {
		if r != "5000" {
			t.Fatalf("the node received rewards %v, want every one 5000 (the cap)", got)
		}
	}
	if n := refused(); n != float64(3*MaxAttempts) {
		t.Fatalf("%v quotes refused after the retry, want %d", n, 3*MaxAttempts)
	}
}

// quoteGateway is a gateway for the prepare alone: a fixed anchor and height, and quote as
// every price. Posting or polling is a bug here.
type quoteGateway struct {
	quote  string
	priced atomic.Int32
}

func (g *quoteGateway) Anchor(context.Context) ([]byte, error) {
	return bytes.Repeat([]byte{7}, 48), nil
}
func (g *quoteGateway) Height(context.Context) (int64, error) { return 10, nil }
func (g *quoteGateway) Price(context.Context, int) (string, error) {
	g.priced.Add(1)
	return g.quote, nil
}
func (g *quoteGateway) Post(context.Context, *arweave.Tx) error       { return errors.New("not here") }
func (g *quoteGateway) PostHeader(context.Context, *arweave.Tx) error { return errors.New("not here") }
func (g *quoteGateway) PostChunks(context.Context, *arweave.Tx) error { return errors.New("not here") }
func (g *quoteGateway) StatusOf(context.Context, string) (arweave.Status, error) {
	return arweave.Status{}, errors.New("not here")
}

// The cap holds on every path to a signature: new events and events signed again, with a
// quote read by the prepare or one it was given (renewed in the background); the cap itself
// is signed.
func TestPrepareCapsEveryPath(t *testing.T) {
	w := arweave.TestWallet(t)
	ev := event("e", 1)
	if err := ev.Normalize(); err != nil {
		t.Fatal(err)
	}
	data, _ := Payload("c", &ev, Link{})
	jobs := map[string]prepareJob{
		"new":    {Chain: "c", Items: []queuedItem{{Key: queueKey(0), Event: ev}}},
		"resign": {Chain: "c", From: 1, Resign: []resignItem{{Seq: 1, OldTx: "old", Data: data}}},
	}
	for name, job := range jobs {
		job.Wallet, job.MaxReward = w, 100
		for _, tc := range []struct {
			quote  string
			given  bool // the quote comes with the job, not from the gateway
			signed bool
		}{
			{"101", false, false}, {"101", true, false}, {"18446744073709551615", false, false},
			{"123456789012345678901234567890", true, false}, {"100", false, true}, {"100", true, true}, {"7", false, true},
		} {
			gw := &quoteGateway{quote: tc.quote}
			j := job
			if tc.given {
				j.Quote = quote{Anchor: bytes.Repeat([]byte{7}, 48), Height: 10, At: time.Now(), Prices: map[int]string{1: tc.quote}}
			}
			p, err := j.run(context.Background(), gw)
			if tc.given && gw.priced.Load() != 0 {
				t.Fatalf("%s, quote %s given: the gateway was asked its price", name, tc.quote)
			}
			if !tc.signed {
				if !isFeeTooHigh(err) || len(p.Signed) != 0 {
					t.Fatalf("%s, quote %s: %d signed, error %v; want none, fee_too_high", name, tc.quote, len(p.Signed), err)
				}
				continue
			}
			if err != nil || len(p.Signed) != 1 {
				t.Fatalf("%s, quote %s: %d signed, error %v", name, tc.quote, len(p.Signed), err)
			}
			var tx arweave.Tx
			if err := json.Unmarshal(p.Signed[0].Tx, &tx); err != nil || tx.Reward != tc.quote || tx.Verify() != nil {
				t.Fatalf("%s, quote %s: signed %+v %v", name, tc.quote, tx.Reward, err)
			}
		}
	}
	// What is not a number of winston is not signed either (though not counted as too high).
	tx := arweave.NewTx([]byte("x"), nil)
	tx.Reward = "-1"
	if err := signCapped(tx, w, 100); err == nil || isFeeTooHigh(err) || tx.Signature != nil {
		t.Fatalf("reward -1: %v", err)
	}
}
