package actors_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/actors/actortest"
)

// probe is a kind exposing the kinds' building blocks (TimeIndex, Counter, GCAlarm, Dispatch) to the tests, message by message.
type probe struct{ gc actors.GCAlarm }

var (
	index   = actors.TimeIndex{Prefix: []byte("t/")}
	counter = actors.Counter{Key: []byte("meta/count")}
)

// entry is one time index entry in the probe's requests and replies.
type entry struct {
	T    int64  `json:"t"`
	Name string `json:"name"`
}

type rangeReq struct {
	T     int64  `json:"t"`
	From  []byte `json:"from"`
	Limit int    `json:"limit"`
}

func entries(kvs []actors.KV, err error) ([]byte, error) {
	if err != nil {
		return nil, err
	}
	out := []entry{}
	for _, kv := range kvs {
		t, name, err := index.Parse(kv.Key)
		if err != nil {
			return nil, err
		}
		out = append(out, entry{t, name})
	}
	return json.Marshal(out)
}

var methods = actors.Dispatch[*probe]{Name: "probe", Methods: map[string]actors.Method[*probe]{
	"put": actors.JSON(func(_ *probe, ctx *actors.Context, e entry) ([]byte, error) {
		index.Put(ctx, e.T, e.Name, []byte{})
		return nil, nil
	}),
	"delete": actors.JSON(func(_ *probe, ctx *actors.Context, e entry) ([]byte, error) {
		index.Delete(ctx, e.T, e.Name)
		return nil, nil
	}),
	"before": actors.JSON(func(_ *probe, ctx *actors.Context, r rangeReq) ([]byte, error) {
		return entries(index.Before(ctx, r.T, r.From, r.Limit))
	}),
	"from": actors.JSON(func(_ *probe, ctx *actors.Context, r rangeReq) ([]byte, error) {
		return entries(index.From(ctx, r.T, r.Limit))
	}),
	"first": actors.JSON(func(_ *probe, ctx *actors.Context, r rangeReq) ([]byte, error) {
		t, name, ok, err := index.First(ctx, r.From)
		if err != nil || !ok {
			return []byte("null"), err
		}
		return json.Marshal(entry{t, name})
	}),
	"count-set": actors.JSON(func(_ *probe, ctx *actors.Context, n int) ([]byte, error) {
		counter.Set(ctx, n)
		return nil, nil
	}),
	"count-get": func(_ *probe, ctx *actors.Context, _ actors.Request) ([]byte, error) {
		n, err := counter.Get(ctx)
		return []byte(fmt.Sprint(n)), err
	},
	"raw-put": func(_ *probe, ctx *actors.Context, req actors.Request) ([]byte, error) {
		k, v, _ := bytes.Cut(req.Body, []byte("="))
		ctx.Put(k, v)
		return nil, nil
	},
	"arm": actors.JSON(func(p *probe, ctx *actors.Context, t int64) ([]byte, error) { return nil, p.gc.Arm(ctx, t) }),
	"arm-then-fail": actors.JSON(func(p *probe, ctx *actors.Context, t int64) ([]byte, error) {
		if err := p.gc.Arm(ctx, t); err != nil {
			return nil, err
		}
		return nil, errors.New("failing after arming")
	}),
	"arm-then-refuse": actors.JSON(func(p *probe, ctx *actors.Context, t int64) ([]byte, error) {
		if err := p.gc.Arm(ctx, t); err != nil {
			return nil, err
		}
		return nil, actors.Errorf("refused", "an outcome keeps the writes")
	}),
	"raw-alarm": actors.JSON(func(_ *probe, ctx *actors.Context, t int64) ([]byte, error) {
		return nil, ctx.SetAlarm("gc", time.UnixMilli(t))
	}),
	"drop": func(p *probe, ctx *actors.Context, _ actors.Request) ([]byte, error) {
		p.gc.Dropped()
		return nil, ctx.DeleteAlarm("gc")
	},
	"forget": func(p *probe, _ *actors.Context, _ actors.Request) ([]byte, error) { p.gc.Forget(); return nil, nil },
}}

func (p *probe) Receive(ctx *actors.Context, req actors.Request) ([]byte, error) {
	reply, err := methods.Receive(p, ctx, req)
	p.gc.Observe(err)
	return reply, err
}

func (p *probe) Alarm(*actors.Context, actors.Alarm) error { return nil }

const kind = "blocks-probe"

// base is the probe's clock, which stands still: alarms set after it never fire. It is ahead
// of the wall clock, which the alarm scheduler sleeps by (see actortest.Clock).
var base = time.Now().Add(time.Hour).UnixMilli()

func newHarness(t *testing.T) *actortest.Harness {
	clock := actortest.NewClock(time.UnixMilli(base))
	return actortest.New(t, actortest.Options{Runtime: actors.Options{Clock: clock.Now}},
		actors.Kind{Name: kind, New: func(string) actors.Handler { return &probe{gc: actors.GCAlarm{Name: "gc"}} }})
}

func call(t *testing.T, h *actortest.Harness, method string, in any) []byte {
	t.Helper()
	b, _ := json.Marshal(in)
	return h.MustCall(kind, "p", method, b)
}

// The key layout is stored data: prefix, big-endian u64 time (negative as 0), name.
func TestTimeIndexKey(t *testing.T) {
	x := actors.TimeIndex{Prefix: []byte("seen/")}
	want := append([]byte("seen/"), 0, 0, 0, 0, 0, 0, 1, 2)
	if got := x.Key(258, "dev-1"); !bytes.Equal(got, append(want, "dev-1"...)) {
		t.Fatalf("Key = %q, want %q", got, append(want, "dev-1"...))
	}
	if got := x.Key(-5, "a"); !bytes.Equal(got, append(append([]byte("seen/"), make([]byte, 8)...), 'a')) {
		t.Fatalf("negative time: %q", got)
	}
	if bytes.Compare(x.Key(255, "zz"), x.Key(256, "")) >= 0 || bytes.Compare(x.Key(7, ""), x.Key(7, "a")) >= 0 {
		t.Fatal("keys do not sort by time, then name")
	}
	ts, name, err := x.Parse(x.Key(1<<40, "n/x"))
	if err != nil || ts != 1<<40 || name != "n/x" {
		t.Fatalf("Parse = %d %q %v", ts, name, err)
	}
	for _, bad := range [][]byte{[]byte("seen/1234567"), []byte("other/12345678"), nil} {
		if _, _, err := x.Parse(bad); err == nil {
			t.Errorf("Parse(%q) succeeded", bad)
		}
	}
}

// Before, From and First against a model, over random puts and deletes.
func TestTimeIndexRanges(t *testing.T) {
	h := newHarness(t)
	rng := rand.New(rand.NewPCG(7, 9))
	model := map[entry]bool{}
	sorted := func() []entry {
		var out []entry
		for e := range model {
			out = append(out, e)
		}
		slices.SortFunc(out, func(a, b entry) int {
			return bytes.Compare(index.Key(a.T, a.Name), index.Key(b.T, b.Name))
		})
		return out
	}
	for step := range 200 {
		e := entry{T: rng.Int64N(20), Name: fmt.Sprint("n", rng.IntN(5))}
		if rng.IntN(3) == 0 {
			call(t, h, "delete", e)
			delete(model, e)
		} else {
			call(t, h, "put", e)
			model[e] = true
		}
		at, limit := rng.Int64N(22), rng.IntN(4)
		var before, from []entry
		for _, e := range sorted() {
			if e.T < at && (limit == 0 || len(before) < limit) {
				before = append(before, e)
			}
			if e.T >= at && (limit == 0 || len(from) < limit) {
				from = append(from, e)
			}
		}
		for method, want := range map[string][]entry{"before": before, "from": from} {
			var got []entry
			if err := json.Unmarshal(call(t, h, method, rangeReq{T: at, Limit: limit}), &got); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Fatalf("step %d: %s %d limit %d = %v, want %v", step, method, at, limit, got, want)
			}
		}
		var first *entry
		if err := json.Unmarshal(call(t, h, "first", rangeReq{}), &first); err != nil {
			t.Fatal(err)
		}
		if s := sorted(); (len(s) == 0) != (first == nil) || (first != nil && *first != s[0]) {
			t.Fatalf("step %d: first = %v, want the earliest of %v", step, first, s)
		}
	}
	// Before starting at a key skips what sorts before it (a scan hint).
	call(t, h, "put", entry{T: 100, Name: "a"})
	call(t, h, "put", entry{T: 101, Name: "b"})
	var got []entry
	_ = json.Unmarshal(call(t, h, "before", rangeReq{T: 200, From: index.Key(101, "")}), &got)
	if len(got) != 1 || got[0] != (entry{101, "b"}) {
		t.Fatalf("before 200 from 101 = %v", got)
	}
}

func TestCounter(t *testing.T) {
	h := newHarness(t)
	if got := string(call(t, h, "count-get", nil)); got != "0" {
		t.Fatalf("count of a new actor = %s", got)
	}
	call(t, h, "count-set", 258)
	v, ok := h.State(kind, "p").Get("meta/count")
	if want := binary.BigEndian.AppendUint64(nil, 258); !ok || !bytes.Equal(v, want) {
		t.Fatalf("stored count %x, want %x", v, want)
	}
	if got := string(call(t, h, "count-get", nil)); got != "258" {
		t.Fatalf("count = %s", got)
	}
	call(t, h, "count-set", 0)
	if s := h.State(kind, "p"); s.Keys() != 0 {
		t.Fatalf("a count of zero keeps keys: %+v", s.Data)
	}
	h.MustCall(kind, "p", "raw-put", []byte("meta/count=abc"))
	if _, err := h.Call(kind, "p", "count-get", nil); err == nil || !strings.Contains(err.Error(), "meta/count of 3 bytes") {
		t.Fatalf("count of a malformed value: %v", err)
	}
}

// gcDue is the due time of the probe's gc alarm in storage (0: none).
func gcDue(h *actortest.Harness) int64 { return h.State(kind, "p").Alarms["gc"].Due }

func TestGCAlarm(t *testing.T) {
	h := newHarness(t)
	call(t, h, "arm", base+5000)
	if d := gcDue(h); d != base+5000 {
		t.Fatalf("armed with none pending: due %d, want 5000", d)
	}
	call(t, h, "arm", base+9000) // later: the alarm already covers it
	if d := gcDue(h); d != base+5000 {
		t.Fatalf("armed later: due %d, want 5000", d)
	}
	call(t, h, "arm", base+3000) // earlier: moves
	if d := gcDue(h); d != base+3000 {
		t.Fatalf("armed earlier: due %d, want 3000", d)
	}

	// The due time is cached: a change behind the cache's back goes unseen until Forget.
	call(t, h, "raw-alarm", base+8000)
	call(t, h, "arm", base+4000)
	if d := gcDue(h); d != base+8000 {
		t.Fatalf("armed from the cache: due %d, want the uncached 8000 left alone", d)
	}
	call(t, h, "forget", nil)
	call(t, h, "arm", base+4000)
	if d := gcDue(h); d != base+4000 {
		t.Fatalf("armed after Forget: due %d, want 4000", d)
	}

	// A rolled-back message's arming is forgotten; an outcome's is kept.
	if _, err := h.Call(kind, "p", "arm-then-fail", []byte(fmt.Sprint(base+1000))); err == nil {
		t.Fatal("arm-then-fail succeeded")
	}
	call(t, h, "arm", base+2000)
	if d := gcDue(h); d != base+2000 {
		t.Fatalf("armed after a rolled-back arming: due %d, want 2000", d)
	}
	var outcome *actors.Error
	if _, err := h.Call(kind, "p", "arm-then-refuse", []byte(fmt.Sprint(base+1500))); !errors.As(err, &outcome) {
		t.Fatalf("arm-then-refuse: %v", err)
	}
	if d := gcDue(h); d != base+1500 {
		t.Fatalf("an outcome's arming: due %d, want 1500", d)
	}

	// Dropped: the alarm went, so the next arming sets it whatever the time.
	call(t, h, "drop", nil)
	call(t, h, "arm", base+7000)
	if d := gcDue(h); d != base+7000 {
		t.Fatalf("armed after Dropped: due %d, want 7000", d)
	}
}

func TestDispatch(t *testing.T) {
	h := newHarness(t)
	if _, err := h.Call(kind, "p", "nope", nil); err == nil || err.Error() != `probe: unknown method "nope"` {
		t.Fatalf("unknown method: %v", err)
	}
	long := strings.Repeat("m", 10000)
	if _, err := h.Call(kind, "p", long, nil); err == nil || len(err.Error()) > 200 {
		t.Fatalf("unknown long method: error of %d bytes", len(err.Error()))
	}
	var outcome *actors.Error
	if _, err := h.Call(kind, "p", "put", []byte(`{"t":"x"}`)); !errors.As(err, &outcome) || outcome.Code != "invalid_request" {
		t.Fatalf("malformed body: %v", err)
	}

	// A Value of the method's type is taken as it is; a Value of another type is ignored and
	// Body decoded.
	for _, c := range []struct {
		value any
		want  string
	}{{9, "9"}, {int64(9), "7"}, {nil, "7"}} {
		req := actors.Request{Method: "count-set", Body: []byte("7"), Value: c.value}
		if _, err := h.Runtime.Call(context.Background(), kind, "v", req); err != nil {
			t.Fatal(err)
		}
		if got := string(h.MustCall(kind, "v", "count-get", nil)); got != c.want {
			t.Fatalf("count-set with Value %#v and Body 7: count %s, want %s", c.value, got, c.want)
		}
	}
}
