package chain

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/actors/actortest"
	"github.com/shardkeeper/shardkeeper/arweave"
	"github.com/shardkeeper/shardkeeper/test/await"
	"github.com/shardkeeper/shardkeeper/test/fakearweave"
)

// switchable is a Gateway that fails every call while down.
type switchable struct {
	Gateway
	down atomic.Bool
}

var errDown = errors.New("gateway down for the test")

func (g *switchable) Anchor(ctx context.Context) ([]byte, error) {
	if g.down.Load() {
		return nil, errDown
	}
	return g.Gateway.Anchor(ctx)
}

func (g *switchable) Height(ctx context.Context) (int64, error) {
	if g.down.Load() {
		return 0, errDown
	}
	return g.Gateway.Height(ctx)
}

func (g *switchable) Price(ctx context.Context, size int) (string, error) {
	if g.down.Load() {
		return "", errDown
	}
	return g.Gateway.Price(ctx, size)
}

// A chain at MaxQueued refuses new events (queue_full, RetryAfter until its next attempt to
// sign, nothing written) and takes them again once signing has made room; other chains and
// repeats are served meanwhile.
func TestQueueBound(t *testing.T) {
	f := fakearweave.New(fakearweave.Config{BlockInterval: 20 * time.Millisecond})
	srv := httptest.NewServer(f)
	t.Cleanup(func() { srv.Close(); f.Close() })
	gw := &switchable{Gateway: arweave.NewClient(srv.URL, nil)}
	gw.down.Store(true)
	clk := actortest.NewClock(time.Now().Add(time.Hour)) // ahead of the wall clock, see actortest.Clock
	const poll = 5 * time.Second
	cfg := Config{Gateway: gw, Wallet: arweave.TestWallet(t), PollInterval: poll, MaxQueued: 3}
	h := actortest.New(t, actortest.Options{Runtime: actors.Options{Clock: clk.Now}}, Kind(cfg))
	appendEv := func(chain string, ev Event) (Appended, error) {
		var out Appended
		err := h.CallJSON(KindName, chain, MethodAppend, ev, &out)
		return out, err
	}
	head := func(chain string) Head {
		var hd Head
		if err := h.CallJSON(KindName, chain, MethodHead, nil, &hd); err != nil {
			t.Fatal(err)
		}
		return hd
	}
	for ver := range int64(3) {
		if out, err := appendEv("main", event("doc", ver+1)); err != nil || !out.Created {
			t.Fatalf("event %d: %+v %v", ver+1, out, err)
		}
	}
	// The first prepare fails (the gateway is down): the next is 2 × poll later.
	await.True(t, 10*time.Second, "the first prepare to fail", func() bool {
		_, err := appendEv("main", event("doc", 4))
		var e *actors.Error
		return errors.As(err, &e) && e.Code == "queue_full" && e.RetryAfter == 2*poll
	})
	before := h.State(KindName, "main")
	_, err := appendEv("main", event("doc", 4))
	var e *actors.Error
	if !errors.As(err, &e) || e.Code != "queue_full" || e.RetryAfter != 2*poll {
		t.Fatalf("past the bound: %v, want queue_full after %s", err, 2*poll)
	}
	if after := h.State(KindName, "main"); len(after.Data) != len(before.Data) {
		t.Fatalf("the refusal wrote: %d keys, then %d", len(before.Data), len(after.Data))
	}
	if out, err := appendEv("main", event("doc", 2)); err != nil || out.Created || out.Status != StatusQueued {
		t.Fatalf("an identical repeat: %+v %v", out, err)
	}
	if out, err := appendEv("other", event("doc", 1)); err != nil || !out.Created {
		t.Fatalf("another chain: %+v %v", out, err)
	}

	// The gateway back, the chain signs at its next attempt, and so makes room.
	gw.down.Store(false)
	clk.Advance(2 * poll)
	h.Wake(KindName, "main")
	await.True(t, 10*time.Second, "the queue to be signed", func() bool { return head("main").Queued == 0 })
	if out, err := appendEv("main", event("doc", 4)); err != nil || !out.Created {
		t.Fatalf("once signed: %+v %v", out, err)
	}
}
