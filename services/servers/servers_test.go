package servers

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/actors/actortest"
	"github.com/shardkeeper/shardkeeper/test/await"
)

// The tests run the kind in the real runtime (actortest: MemReplicator over a real Pebble
// store) with a fake clock the test advances, wrapped in a probe kind of the same name that
// adds two test methods: "check" (verify the storage invariants of the package comment) and
// "records" (the stored server ids, expired or not). After the clock jumped, Harness.Wake
// makes the partition's alarm scheduler look at the alarms.

// probe wraps the registry handler. With gcOff its gc alarm fails (and, with the harness'
// hour-long alarm backoff, is not retried during a test); onGC observes each successful gc
// firing's deletions.
type probe struct {
	*registry
	gcOff bool
	onGC  func(deleted int)
}

func (p *probe) Receive(ctx *actors.Context, req actors.Request) ([]byte, error) {
	switch req.Method {
	case "check":
		return nil, p.check(ctx)
	case "records":
		kvs, err := ctx.List(actors.ListOptions{Prefix: prefixSrv})
		var ids []string
		for _, kv := range kvs {
			ids = append(ids, string(kv.Key[len(prefixSrv):]))
		}
		return []byte(strings.Join(ids, ",")), err
	}
	return p.registry.Receive(ctx, req)
}

func (p *probe) Alarm(ctx *actors.Context, a actors.Alarm) error {
	if p.gcOff {
		return errors.New("gc disabled by the test")
	}
	before, err := count.Get(ctx)
	if err != nil {
		return err
	}
	if err := p.registry.Alarm(ctx, a); err != nil {
		return err
	}
	after, err := count.Get(ctx)
	if err == nil && p.onGC != nil {
		p.onGC(before - after)
	}
	return err
}

// check verifies the invariants: records and index entries match one to one, meta/count
// counts them, and while entries exist a gc alarm is pending no later than the earliest
// expiry (unless its firing failed and it was moved by the backoff).
func (p *probe) check(ctx *actors.Context) error {
	srv, err := ctx.List(actors.ListOptions{Prefix: prefixSrv})
	if err != nil {
		return err
	}
	seen, err := ctx.List(actors.ListOptions{Prefix: seenIndex.Prefix})
	if err != nil {
		return err
	}
	all, err := ctx.List(actors.ListOptions{})
	if err != nil {
		return err
	}
	n, err := count.Get(ctx)
	if err != nil {
		return err
	}
	if n != len(srv) || len(seen) != len(srv) {
		return fmt.Errorf("meta/count %d, %d records, %d index entries", n, len(srv), len(seen))
	}
	if want := len(srv) + len(seen) + min(n, 1); len(all) != want {
		return fmt.Errorf("%d keys stored, want %d", len(all), want)
	}
	lastSeen := map[string]int64{}
	for _, kv := range srv {
		var rec record
		if err := json.Unmarshal(kv.Value, &rec); err != nil {
			return err
		}
		lastSeen[string(kv.Key[len(prefixSrv):])] = rec.LastSeen
	}
	earliest := int64(-1)
	for _, kv := range seen {
		t, id, err := seenIndex.Parse(kv.Key)
		if err != nil {
			return err
		}
		if ls, ok := lastSeen[id]; !ok || ls != t {
			return fmt.Errorf("index entry %s@%d, record last_seen %d (present %v)", id, t, ls, ok)
		}
		if earliest < 0 {
			earliest = t + p.ttl()
		}
	}
	if n == 0 {
		return nil
	}
	alarms, err := ctx.Alarms()
	if err != nil {
		return err
	}
	for _, a := range alarms {
		if a.Name == GCAlarm {
			if a.Attempt == 0 && a.Due.UnixMilli() > earliest {
				return fmt.Errorf("gc alarm due %d, after the earliest expiry %d", a.Due.UnixMilli(), earliest)
			}
			return nil
		}
	}
	return fmt.Errorf("%d entries and no gc alarm pending", n)
}

// harness is the shared actortest.Harness with the registry's own conveniences.
type harness struct {
	*actortest.Harness
	t     testing.TB
	clock *actortest.Clock
}

// newHarness runs the probe-wrapped kind with cfg on a fresh store, leading every partition.
// Alarm retries are an hour apart: a gc firing the test disabled is not retried.
func newHarness(t testing.TB, cfg Config, wrap func(*probe)) *harness {
	t.Helper()
	clock := actortest.NewClock(time.Now().Add(time.Hour))
	kind := actors.Kind{Name: KindName, New: func(string) actors.Handler {
		p := &probe{registry: &registry{cfg: cfg}}
		if wrap != nil {
			wrap(p)
		}
		return p
	}}
	h := actortest.New(t, actortest.Options{Runtime: actors.Options{Clock: clock.Now, AlarmBackoff: time.Hour}}, kind)
	return &harness{Harness: h, t: t, clock: clock}
}

// call sends one message. A background context makes the runtime take its deadline from the
// fake clock.
func (h *harness) call(registry, method string, body any) ([]byte, error) {
	h.t.Helper()
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			h.t.Fatal(err)
		}
	}
	return h.Harness.Call(KindName, registry, method, b)
}

func (h *harness) mustCall(registry, method string, body any) []byte {
	h.t.Helper()
	out, err := h.call(registry, method, body)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, registry, err)
	}
	return out
}

func (h *harness) check(registry string) {
	h.t.Helper()
	h.mustCall(registry, "check", nil)
}

func (h *harness) register(registry, id string) (Registered, error) {
	var out Registered
	b, err := h.call(registry, MethodRegister, Registration{ServerID: id, Address: "10.0.0.1:" + id})
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	return out, err
}

func (h *harness) list(registry string) List {
	h.t.Helper()
	var l List
	if err := json.Unmarshal(h.mustCall(registry, MethodList, nil), &l); err != nil {
		h.t.Fatal(err)
	}
	return l
}

func TestValidate(t *testing.T) {
	big := `{"k":"` + strings.Repeat("x", MaxMetaBytes-8) + `"}` // exactly MaxMetaBytes
	for _, tc := range []struct {
		name     string
		reg      Registration
		code     string
		wantMeta string
	}{
		{"minimal", Registration{ServerID: "a", Address: "x"}, "", `{}`},
		{"null meta", Registration{ServerID: "a", Address: "x", Meta: json.RawMessage(`null`)}, "", `{}`},
		{"meta compacted", Registration{ServerID: "a_-Z9", Address: "x", Meta: json.RawMessage(" { \"a\" : [1, 2] } ")}, "", `{"a":[1,2]}`},
		{"meta at the limit", Registration{ServerID: "a", Address: "x", Meta: json.RawMessage(big)}, "", big},
		{"meta over the limit", Registration{ServerID: "a", Address: "x", Meta: json.RawMessage(big[:len(big)-2] + `x"}`)}, "invalid_request", ""},
		{"meta limit counts compact form", Registration{ServerID: "a", Address: "x", Meta: json.RawMessage(big[:len(big)-1] + "   }")}, "", big},
		{"meta array", Registration{ServerID: "a", Address: "x", Meta: json.RawMessage(`[1]`)}, "invalid_request", ""},
		{"meta string", Registration{ServerID: "a", Address: "x", Meta: json.RawMessage(`"s"`)}, "invalid_request", ""},
		{"meta malformed", Registration{ServerID: "a", Address: "x", Meta: json.RawMessage(`{"a":`)}, "invalid_request", ""},
		{"no address", Registration{ServerID: "a"}, "invalid_request", ""},
		{"empty id", Registration{Address: "x"}, "invalid_id", ""},
		{"id too long", Registration{ServerID: strings.Repeat("a", 65), Address: "x"}, "invalid_id", ""},
		{"id of 64", Registration{ServerID: strings.Repeat("a", 64), Address: "x"}, "", `{}`},
		{"id with slash", Registration{ServerID: "a/b", Address: "x"}, "invalid_id", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := tc.reg
			err := reg.Validate()
			got := ""
			if err != nil {
				got = err.Code
			}
			if got != tc.code {
				t.Fatalf("code %q, want %q (%v)", got, tc.code, err)
			}
			if tc.code == "" && string(reg.Meta) != tc.wantMeta {
				t.Fatalf("meta %s, want %s", reg.Meta, tc.wantMeta)
			}
		})
	}
}

func TestMessages(t *testing.T) {
	h := newHarness(t, Config{TTL: time.Second, MaxServers: 10}, nil)
	for _, tc := range []struct {
		method string
		body   string
		code   string
	}{
		{MethodRegister, `{`, "invalid_request"},
		{MethodRegister, `{"server_id":"a"}`, "invalid_request"},
		{MethodRegister, `{"server_id":"","address":"x"}`, "invalid_id"},
		{MethodDelete, `{`, "invalid_request"},
		{MethodDelete, `{"server_id":"a/b"}`, "invalid_id"},
		{MethodDelete, `{"server_id":"nobody"}`, "unknown_server"},
		{"frobnicate", ``, `error: server registry: unknown method "frobnicate"`},
	} {
		_, err := h.Harness.Call(KindName, "r", tc.method, []byte(tc.body))
		if got := actortest.Code(err); got != tc.code {
			t.Errorf("%s %s: %q, want %q", tc.method, tc.body, got, tc.code)
		}
	}
	if l := h.list("never-used"); l.Servers == nil || len(l.Servers) != 0 {
		t.Fatalf("list of an unused registry: %+v", l)
	}
	h.check("r")
}

// TestFullRegistryCollectsInline shows that entries expired but not yet collected do not
// count against MaxServers: with the gc alarm disabled, a registration into a full registry
// collects just enough expired entries, oldest first, and a registry full of live entries
// refuses with RetryAfter = time until the oldest expires.
func TestFullRegistryCollectsInline(t *testing.T) {
	h := newHarness(t, Config{TTL: time.Second, MaxServers: 3}, func(p *probe) { p.gcOff = true })
	const reg = "inline"
	t0 := h.clock.NowMS()
	for _, id := range []string{"a", "b", "c"} {
		if out, err := h.register(reg, id); err != nil || !out.Created || out.RegisteredAt != t0 {
			t.Fatalf("register %s: %+v, %v", id, out, err)
		}
	}
	h.clock.Advance(600 * time.Millisecond)
	if out, err := h.register(reg, "b"); err != nil || out.Created || out.RegisteredAt != t0 || out.LastSeen != t0+600 {
		t.Fatalf("heartbeat b: %+v, %v", out, err)
	}
	_, err := h.register(reg, "d")
	var full *actors.Error
	if !errors.As(err, &full) || full.Code != "registry_full" || full.RetryAfter != 400*time.Millisecond {
		t.Fatalf("register d into a full registry: %v (%+v)", err, full)
	}
	h.check(reg)

	h.clock.Advance(400 * time.Millisecond) // a and c expire; b has 600 ms left
	if l := h.list(reg); len(l.Servers) != 1 || l.Servers[0].ServerID != "b" {
		t.Fatalf("live servers: %+v", l)
	}
	if out, err := h.register(reg, "d"); err != nil || !out.Created {
		t.Fatalf("register d after a and c expired: %+v, %v", out, err)
	}
	h.check(reg)
	// Exactly one expired entry was collected: a (index order: same last_seen, then id).
	if got := string(h.mustCall(reg, "records", nil)); got != "b,c,d" {
		t.Fatalf("stored records %s, want b,c,d", got)
	}
	if out, err := h.register(reg, "e"); err != nil || !out.Created {
		t.Fatalf("register e: %+v, %v", out, err)
	}
	if got := string(h.mustCall(reg, "records", nil)); got != "b,d,e" {
		t.Fatalf("stored records %s, want b,d,e", got)
	}
	_, err = h.register(reg, "f")
	if !errors.As(err, &full) || full.Code != "registry_full" || full.RetryAfter != 600*time.Millisecond {
		t.Fatalf("register f into a registry of 3 live: %v", err)
	}
	// An expired entry re-registering is new again, and takes a slot only if one is free.
	h.clock.Advance(600 * time.Millisecond) // b expires
	if out, err := h.register(reg, "b"); err != nil || !out.Created || out.RegisteredAt != h.clock.NowMS() {
		t.Fatalf("re-register expired b: %+v, %v", out, err)
	}
	h.check(reg)
}

// TestGCCollectsInBatches expires more entries at once than one gc firing may delete and
// shows the alarm deletes them in batches of at most gcBatch, re-arming until none is left,
// and that the registry's storage, alarm included, returns to what it was before.
func TestGCCollectsInBatches(t *testing.T) {
	const total = 2*gcBatch + 500
	var mu sync.Mutex
	var firings []int
	h := newHarness(t, Config{TTL: time.Second, MaxServers: total}, func(p *probe) {
		p.onGC = func(n int) {
			mu.Lock()
			firings = append(firings, n)
			mu.Unlock()
		}
	})
	const reg = "batches"
	baseline := h.KeyCount(KindName, reg)
	var wg sync.WaitGroup
	ids := make(chan int)
	for range 32 {
		wg.Go(func() {
			for i := range ids {
				if _, err := h.register(reg, fmt.Sprintf("s%05d", i)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for i := range total {
		ids <- i
	}
	close(ids)
	wg.Wait()
	h.check(reg)
	if n := h.KeyCount(KindName, reg); n <= baseline+2*total {
		t.Fatalf("%d keys after %d registrations, baseline %d", n, total, baseline)
	}

	h.clock.Advance(time.Second)
	h.Wake(KindName, reg)
	await.True(t, 20*time.Second, "the registry's keys to return to the baseline", func() bool {
		return h.KeyCount(KindName, reg) == baseline
	})
	mu.Lock()
	defer mu.Unlock()
	sum := 0
	for _, n := range firings {
		if n > gcBatch {
			t.Errorf("a gc firing deleted %d entries, more than %d", n, gcBatch)
		}
		sum += n
	}
	if sum != total || len(firings) < 3 {
		t.Fatalf("gc firings %v deleted %d, want %d in at least 3 firings", firings, sum, total)
	}
	h.check(reg)
}

// modelEntry is the model's view of one server.
type modelEntry struct {
	address, region      string
	registered, lastSeen int64
}

// TestRegistryModel runs random operations against the registry and a plain-map model of
// the contract, where expiry is decided by time alone, while the gc alarm runs whenever the
// scheduler gets to it. Replies must match the model exactly and the storage invariants must
// hold after every step, so no outcome depends on whether collection has happened.
func TestRegistryModel(t *testing.T) {
	const (
		ttl        = 1000
		maxServers = 5
		ids        = 9
		steps      = 300
	)
	seeds := 6
	if testing.Short() {
		seeds = 2
	}
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 42))
			h := newHarness(t, Config{TTL: ttl * time.Millisecond, MaxServers: maxServers}, nil)
			reg := fmt.Sprint("model", seed)
			model := map[string]*modelEntry{}
			live := func(e *modelEntry, now int64) bool { return now < e.lastSeen+ttl }
			outcomes := map[string]int{}
			defer func() { t.Logf("outcomes: %v", outcomes) }()
			for i := range steps {
				now := h.clock.NowMS()
				id := fmt.Sprint("s", rng.IntN(ids))
				switch op := rng.IntN(10); {
				case op < 5: // register or heartbeat
					addr := fmt.Sprint("host", rng.IntN(100))
					body := Registration{ServerID: id, Address: addr, Region: fmt.Sprint("r", rng.IntN(3))}
					b, err := h.call(reg, MethodRegister, body)
					e := model[id]
					switch {
					case e != nil && live(e, now):
						outcomes["heartbeat"]++
						e.address, e.region, e.lastSeen = addr, body.Region, now
						want, _ := json.Marshal(Registered{ServerID: id, RegisteredAt: e.registered, LastSeen: now})
						if err != nil || string(b) != string(want) {
							t.Fatalf("step %d heartbeat %s: %s %v, want %s", i, id, b, err, want)
						}
					case countLive(model, now, live) >= maxServers:
						outcomes["registry_full"]++
						oldest := int64(-1)
						for _, m := range model {
							if live(m, now) && (oldest < 0 || m.lastSeen < oldest) {
								oldest = m.lastSeen
							}
						}
						var full *actors.Error
						if !errors.As(err, &full) || full.Code != "registry_full" ||
							full.RetryAfter != time.Duration(oldest+ttl-now)*time.Millisecond {
							t.Fatalf("step %d register %s into a full registry: %s %v (retry %v), oldest live %d now %d",
								i, id, b, err, full, oldest, now)
						}
					default:
						outcomes["created"]++
						model[id] = &modelEntry{address: addr, region: body.Region, registered: now, lastSeen: now}
						want, _ := json.Marshal(Registered{ServerID: id, RegisteredAt: now, LastSeen: now, Created: true})
						if err != nil || string(b) != string(want) {
							t.Fatalf("step %d register %s: %s %v, want %s", i, id, b, err, want)
						}
					}
				case op < 6: // admin delete
					_, err := h.call(reg, MethodDelete, Deletion{ServerID: id})
					want := "unknown_server"
					if e := model[id]; e != nil && live(e, now) {
						want = ""
					}
					delete(model, id)
					outcomes[cmp.Or(want, "deleted")]++
					if got := actortest.Code(err); got != want {
						t.Fatalf("step %d delete %s: %q, want %q", i, id, got, want)
					}
				case op < 8: // list
					var want []Entry
					for mid, e := range model {
						if live(e, now) {
							want = append(want, Entry{ServerID: mid, Address: e.address, Region: e.region,
								Meta: json.RawMessage(`{}`), RegisteredAt: e.registered, LastSeen: e.lastSeen})
						}
					}
					sort.Slice(want, func(i, j int) bool { return want[i].ServerID < want[j].ServerID })
					wantB, _ := json.Marshal(List{Servers: append([]Entry{}, want...)})
					if got := h.mustCall(reg, MethodList, nil); string(got) != string(wantB) {
						t.Fatalf("step %d list at %d:\n got %s\nwant %s", i, now, got, wantB)
					}
				default: // time passes; the scheduler may run gc now, later or not at all
					h.clock.Advance(time.Duration(rng.IntN(ttl*6/10)) * time.Millisecond)
					if rng.IntN(2) == 0 {
						h.Wake(KindName, reg)
					}
				}
				h.check(reg)
			}
		})
	}
}

func countLive(model map[string]*modelEntry, now int64, live func(*modelEntry, int64) bool) int {
	n := 0
	for _, e := range model {
		if live(e, now) {
			n++
		}
	}
	return n
}
