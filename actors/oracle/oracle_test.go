package oracle_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/test/await"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/actors/oracle"
	"github.com/shardkeeper/shardkeeper/persistence"
)

const testPartitions = 4

// clock is a settable clock for the runtime; it only moves forward.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set moves the clock to Unix millisecond ms.
func (c *clock) Set(ms int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = time.UnixMilli(ms)
}

// oracleEnv is a runtime serving the oracle kind over actors.MemReplicator on a real Pebble
// store, leading every partition.
type oracleEnv struct {
	t     *testing.T
	rt    *actors.Runtime
	store *persistence.Store
	mem   *actors.MemReplicator
	reg   *prometheus.Registry
	clock func() time.Time
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

// newOracleEnv starts a runtime on a fresh store; now is its clock (the wall clock if nil).
func newOracleEnv(t *testing.T, cfg oracle.Config, now func() time.Time) *oracleEnv {
	t.Helper()
	store, err := persistence.Open(t.TempDir(), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	mem, err := actors.NewMemReplicator(store, testPartitions)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	e := &oracleEnv{t: t, store: store, mem: mem, clock: now}
	e.start(cfg)
	return e
}

// start starts a runtime with cfg on the env's store; a running one is closed first.
func (e *oracleEnv) start(cfg oracle.Config) {
	e.t.Helper()
	if e.rt != nil {
		e.rt.Close()
	}
	e.reg = prometheus.NewRegistry()
	rt, err := actors.New(actors.Options{Store: e.store, Replicator: e.mem, Partitions: testPartitions,
		Registerer: e.reg, Logger: quietLogger(), Clock: e.clock}, oracle.Kind(cfg))
	if err != nil {
		e.t.Fatal(err)
	}
	e.rt = rt
	e.t.Cleanup(rt.Close)
	for p := range uint32(testPartitions) {
		rt.SetLeader(p, true)
	}
	e.waitReady()
}

func (e *oracleEnv) waitReady() {
	e.t.Helper()
	await.True(e.t, 10*time.Second, "every partition ready", func() bool {
		for p := range uint32(testPartitions) {
			if !e.rt.Ready(p) {
				return false
			}
		}
		return true
	})
}

// failover drops and regains the leadership of every partition: activations restart and the
// alarm schedulers rescan their index with the current clock.
func (e *oracleEnv) failover() {
	e.t.Helper()
	for p := range uint32(testPartitions) {
		e.rt.SetLeader(p, false)
		e.rt.SetLeader(p, true)
	}
	e.waitReady()
}

// call sends one message to shard id; the reply is decoded into out when it is non-nil.
func (e *oracleEnv) call(id, method string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	reply, err := e.rt.Call(context.Background(), oracle.KindName, id, actors.Request{Method: method, Body: body})
	if err != nil || out == nil {
		return err
	}
	return json.Unmarshal(reply, out)
}

// retry is call repeated while it answers unavailable (as a client retries a 503), for up to
// 10 s: after a failed commit the actor refuses messages until its activation is replaced.
func (e *oracleEnv) retry(id, method string, in, out any) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := e.call(id, method, in, out)
		if !errors.Is(err, actors.ErrUnavailable) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *oracleEnv) issue(id, org string) oracle.Issued {
	e.t.Helper()
	var out oracle.Issued
	if err := e.call(id, oracle.MethodIssue, oracle.IssueRequest{OrgID: org}, &out); err != nil {
		e.t.Fatalf("issue on shard %s: %v", id, err)
	}
	return out
}

// keys counts the stored keys of the partition holding shard id: its nonces, index entries
// and alarm.
func (e *oracleEnv) keys(id string) int {
	e.t.Helper()
	n, err := e.store.KeyCount(actors.PartitionOf(oracle.KindName, id, testPartitions), []byte{})
	if err != nil {
		e.t.Fatal(err)
	}
	return n
}

// alarmsFired is shardkeeper_alarms_fired_total of the oracle kind.
func (e *oracleEnv) alarmsFired() float64 {
	e.t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "shardkeeper_alarms_fired_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == oracle.KindName {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// code is the domain outcome code of err ("" if err is not an *actors.Error).
func code(err error) string {
	var e *actors.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func TestShardOfAcceptsOnlyTheIssuedShape(t *testing.T) {
	random := base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{0xab}, 32))
	good := "3f_" + random
	if id, ok := oracle.ShardOf(good); !ok || id != "3f" {
		t.Fatalf("ShardOf(%q) = %q, %v; want 3f, true", good, id, ok)
	}
	// The last character of 32 bytes in base64 carries 2 unused bits, which must be zero:
	// the next character of the alphabet spells the same bytes with a non-zero unused bit.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, good[len(good)-1])
	unusedBits := good[:len(good)-1] + string(alphabet[last+1])
	for _, bad := range []string{
		"", "3f", "3f_", good[:len(good)-1], good + "A", "3F_" + random, "g0_" + random,
		"3f-" + random, "3f_" + random[:42] + "=", "3f_" + random[:42] + "!", unusedBits,
		"003f_" + random[2:],
	} {
		if id, ok := oracle.ShardOf(bad); ok {
			t.Errorf("ShardOf(%q) = %q, true; want false", bad, id)
		}
	}
	seen := map[string]bool{}
	for range 10000 {
		id := oracle.RandomShard()
		if _, ok := oracle.ShardOf(id + "_" + random); !ok {
			t.Fatalf("RandomShard() = %q is not a shard", id)
		}
		seen[id] = true
	}
	if len(seen) != oracle.Shards {
		t.Errorf("10000 random shards hit %d distinct shards, want all %d", len(seen), oracle.Shards)
	}
}

// The outcomes at each boundary of a nonce's life, decided by the partition clock, whether
// or not garbage collection has run.
func TestLifetimeBoundaries(t *testing.T) {
	const ttl, retention = time.Hour, 10 * time.Minute
	start := time.Now().UnixMilli()
	clk := &clock{}
	clk.Set(start)
	e := newOracleEnv(t, oracle.Config{TTL: ttl, Retention: retention}, clk.Now)
	const id = "a0"
	base := e.keys(id)
	a, b := e.issue(id, "org"), e.issue(id, "org")
	if a.IssuedAt != start || a.ExpiresAt != start+ttl.Milliseconds() || a.OrgID != "org" {
		t.Fatalf("issued %+v at %d, want issued_at %d, expires_at +%s", a, start, start, ttl)
	}
	expires, remove := a.ExpiresAt, a.ExpiresAt+retention.Milliseconds()

	consume := func(n oracle.Issued, org, rid string) (oracle.Consumed, error) {
		var out oracle.Consumed
		err := e.call(id, oracle.MethodConsume, oracle.ConsumeRequest{Nonce: n.Nonce, OrgID: org, RequestID: rid}, &out)
		return out, err
	}
	get := func(n oracle.Issued) (oracle.Info, error) {
		var out oracle.Info
		err := e.call(id, oracle.MethodGet, oracle.GetRequest{Nonce: n.Nonce}, &out)
		return out, err
	}
	expect := func(step string, err error, want string) {
		t.Helper()
		if code(err) != want || (want == "" && err != nil) {
			t.Fatalf("%s: %v, want %q", step, err, want)
		}
	}

	clk.Set(expires - 1)
	_, err := consume(a, "other", "r1")
	expect("consume by another org", err, "org_mismatch")
	used, err := consume(a, "org", "r1")
	expect("consume 1 ms before expiry", err, "")
	if used.UsedAt != expires-1 || used.Nonce != a.Nonce {
		t.Fatalf("consumed %+v, want used_at %d", used, expires-1)
	}

	clk.Set(expires)
	_, err = consume(b, "org", "")
	expect("consume unused at expires_at", err, "nonce_expired")
	_, err = consume(a, "org", "r2")
	expect("consume used and expired, other request_id", err, "nonce_used")
	_, err = consume(a, "org", "")
	expect("consume used and expired, no request_id", err, "nonce_used")
	again, err := consume(a, "org", "r1")
	expect("consume used and expired, same request_id", err, "")
	if again != used {
		t.Fatalf("repeated consume answered %+v, want %+v", again, used)
	}

	clk.Set(remove - 1)
	_, err = consume(b, "org", "")
	expect("consume unused 1 ms before removal", err, "nonce_expired")
	info, err := get(a)
	expect("get used 1 ms before removal", err, "")
	if info.UsedAt == nil || *info.UsedAt != used.UsedAt || info.ExpiresAt != expires || info.IssuedAt != start {
		t.Fatalf("get %+v, want used_at %d", info, used.UsedAt)
	}
	info, err = get(b)
	expect("get unused 1 ms before removal", err, "")
	if info.UsedAt != nil {
		t.Fatalf("get unused nonce: used_at %d, want null", *info.UsedAt)
	}

	// From remove_at on the nonces are unknown, though no collection has run yet: the
	// scheduler sleeps on the wall clock, which is an hour behind.
	clk.Set(remove)
	for _, n := range []oracle.Issued{a, b} {
		_, err = get(n)
		expect("get at removal", err, "unknown_nonce")
		_, err = consume(n, "org", "r1")
		expect("consume at removal", err, "unknown_nonce")
	}
	if got := e.keys(id); got != base+6 {
		t.Fatalf("%d keys before collection, want %d: two nonces, two index entries, one alarm (2 keys)", got, base+6)
	}
	// A new leader's scheduler finds the gc alarm due and collects both.
	e.failover()
	await.True(t, 10*time.Second, "collection", func() bool { return e.keys(id) == base })
}

// A backlog of due nonces (the node was down past their removal) is collected by several
// firings of at most gcBatch deletions each, without any request.
func TestGCBacklogInBoundedBatches(t *testing.T) {
	const ttl, retention, count = time.Hour, 10 * time.Minute, 2500
	start := time.Now().UnixMilli()
	clk := &clock{}
	clk.Set(start)
	e := newOracleEnv(t, oracle.Config{TTL: ttl, Retention: retention}, clk.Now)
	const id = "00"
	base := e.keys(id)
	var wg sync.WaitGroup
	errs := make(chan error, count)
	for g := range 25 {
		wg.Go(func() {
			for i := range count / 25 {
				if err := e.call(id, oracle.MethodIssue, oracle.IssueRequest{OrgID: fmt.Sprintf("o%d-%d", g, i%3)}, nil); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := e.keys(id); got != base+2*count+2 {
		t.Fatalf("%d keys after %d issues, want %d", got, count, base+2*count+2)
	}
	fired := e.alarmsFired()
	clk.Set(start + (ttl + retention).Milliseconds())
	e.failover()
	await.True(t, 20*time.Second, "collection of the backlog", func() bool { return e.keys(id) == base })
	if n := e.alarmsFired() - fired; n < count/1000+1 {
		t.Fatalf("%g firings collected %d nonces; batches of at most 1000 need at least %d", n, count, count/1000+1)
	}
}

// Lowering the TTL (a restart with a new configuration) makes a new nonce due for removal
// before older ones: the gc alarm moves earlier, and each nonce goes at its own time.
func TestGCAlarmFollowsEarliestRemoval(t *testing.T) {
	start := time.Now().UnixMilli()
	clk := &clock{}
	clk.Set(start)
	e := newOracleEnv(t, oracle.Config{TTL: time.Hour, Retention: time.Minute}, clk.Now)
	const id = "5c"
	base := e.keys(id)
	long := e.issue(id, "org")

	clk.Set(start + 1000)
	e.start(oracle.Config{TTL: time.Minute, Retention: time.Minute})
	short := e.issue(id, "org")
	if got := e.keys(id); got != base+6 {
		t.Fatalf("%d keys, want %d", got, base+6)
	}

	clk.Set(short.ExpiresAt + time.Minute.Milliseconds())
	e.failover()
	await.True(t, 10*time.Second, "collection of the short-lived nonce", func() bool { return e.keys(id) == base+4 })
	var info oracle.Info
	if err := e.call(id, oracle.MethodGet, oracle.GetRequest{Nonce: long.Nonce}, &info); err != nil {
		t.Fatalf("long-lived nonce after the short one was collected: %v", err)
	}

	clk.Set(long.ExpiresAt + time.Minute.Milliseconds())
	e.failover()
	await.True(t, 10*time.Second, "collection of the long-lived nonce", func() bool { return e.keys(id) == base })
}

// A failed commit discards the activation with what it cached about its gc alarm: the next
// issue still arms the alarm, and a consume whose commit failed can be retried with its
// request_id.
func TestFailedCommitKeepsGCAndConsumeSafe(t *testing.T) {
	start := time.Now().UnixMilli()
	clk := &clock{}
	clk.Set(start)
	e := newOracleEnv(t, oracle.Config{TTL: time.Hour, Retention: time.Minute}, clk.Now)
	const id = "c3"
	base := e.keys(id)
	injected := errors.New("injected commit failure")
	e.mem.FailProposals(func(uint32) error { return injected })
	if err := e.call(id, oracle.MethodIssue, oracle.IssueRequest{OrgID: "org"}, nil); !errors.Is(err, actors.ErrUnavailable) {
		t.Fatalf("issue with failing commits: %v, want unavailable", err)
	}
	e.mem.FailProposals(nil)
	if got := e.keys(id); got != base {
		t.Fatalf("a failed issue left %d keys, want %d", got, base)
	}
	var n oracle.Issued
	if err := e.retry(id, oracle.MethodIssue, oracle.IssueRequest{OrgID: "org"}, &n); err != nil {
		t.Fatalf("issue after a failed commit: %v", err)
	}

	e.mem.FailProposals(func(uint32) error { return injected })
	req := oracle.ConsumeRequest{Nonce: n.Nonce, OrgID: "org", RequestID: "retry-me"}
	if err := e.call(id, oracle.MethodConsume, req, nil); !errors.Is(err, actors.ErrUnavailable) {
		t.Fatalf("consume with failing commits: %v, want unavailable", err)
	}
	e.mem.FailProposals(nil)
	var first, second oracle.Consumed
	if err := e.retry(id, oracle.MethodConsume, req, &first); err != nil {
		t.Fatalf("consume retried after a failed commit: %v", err)
	}
	if err := e.call(id, oracle.MethodConsume, req, &second); err != nil || second != first {
		t.Fatalf("consume retried again: %+v %v, want %+v", second, err, first)
	}
	req.RequestID = "another"
	if err := e.call(id, oracle.MethodConsume, req, nil); code(err) != "nonce_used" {
		t.Fatalf("consume with another request_id: %v, want nonce_used", err)
	}

	clk.Set(n.ExpiresAt + time.Minute.Milliseconds())
	e.failover()
	await.True(t, 10*time.Second, "collection", func() bool { return e.keys(id) == base })
}

// With the wall clock, a short TTL and a short retention, every shard that issued returns to
// its empty state after expiry plus retention, with no request at all.
func TestGCWithoutRequests(t *testing.T) {
	e := newOracleEnv(t, oracle.Config{TTL: 300 * time.Millisecond, Retention: 200 * time.Millisecond}, nil)
	base := map[uint32]int{}
	for p := range uint32(testPartitions) {
		n, err := e.store.KeyCount(p, []byte{})
		if err != nil {
			t.Fatal(err)
		}
		base[p] = n
	}
	for i := range 200 {
		e.issue(fmt.Sprintf("%02x", i), "org")
	}
	grew := false
	for p := range uint32(testPartitions) {
		if n, _ := e.store.KeyCount(p, []byte{}); n > base[p] {
			grew = true
		}
	}
	if !grew {
		t.Fatal("issuing stored nothing")
	}
	await.True(t, 10*time.Second, "every partition back to its key count", func() bool {
		for p := range uint32(testPartitions) {
			if n, err := e.store.KeyCount(p, []byte{}); err != nil || n != base[p] {
				return false
			}
		}
		return true
	})
}

// The zero Config issues random nonces (crypto/rand) living DefaultTTL.
func TestZeroConfigDefaults(t *testing.T) {
	e := newOracleEnv(t, oracle.Config{}, nil)
	a, b := e.issue("11", "org"), e.issue("11", "org")
	if a.Nonce == b.Nonce {
		t.Fatalf("two issues gave the same nonce %q", a.Nonce)
	}
	if got := a.ExpiresAt - a.IssuedAt; got != oracle.DefaultTTL.Milliseconds() {
		t.Fatalf("default lifetime %d ms, want %d", got, oracle.DefaultTTL.Milliseconds())
	}
}
