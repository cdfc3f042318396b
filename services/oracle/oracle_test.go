package oracle_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/actors/actortest"
	"github.com/shardkeeper/shardkeeper/services/oracle"
	"github.com/shardkeeper/shardkeeper/test/await"
)

// oracleEnv is the shared actortest.Harness serving the oracle kind, with the oracle's own
// conveniences.
type oracleEnv struct {
	*actortest.Harness
	t *testing.T
}

// newOracleEnv starts a runtime on a fresh store; now is its clock (the wall clock if nil).
func newOracleEnv(t *testing.T, cfg oracle.Config, now func() time.Time) *oracleEnv {
	t.Helper()
	return &oracleEnv{Harness: actortest.New(t, actortest.Options{Runtime: actors.Options{Clock: now}}, oracle.Kind(cfg)), t: t}
}

// start restarts the runtime with cfg on the env's store.
func (e *oracleEnv) start(cfg oracle.Config) { e.Restart(oracle.Kind(cfg)) }

// call sends one message to shard id; the reply is decoded into out when it is non-nil.
func (e *oracleEnv) call(id, method string, in, out any) error {
	return e.CallJSON(oracle.KindName, id, method, in, out)
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
func (e *oracleEnv) keys(id string) int { return e.KeyCount(oracle.KindName, id) }

// alarmsFired is shardkeeper_alarms_fired_total of the oracle kind.
func (e *oracleEnv) alarmsFired() float64 {
	return e.Metric("shardkeeper_alarms_fired_total", "", map[string]string{"kind": oracle.KindName})
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
	clk := actortest.NewClock(time.UnixMilli(start))
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
		if actortest.Code(err) != want || (want == "" && err != nil) {
			t.Fatalf("%s: %v, want %q", step, err, want)
		}
	}

	clk.SetMS(expires - 1)
	_, err := consume(a, "other", "r1")
	expect("consume by another org", err, "org_mismatch")
	used, err := consume(a, "org", "r1")
	expect("consume 1 ms before expiry", err, "")
	if used.UsedAt != expires-1 || used.Nonce != a.Nonce {
		t.Fatalf("consumed %+v, want used_at %d", used, expires-1)
	}

	clk.SetMS(expires)
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

	clk.SetMS(remove - 1)
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
	clk.SetMS(remove)
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
	e.Failover()
	await.True(t, 10*time.Second, "collection", func() bool { return e.keys(id) == base })
}

// A backlog of due nonces (the node was down past their removal) is collected by several
// firings of at most gcBatch deletions each, without any request.
func TestGCBacklogInBoundedBatches(t *testing.T) {
	const ttl, retention, count = time.Hour, 10 * time.Minute, 2500
	start := time.Now().UnixMilli()
	clk := actortest.NewClock(time.UnixMilli(start))
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
	clk.SetMS(start + (ttl + retention).Milliseconds())
	e.Failover()
	await.True(t, 20*time.Second, "collection of the backlog", func() bool { return e.keys(id) == base })
	if n := e.alarmsFired() - fired; n < count/1000+1 {
		t.Fatalf("%g firings collected %d nonces; batches of at most 1000 need at least %d", n, count, count/1000+1)
	}
}

// Lowering the TTL (a restart with a new configuration) makes a new nonce due for removal
// before older ones: the gc alarm moves earlier, and each nonce goes at its own time.
func TestGCAlarmFollowsEarliestRemoval(t *testing.T) {
	start := time.Now().UnixMilli()
	clk := actortest.NewClock(time.UnixMilli(start))
	e := newOracleEnv(t, oracle.Config{TTL: time.Hour, Retention: time.Minute}, clk.Now)
	const id = "5c"
	base := e.keys(id)
	long := e.issue(id, "org")

	clk.SetMS(start + 1000)
	e.start(oracle.Config{TTL: time.Minute, Retention: time.Minute})
	short := e.issue(id, "org")
	if got := e.keys(id); got != base+6 {
		t.Fatalf("%d keys, want %d", got, base+6)
	}

	clk.SetMS(short.ExpiresAt + time.Minute.Milliseconds())
	e.Failover()
	await.True(t, 10*time.Second, "collection of the short-lived nonce", func() bool { return e.keys(id) == base+4 })
	var info oracle.Info
	if err := e.call(id, oracle.MethodGet, oracle.GetRequest{Nonce: long.Nonce}, &info); err != nil {
		t.Fatalf("long-lived nonce after the short one was collected: %v", err)
	}

	clk.SetMS(long.ExpiresAt + time.Minute.Milliseconds())
	e.Failover()
	await.True(t, 10*time.Second, "collection of the long-lived nonce", func() bool { return e.keys(id) == base })
}

// A failed commit discards the activation with what it cached about its gc alarm: the next
// issue still arms the alarm, and a consume whose commit failed can be retried with its
// request_id.
func TestFailedCommitKeepsGCAndConsumeSafe(t *testing.T) {
	start := time.Now().UnixMilli()
	clk := actortest.NewClock(time.UnixMilli(start))
	e := newOracleEnv(t, oracle.Config{TTL: time.Hour, Retention: time.Minute}, clk.Now)
	const id = "c3"
	base := e.keys(id)
	injected := errors.New("injected commit failure")
	e.Mem.FailProposals(func(uint32) error { return injected })
	if err := e.call(id, oracle.MethodIssue, oracle.IssueRequest{OrgID: "org"}, nil); !errors.Is(err, actors.ErrUnavailable) {
		t.Fatalf("issue with failing commits: %v, want unavailable", err)
	}
	e.Mem.FailProposals(nil)
	if got := e.keys(id); got != base {
		t.Fatalf("a failed issue left %d keys, want %d", got, base)
	}
	var n oracle.Issued
	if err := e.retry(id, oracle.MethodIssue, oracle.IssueRequest{OrgID: "org"}, &n); err != nil {
		t.Fatalf("issue after a failed commit: %v", err)
	}

	e.Mem.FailProposals(func(uint32) error { return injected })
	req := oracle.ConsumeRequest{Nonce: n.Nonce, OrgID: "org", RequestID: "retry-me"}
	if err := e.call(id, oracle.MethodConsume, req, nil); !errors.Is(err, actors.ErrUnavailable) {
		t.Fatalf("consume with failing commits: %v, want unavailable", err)
	}
	e.Mem.FailProposals(nil)
	var first, second oracle.Consumed
	if err := e.retry(id, oracle.MethodConsume, req, &first); err != nil {
		t.Fatalf("consume retried after a failed commit: %v", err)
	}
	if err := e.call(id, oracle.MethodConsume, req, &second); err != nil || second != first {
		t.Fatalf("consume retried again: %+v %v, want %+v", second, err, first)
	}
	req.RequestID = "another"
	if err := e.call(id, oracle.MethodConsume, req, nil); actortest.Code(err) != "nonce_used" {
		t.Fatalf("consume with another request_id: %v, want nonce_used", err)
	}

	clk.SetMS(n.ExpiresAt + time.Minute.Milliseconds())
	e.Failover()
	await.True(t, 10*time.Second, "collection", func() bool { return e.keys(id) == base })
}

// With the wall clock, a short TTL and a short retention, every shard that issued returns to
// its empty state after expiry plus retention, with no request at all.
func TestGCWithoutRequests(t *testing.T) {
	e := newOracleEnv(t, oracle.Config{TTL: 300 * time.Millisecond, Retention: 200 * time.Millisecond}, nil)
	base := map[uint32]int{}
	for p := range uint32(actortest.Partitions) {
		n, err := e.Store.KeyCount(p, []byte{})
		if err != nil {
			t.Fatal(err)
		}
		base[p] = n
	}
	for i := range 200 {
		e.issue(fmt.Sprintf("%02x", i), "org")
	}
	grew := false
	for p := range uint32(actortest.Partitions) {
		if n, _ := e.Store.KeyCount(p, []byte{}); n > base[p] {
			grew = true
		}
	}
	if !grew {
		t.Fatal("issuing stored nothing")
	}
	await.True(t, 10*time.Second, "every partition back to its key count", func() bool {
		for p := range uint32(actortest.Partitions) {
			if n, err := e.Store.KeyCount(p, []byte{}); err != nil || n != base[p] {
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

// A nonce consumed a second time is nonce_used, saying that its first consume consumed it.
func TestNonceUsedSaysTheFirstConsumeUsedIt(t *testing.T) {
	e := newOracleEnv(t, oracle.Config{}, nil)
	n := e.issue("2a", "org")
	req := oracle.ConsumeRequest{Nonce: n.Nonce, OrgID: "org"}
	var first oracle.Consumed
	if err := e.call("2a", oracle.MethodConsume, req, &first); err != nil {
		t.Fatal(err)
	}
	err := e.call("2a", oracle.MethodConsume, req, nil)
	var outcome *actors.Error
	if !errors.As(err, &outcome) || outcome.Code != "nonce_used" ||
		!strings.Contains(outcome.Message, fmt.Sprintf("the first consume consumed it at %d", first.UsedAt)) {
		t.Fatalf("second consume: %v", err)
	}
}

// An org_id of 60 KiB is refused without repeating it.
func TestInvalidOrgIsNotEchoed(t *testing.T) {
	e := oracle.ValidateOrg(strings.Repeat("o", 60<<10) + "!")
	if e == nil || e.Code != "invalid_id" || len(e.Message) > 200 {
		t.Fatalf("outcome %.300v", e)
	}
}
