package chain

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/actors/actortest"
	"github.com/shardkeeper/shardkeeper/arweave"
	"github.com/shardkeeper/shardkeeper/test/await"
	"github.com/shardkeeper/shardkeeper/test/fakearweave"
	"github.com/shardkeeper/shardkeeper/tlog"
	"golang.org/x/mod/sumdb/note"
)

type chainEnv struct {
	t    *testing.T
	fake *fakearweave.Fake
	gw   *arweave.Client
	h    *actortest.Harness
	cfg  Config
}

func newChainEnv(t *testing.T, cfg Config) *chainEnv {
	return newChainEnvOn(t, cfg, fakearweave.Config{BlockInterval: 20 * time.Millisecond})
}

// newChainEnvOn is newChainEnv on a fake node configured by fc.
func newChainEnvOn(t *testing.T, cfg Config, fc fakearweave.Config) *chainEnv {
	f := fakearweave.New(fc)
	srv := httptest.NewServer(f)
	t.Cleanup(func() { srv.Close(); f.Close() })
	w := arweave.TestWallet(t)
	gw := arweave.NewClient(srv.URL, nil)
	cfg.Gateway, cfg.Wallet = gw, w
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 30 * time.Millisecond
	}
	e := &chainEnv{t: t, fake: f, gw: gw, cfg: cfg}
	e.h = actortest.New(t, actortest.Options{}, Kind(cfg))
	return e
}

func (e *chainEnv) append(chain string, ev Event) (Appended, error) {
	var out Appended
	err := e.h.CallJSON(KindName, chain, MethodAppend, ev, &out)
	return out, err
}

func (e *chainEnv) head(chain string) Head {
	var h Head
	if err := e.h.CallJSON(KindName, chain, MethodHead, nil, &h); err != nil {
		e.t.Fatal(err)
	}
	return h
}

// event reads event seq of chain as the actor answers it (zero when there is none yet).
func (e *chainEnv) event(chain string, seq int64) record {
	var rec record
	body, _ := json.Marshal(seq)
	if out, err := e.h.Call(KindName, chain, MethodEvent, body); err == nil {
		_ = json.Unmarshal(out, &rec)
	}
	return rec
}

func event(entity string, ver int64) Event {
	return Event{EntityID: entity, Ver: ver, Op: "create", Vis: "public", Manifest: json.RawMessage(fmt.Sprintf(`{"entity":%q,"ver":%d}`, entity, ver))}
}

// waitConfirmed waits until n events of chain are confirmed, then checks the chain on the
// node with the verifier, and that every transaction the node mined for it is on it: no
// orphan, no fork.
func (e *chainEnv) waitConfirmed(chain string, n int64) Head {
	e.t.Helper()
	await.True(e.t, 60*time.Second, fmt.Sprintf("%d events of %s confirmed", n, chain), func() bool {
		h := e.head(chain)
		return h.ConfirmedSeq == n && h.Queued == 0
	})
	h := e.head(chain)
	r := Verify(context.Background(), e.gw, *h.TxID, nil)
	if !r.OK || r.Checked != int(n) {
		e.t.Fatalf("verify: %+v %+v", r, r.FirstError)
	}
	var onChain []string
	for seq := int64(1); seq <= n; seq++ {
		rec := e.event(chain, seq)
		if rec.Status != StatusConfirmed || rec.Seq != seq {
			e.t.Fatalf("event %d: %+v", seq, rec)
		}
		onChain = append(onChain, rec.TxID)
	}
	mined := e.fake.Mined()
	sort.Strings(mined)
	sort.Strings(onChain)
	if fmt.Sprint(mined) != fmt.Sprint(onChain) {
		e.t.Fatalf("the node mined %d transactions, the chain holds %d: an orphan or a fork", len(mined), len(onChain))
	}
	return h
}

func TestChainAnchorsInOrder(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newChainEnv(t, Config{MaxInFlight: 8, Metrics: NewMetrics(reg)})
	for i := range 20 {
		out, err := e.append("main", event(fmt.Sprintf("dev-%d", i%3), int64(i/3+1)))
		if err != nil || !out.Created || out.Status != StatusQueued || out.CID == "" {
			t.Fatalf("append %d: %+v %v", i, out, err)
		}
	}
	// An identical repeat answers the record; the same version with other content is a
	// conflict.
	again, err := e.append("main", event("dev-0", 1))
	if err != nil || again.Created {
		t.Fatalf("repeat: %+v %v", again, err)
	}
	other := event("dev-0", 1)
	other.Op = "update"
	var ae *actors.Error
	if _, err := e.append("main", other); !errors.As(err, &ae) || ae.Code != "event_conflict" {
		t.Fatalf("conflict: %v", err)
	}
	h := e.waitConfirmed("main", 20)
	if h.Seq != 20 {
		t.Fatalf("head %+v", h)
	}
	// The metrics count each event once through each stage.
	m := NewMetrics(reg) // the same instruments
	for _, ev := range []string{eventAccepted, eventSigned, eventConfirmed} {
		if n := testutil.ToFloat64(m.events.WithLabelValues(ev)); n != 20 {
			t.Errorf("events %s: %v, want 20", ev, n)
		}
	}
	if n := testutil.ToFloat64(m.posts.WithLabelValues("accepted")); n < 20 {
		t.Errorf("posts accepted: %v, want at least 20", n)
	}
	if n := testutil.CollectAndCount(m.toConfirmed); n != 1 {
		t.Errorf("confirmed histogram: %d series", n)
	}
	if n := testutil.ToFloat64(m.unconfirmed.WithLabelValues("main")); n != 0 {
		t.Errorf("unconfirmed gauge %v after every event confirmed", n)
	}
}

// Answers dropped after the node took a post, and transactions dropped from the mempool,
// across a failover: every event is anchored exactly once.
func TestChainUnderFaults(t *testing.T) {
	e := newChainEnv(t, Config{MaxInFlight: 4})
	e.fake.SetFaults(fakearweave.Faults{DropAfterAccept: 0.3, EvictFromMempool: 0.2, TooMany: 0.1})
	for i := range 12 {
		if _, err := e.append("faulty", event("e", int64(i+1))); err != nil {
			t.Fatal(err)
		}
		if i == 6 {
			e.h.Failover()
		}
	}
	await.True(t, 30*time.Second, "half signed", func() bool { return e.head("faulty").Seq >= 6 })
	e.h.Failover()
	e.fake.SetFaults(fakearweave.Faults{})
	e.waitConfirmed("faulty", 12)
}

// A transaction dropped from the mempool and then refused until its anchor expires is signed
// again — it and the events after it — and every event is anchored once: the verifier passes,
// and no transaction the node mined is off the chain.
func TestChainAnchorExpiry(t *testing.T) {
	// The node and the chain agree that an anchor is valid for 5 blocks; blocks are mined by
	// hand below.
	e := newChainEnvOn(t, Config{AnchorDepth: 5}, fakearweave.Config{Manual: true, AnchorDepth: 5})
	for i := range 3 {
		if _, err := e.append("exp", event("e", int64(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	await.True(t, 10*time.Second, "three events posted", func() bool {
		for seq := int64(1); seq <= 3; seq++ {
			if e.event("exp", seq).Status != StatusPosted {
				return false
			}
		}
		return true
	})
	var before []string
	for seq := int64(1); seq <= 3; seq++ {
		before = append(before, e.event("exp", seq).TxID)
	}
	e.expireUnmined(t)
	e.waitConfirmed("exp", 3)
	for seq := int64(1); seq <= 3; seq++ {
		if id := e.event("exp", seq).TxID; id == before[seq-1] {
			t.Errorf("event %d kept its expired transaction %s", seq, id)
		}
	}
}

// expireUnmined has the node (manual mining) drop every transaction it holds and refuse every
// post while ten blocks pass, so that their anchors expire, then mines slowly again.
func (e *chainEnv) expireUnmined(t *testing.T) {
	e.fake.SetFaults(fakearweave.Faults{EvictFromMempool: 1, Unavailable: 1})
	for range 10 {
		e.fake.Mine()
		time.Sleep(40 * time.Millisecond) // a poll or two between blocks
	}
	e.fake.SetFaults(fakearweave.Faults{})
	mineSlowly(t, e.fake)
}

// mineSlowly mines a block every 100 ms until the test ends: an anchor then stays valid for
// half a second on a node of AnchorDepth 5, longer than a loaded machine may take to post a
// transaction again (mined faster, events signed again together can land apart).
func mineSlowly(t *testing.T, f *fakearweave.Fake) {
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				f.Mine()
			}
		}
	}()
}

// flaky is a gateway whose anchor fails while down is set.
type flaky struct {
	*arweave.Client
	down atomic.Bool
}

func (f *flaky) Anchor(ctx context.Context) ([]byte, error) {
	if f.down.Load() {
		return nil, errors.New("gateway down")
	}
	return f.Client.Anchor(ctx)
}

// While the gateway cannot be asked, the first queued event fails after MaxAttempts tries;
// the chain goes on without it (no gap: it was never signed), and retry puts it back at the
// end of the queue.
func TestChainFailureAndRetry(t *testing.T) {
	e := newChainEnv(t, Config{PollInterval: 5 * time.Millisecond})
	gw := &flaky{Client: e.gw}
	gw.down.Store(true)
	e.cfg.Gateway = gw
	e.h.Restart(Kind(e.cfg))
	if _, err := e.append("f", event("a", 1)); err != nil {
		t.Fatal(err)
	}
	await.True(t, 10*time.Second, "the event failed", func() bool { return e.head("f").Failed == 1 })
	var v map[string]any
	body := []byte("a\x001")
	if err := json.Unmarshal(e.h.MustCall(KindName, "f", MethodVersion, body), &v); err != nil || v["status"] != StatusFailed || v["error"] == nil {
		t.Fatalf("failed version: %v %v", v, err)
	}
	gw.down.Store(false)
	if _, err := e.append("f", event("b", 1)); err != nil {
		t.Fatal(err)
	}
	e.waitConfirmed("f", 1) // b alone: seq 1
	var out struct{ Requeued int }
	if err := json.Unmarshal(e.h.MustCall(KindName, "f", MethodRetry, nil), &out); err != nil || out.Requeued != 1 {
		t.Fatalf("retry: %+v %v", out, err)
	}
	h := e.waitConfirmed("f", 2)
	if h.Failed != 0 {
		t.Fatalf("head after retry: %+v", h)
	}
}

// The transparency log: a signed checkpoint of the confirmed events whose root is the tree of
// their attestations computed here from the events alone, an inclusion proof of every event,
// and a consistency proof between two sizes.
func TestChainLog(t *testing.T) {
	skey, vkey, err := note.GenerateKey(nil, "log.example")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	e := newChainEnv(t, Config{LogSigner: signer})
	for i := range 7 {
		if _, err := e.append("logged", event("e", int64(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	e.waitConfirmed("logged", 7)
	// The tree, built here from the events as GET events/{seq} shows them.
	tree := treeMem{}
	var roots []tlog.Hash
	for seq := int64(1); seq <= 7; seq++ {
		var v eventView
		body, _ := json.Marshal(seq)
		if err := json.Unmarshal(e.h.MustCall(KindName, "logged", MethodEvent, body), &v); err != nil {
			t.Fatal(err)
		}
		a := Attestation{PI: v.EntityID, Ver: v.Ver, CID: v.CID, Op: v.Op, Vis: v.Vis, TS: v.TS, PrevTx: v.PrevTx, PrevCID: v.PrevCID, Seq: v.Seq}
		nodes, err := tlog.Append(tree, seq-1, tlog.LeafHash(Leaf(a)))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			tree[[2]int64{int64(n.Level), n.Index}] = n.Hash
		}
		root, _ := tlog.Root(tree, seq)
		roots = append(roots, root)
	}
	verifier, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open(e.h.MustCall(KindName, "logged", MethodCheckpoint, nil), note.VerifierList(verifier))
	if err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	origin, size, root, err := ParseCheckpoint(n.Text)
	if err != nil || origin != "log.example/logged" || size != 7 || root != roots[6] {
		t.Fatalf("checkpoint %q: %v", n.Text, err)
	}
	// Offline, as chain verify --checkpoint does: the leaves of the events walked make its
	// root.
	signed := e.h.MustCall(KindName, "logged", MethodCheckpoint, nil)
	r := Verify(context.Background(), e.gw, *e.head("logged").TxID, nil)
	if !r.OK || len(r.Leaves) != 7 {
		t.Fatalf("verify: %+v", r)
	}
	if size, err := CheckCheckpoint(signed, vkey, r.Leaves); err != nil || size != 7 {
		t.Fatalf("offline check: %d %v", size, err)
	}
	_, otherKey, _ := note.GenerateKey(nil, "log.example")
	if _, err := CheckCheckpoint(signed, otherKey, r.Leaves); err == nil {
		t.Fatal("a checkpoint verified with another key")
	}
	forged := slices.Clone(r.Leaves)
	forged[3] = tlog.LeafHash(Leaf(Attestation{PI: "forged", Ver: 1, Seq: 4}))
	if _, err := CheckCheckpoint(signed, vkey, forged); err == nil {
		t.Fatal("a checkpoint held over another event 4")
	}
	if _, err := CheckCheckpoint(signed, vkey, r.Leaves[:6]); err == nil {
		t.Fatal("a checkpoint of 7 events held over 6")
	}
	for seq := int64(1); seq <= 7; seq++ {
		var p Proof
		body, _ := json.Marshal(Proof{Seq: seq, Size: 7})
		if err := json.Unmarshal(e.h.MustCall(KindName, "logged", MethodProof, body), &p); err != nil {
			t.Fatal(err)
		}
		leaf, _ := tree.Node(0, seq-1)
		if err := tlog.VerifyInclusion(leaf, seq-1, 7, decode(t, p.Hashes), root); err != nil {
			t.Fatalf("inclusion of %d: %v", seq, err)
		}
	}
	var p Proof
	body, _ := json.Marshal(Proof{From: 3, To: 7})
	if err := json.Unmarshal(e.h.MustCall(KindName, "logged", MethodProof, body), &p); err != nil {
		t.Fatal(err)
	}
	if err := tlog.VerifyConsistency(3, 7, decode(t, p.Hashes), roots[2], root); err != nil {
		t.Fatalf("consistency 3→7: %v", err)
	}
	body, _ = json.Marshal(Proof{Seq: 8, Size: 8})
	var ae *actors.Error
	if _, err := e.h.Call(KindName, "logged", MethodProof, body); !errors.As(err, &ae) || ae.Code != "invalid_request" {
		t.Fatalf("a proof past the confirmed events: %v", err)
	}
}

type treeMem map[[2]int64]tlog.Hash

func (m treeMem) Node(level int, index int64) (tlog.Hash, error) {
	h, ok := m[[2]int64{int64(level), index}]
	if !ok {
		return h, fmt.Errorf("no node %d/%d", level, index)
	}
	return h, nil
}

func decode(t *testing.T, hs []string) []tlog.Hash {
	out := make([]tlog.Hash, len(hs))
	for i, s := range hs {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b) != 32 {
			t.Fatalf("hash %q", s)
		}
		copy(out[i][:], b)
	}
	return out
}

// With CheckpointEvery, the chain anchors its own checkpoints as events: 10 events appended
// make checkpoints of 4, 8 and 12 events, 13 events in all. The verifier checks each
// anchored checkpoint's root against the events before it, and names the event anchoring a
// checkpoint that is not their tree.
func TestChainAnchorsCheckpoints(t *testing.T) {
	skey, vkey, err := note.GenerateKey(nil, "log.example")
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := note.NewSigner(skey)
	e := newChainEnv(t, Config{LogSigner: signer, CheckpointEvery: 4})
	for i := range 10 {
		if _, err := e.append("cp", event(fmt.Sprintf("dev-%d", i), 1)); err != nil {
			t.Fatal(err)
		}
	}
	var ae *actors.Error
	if _, err := e.append("cp", event(CheckpointEntity, 4)); !errors.As(err, &ae) || ae.Code != "invalid_id" {
		t.Fatalf("a client's event for the checkpoint entity: %v", err)
	}
	h := e.waitConfirmed("cp", 13)
	r := Verify(context.Background(), e.gw, *h.TxID, nil)
	if !r.OK || len(r.Anchored) != 3 {
		t.Fatalf("verify: %+v %+v", r, r.FirstError)
	}
	v, _ := note.NewVerifier(vkey)
	for i, cp := range r.Anchored {
		if cp.Size != int64(12-4*i) {
			t.Errorf("anchored checkpoint %d: %+v", i, cp)
		}
		if _, err := note.Open(cp.Note, note.VerifierList(v)); err != nil {
			t.Errorf("anchored checkpoint of %d events: %v", cp.Size, err)
		}
	}
	var latest struct {
		Ver  int64  `json:"ver"`
		TxID string `json:"tx_id"`
	}
	if err := json.Unmarshal(e.h.MustCall(KindName, "cp", MethodEntity, []byte(CheckpointEntity)), &latest); err != nil || latest.Ver != 12 || latest.TxID != r.Anchored[0].TxID {
		t.Fatalf("latest checkpoint %+v %v, anchored %+v", latest, err, r.Anchored[0])
	}

	// An event anchoring the checkpoint of 12 events signed over another tree breaks the chain
	// there.
	a := &anchorer{t: t, c: e.gw, fake: e.fake, w: arweave.TestWallet(t)}
	other, _, _ := note.GenerateKey(nil, "log.example")
	otherSigner, _ := note.NewSigner(other)
	body := fmt.Sprintf("%s\n12\n%s\n", Origin("log.example", "cp"), base64.StdEncoding.EncodeToString(make([]byte, 32)))
	bad, _ := note.Sign(&note.Note{Text: body}, otherSigner)
	manifest, _ := json.Marshal(map[string]string{"checkpoint": string(bad)})
	head := a.postEvent("cp", Link{Seq: 13, TxID: *h.TxID, CID: *h.CID}, &Event{EntityID: CheckpointEntity, Ver: 12, Op: "checkpoint", Vis: "public", TS: 1, Manifest: manifest}, nil, nil)
	r = Verify(context.Background(), e.gw, head.TxID, nil)
	if r.OK || r.FirstError == nil || r.FirstError.Seq != 14 || !strings.Contains(r.FirstError.Reason, "not the tree of events 1 to 12") {
		t.Fatalf("a forged anchored checkpoint: %+v %+v", r, r.FirstError)
	}
}

// counting counts the anchors a gateway was asked for.
type counting struct {
	*arweave.Client
	anchors atomic.Int64
}

func (c *counting) Anchor(ctx context.Context) ([]byte, error) {
	c.anchors.Add(1)
	return c.Client.Anchor(ctx)
}

// Two events with different anchors die one after the other: the first is not signed again
// while the second may still be mined (no second transaction for a seq, no broken link), and
// the chain does not ask the node again and again meanwhile; once both are dead, both are
// signed again and anchored once.
func TestChainResignWaitsForEveryTransaction(t *testing.T) {
	e := newChainEnvOn(t, Config{AnchorDepth: 5, AnchorReuse: time.Millisecond}, fakearweave.Config{Manual: true, AnchorDepth: 5})
	gw := &counting{Client: e.gw}
	e.cfg.Gateway = gw
	e.h.Restart(Kind(e.cfg))
	eventOf := func(seq int64) record { return e.event("mixed", seq) }
	h0 := e.fake.Height()
	if _, err := e.append("mixed", event("e", 1)); err != nil {
		t.Fatal(err)
	}
	await.True(t, 10*time.Second, "event 1 posted", func() bool { return eventOf(1).Status == StatusPosted })
	// Two blocks pass without it (dropped, its posts refused), then event 2 is signed with
	// the newer anchor; event 1 is posted again meanwhile.
	e.fake.SetFaults(fakearweave.Faults{EvictFromMempool: 1, Unavailable: 1})
	e.fake.Mine()
	e.fake.Mine()
	e.fake.SetFaults(fakearweave.Faults{})
	if _, err := e.append("mixed", event("e", 2)); err != nil {
		t.Fatal(err)
	}
	await.True(t, 10*time.Second, "event 2 posted", func() bool { return eventOf(2).Status == StatusPosted })
	first, second := eventOf(1).TxID, eventOf(2).TxID
	// Both dropped, and every post refused: event 1 dies at h0+11, event 2 (anchored two
	// blocks later) at h0+13.
	e.fake.SetFaults(fakearweave.Faults{EvictFromMempool: 1, Unavailable: 1})
	for e.fake.Height() < h0+12 {
		e.fake.Mine()
		time.Sleep(60 * time.Millisecond) // two polls a block
	}
	before := gw.anchors.Load()
	time.Sleep(300 * time.Millisecond) // ten polls, event 1 dead, event 2 not yet
	if eventOf(1).TxID != first || eventOf(2).TxID != second {
		t.Fatalf("signed again while event 2's transaction could still be mined")
	}
	if n := gw.anchors.Load() - before; n > 1 {
		t.Errorf("%d anchors asked for while waiting for event 2 to die", n)
	}
	for e.fake.Height() < h0+15 {
		e.fake.Mine()
		time.Sleep(60 * time.Millisecond)
	}
	e.fake.SetFaults(fakearweave.Faults{})
	mineSlowly(t, e.fake)
	e.waitConfirmed("mixed", 2)
	if eventOf(1).TxID == first || eventOf(2).TxID == second {
		t.Errorf("an expired transaction kept: %s %s", eventOf(1).TxID, eventOf(2).TxID)
	}
}

// hiding is a gateway that answers no status of one transaction (as a node under load
// answers 429 or 5xx).
type hiding struct {
	*arweave.Client
	id atomic.Value // string
}

func (h *hiding) StatusOf(ctx context.Context, id string) (arweave.Status, error) {
	if v, _ := h.id.Load().(string); v == id {
		return arweave.Status{}, errors.New("503 Service Unavailable")
	}
	return h.Client.StatusOf(ctx, id)
}

// Three events die together, but the node answers nothing about the first: the two others are
// not signed again (they would link to the first's dead transaction) until the first is seen
// dead too; then all three are, and the chain is whole.
func TestChainResignWaitsForTheEventBefore(t *testing.T) {
	e := newChainEnvOn(t, Config{AnchorDepth: 5}, fakearweave.Config{Manual: true, AnchorDepth: 5})
	gw := &hiding{Client: e.gw}
	e.cfg.Gateway = gw
	e.h.Restart(Kind(e.cfg))
	eventOf := func(seq int64) record { return e.event("hidden", seq) }
	for i := range 3 {
		if _, err := e.append("hidden", event("e", int64(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	await.True(t, 10*time.Second, "three events posted", func() bool {
		return eventOf(1).Status == StatusPosted && eventOf(2).Status == StatusPosted && eventOf(3).Status == StatusPosted
	})
	before := []string{eventOf(1).TxID, eventOf(2).TxID, eventOf(3).TxID}
	gw.id.Store(before[0])
	e.fake.SetFaults(fakearweave.Faults{EvictFromMempool: 1, Unavailable: 1})
	for range 14 {
		e.fake.Mine()
		time.Sleep(60 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // polls see events 2 and 3 dead, event 1 unknown
	for seq := int64(2); seq <= 3; seq++ {
		if eventOf(seq).TxID != before[seq-1] {
			t.Fatalf("event %d signed again while the event before it was not known dead", seq)
		}
	}
	gw.id.Store("")
	e.fake.SetFaults(fakearweave.Faults{})
	mineSlowly(t, e.fake)
	e.waitConfirmed("hidden", 3)
	for seq := int64(1); seq <= 3; seq++ {
		if eventOf(seq).TxID == before[seq-1] {
			t.Errorf("event %d kept its expired transaction", seq)
		}
	}
}
