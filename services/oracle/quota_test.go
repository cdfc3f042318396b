package oracle_test

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/actors/actortest"
	"github.com/shardkeeper/shardkeeper/services/oracle"
	"github.com/shardkeeper/shardkeeper/test/await"
)

// commandLog is a replicator that keeps a copy of every command it commits.
type commandLog struct {
	*actors.MemReplicator
	mu   sync.Mutex
	cmds [][]byte
}

func (l *commandLog) Propose(grp uint32, cmd []byte) actors.Future {
	l.mu.Lock()
	l.cmds = append(l.cmds, bytes.Clone(cmd))
	l.mu.Unlock()
	return l.MemReplicator.Propose(grp, cmd)
}

// writing counts the commands since the nth that hold key.
func (l *commandLog) writing(n int, key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	found := 0
	for _, cmd := range l.cmds[n:] {
		if bytes.Contains(cmd, []byte(key)) {
			found++
		}
	}
	return found
}

func (l *commandLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.cmds)
}

// newQuotaEnv is newOracleEnv on a clock an hour ahead of the wall clock (so that the gc
// alarm fires when Wake says, see actortest.Clock), logging the commands.
func newQuotaEnv(t *testing.T, cfg oracle.Config) (*oracleEnv, *actortest.Clock, *commandLog) {
	clk := actortest.NewClock(time.Now().Add(time.Hour))
	var log *commandLog
	h := actortest.New(t, actortest.Options{Runtime: actors.Options{Clock: clk.Now}, Wrap: func(m *actors.MemReplicator) actors.Replicator {
		log = &commandLog{MemReplicator: m}
		return log
	}}, oracle.Kind(cfg))
	return &oracleEnv{Harness: h, t: t}, clk, log
}

// refused checks that an issue for org on shard id is too_many_outstanding with retryAfter,
// and writes nothing.
func (e *oracleEnv) refused(step, id, org string, retryAfter time.Duration) {
	e.t.Helper()
	before := e.State(oracle.KindName, id)
	err := e.call(id, oracle.MethodIssue, oracle.IssueRequest{OrgID: org}, nil)
	var outcome *actors.Error
	if !errors.As(err, &outcome) || outcome.Code != "too_many_outstanding" || outcome.RetryAfter != retryAfter {
		e.t.Fatalf("%s: issue for %s: %v, want too_many_outstanding after %s", step, org, err, retryAfter)
	}
	if after := e.State(oracle.KindName, id); !reflect.DeepEqual(after, before) {
		e.t.Fatalf("%s: the refused issue wrote: %d keys, then %d", step, before.Keys(), after.Keys())
	}
}

// issueN issues n nonces to org on shard id, which must all be admitted.
func (e *oracleEnv) issueN(step, id, org string, n int) []oracle.Issued {
	e.t.Helper()
	out := make([]oracle.Issued, n)
	for i := range out {
		if err := e.call(id, oracle.MethodIssue, oracle.IssueRequest{OrgID: org}, &out[i]); err != nil {
			e.t.Fatalf("%s: issue %d of %d: %v", step, i+1, n, err)
		}
	}
	return out
}

func (e *oracleEnv) consume(id string, n oracle.Issued, org, rid string) error {
	return e.call(id, oracle.MethodConsume, oracle.ConsumeRequest{Nonce: n.Nonce, OrgID: org, RequestID: rid}, nil)
}

func (e *oracleEnv) mustConsume(id string, org string, ns ...oracle.Issued) {
	e.t.Helper()
	for _, n := range ns {
		if err := e.consume(id, n, org, ""); err != nil {
			e.t.Fatalf("consume %s: %v", n.Nonce, err)
		}
	}
}

// collect fires the gc alarm of shard id at the clock's time and waits until nonce is gone.
func (e *oracleEnv) collect(id string, nonce oracle.Issued) {
	e.t.Helper()
	e.Wake(oracle.KindName, id)
	await.True(e.t, 10*time.Second, "collection of "+nonce.Nonce, func() bool {
		_, kept := e.State(oracle.KindName, id).Get("n/" + nonce.Nonce)
		return !kept
	})
}

// Each shard admits MaxOutstanding/Shards (here 2) unused nonces of an organisation. A nonce
// counts from its issue to its first successful consume, or, unused, to its removal by the
// gc alarm — through its expiry and retention; a repeated or refused consume, or the
// removal of a used nonce, frees nothing. A refused issue writes nothing; other
// organisations are served. Once every nonce is collected the shard holds no key.
func TestShardBoundsOutstanding(t *testing.T) {
	const ttl, retention = 2 * time.Minute, time.Minute
	const retryAfter = ttl / 60
	e, clk, _ := newQuotaEnv(t, oracle.Config{TTL: ttl, Retention: retention, MaxOutstanding: 2*oracle.Shards + 1})
	const id = "3f"
	base := e.keys(id)

	a := e.issue(id, "acme")
	e.issue(id, "beta")
	clk.Advance(10 * time.Second)
	b := e.issue(id, "acme")
	e.refused("third", id, "acme", retryAfter)
	e.issue(id, "gamma")

	// The first consume of a makes room for one; its repeats, answered again or refused, and
	// a consume by another organisation make none.
	e.mustConsume(id, "acme", a)
	if err := e.consume(id, a, "acme", ""); actortest.Code(err) != "nonce_used" {
		t.Fatalf("consume again: %v", err)
	}
	if err := e.consume(id, b, "beta", ""); actortest.Code(err) != "org_mismatch" {
		t.Fatalf("consume by beta: %v", err)
	}
	clk.Advance(10 * time.Second)
	c := e.issue(id, "acme")
	e.refused("after the room was taken", id, "acme", retryAfter)

	// Expired, b still counts, and consuming it is refused; it stops counting when the gc
	// alarm removes it, a retention later, with a (used, so freeing nothing more).
	clk.SetMS(b.ExpiresAt)
	if err := e.consume(id, b, "acme", ""); actortest.Code(err) != "nonce_expired" {
		t.Fatalf("consume expired: %v", err)
	}
	e.refused("b expired", id, "acme", retryAfter)
	clk.SetMS(b.ExpiresAt + retention.Milliseconds())
	e.collect(id, b)
	d := e.issue(id, "acme")
	e.refused("c and d held", id, "acme", retryAfter)

	// Once every nonce is collected — d consumed, c left unused — the shard holds nothing,
	// its organisations' marks included.
	e.mustConsume(id, "acme", d)
	clk.SetMS(d.ExpiresAt + retention.Milliseconds())
	e.collect(id, c)
	await.True(t, 10*time.Second, "collection of every nonce", func() bool { return e.keys(id) == base })
}

// An organisation that issues and consumes writes its mark once: issues and consumes do not
// write the count.
func TestOutstandingCountIsNotWrittenPerNonce(t *testing.T) {
	e, _, log := newQuotaEnv(t, oracle.Config{MaxOutstanding: 16 * oracle.Shards})
	const id = "7a"
	e.mustConsume(id, "acme", e.issue(id, "acme"))
	if n := log.writing(0, "o/acme"); n != 1 {
		t.Fatalf("the first issue wrote the mark in %d commands, want 1", n)
	}
	from := log.len()
	for range 20 {
		e.mustConsume(id, "acme", e.issue(id, "acme"))
	}
	if n := log.writing(from, "o/acme"); n != 0 {
		t.Fatalf("20 issues and consumes wrote the mark in %d commands, want none", n)
	}
}

// After a new activation (here a failover) a shard counts the organisation's earlier nonces
// from its stored mark, which can be higher than their number: it errs toward counting —
// refusing early, never admitting past the bound — until every nonce stored before is
// collected; then the count is exact again.
func TestOutstandingAfterFailover(t *testing.T) {
	const perShard = 32
	e, clk, _ := newQuotaEnv(t, oracle.Config{TTL: time.Minute, Retention: time.Minute, MaxOutstanding: perShard * oracle.Shards})
	const id = "c0"
	base := e.keys(id)
	early := e.issueN("early half", id, "acme", perShard/2)
	clk.Advance(10 * time.Second)
	late := e.issueN("late half", id, "acme", perShard/2)
	e.refused("at the bound", id, "acme", time.Second)
	e.mustConsume(id, "acme", early[:10]...)

	e.Failover()
	clk.Advance(time.Second)
	e.refused("22 held, the mark at 32", id, "acme", time.Second)
	e.mustConsume(id, "acme", early[10:13]...)
	after := e.issueN("after 3 consumes", id, "acme", 3)
	e.refused("22 held, counted as 32", id, "acme", time.Second)

	// The early half collected, 3 of it unused: 3 places more; the late half still counts
	// from the mark.
	clk.SetMS(early[0].ExpiresAt + time.Minute.Milliseconds())
	e.collect(id, early[len(early)-1])
	after = append(after, e.issueN("early half collected", id, "acme", 3)...)
	e.refused("22 held, counted as 32 again", id, "acme", time.Second)

	// Every nonce from before collected, acme holds the 6 issued since: exact.
	clk.SetMS(late[0].ExpiresAt + time.Minute.Milliseconds())
	e.collect(id, late[len(late)-1])
	after = append(after, e.issueN("exact again", id, "acme", perShard-6)...)
	e.refused("at the bound again", id, "acme", time.Second)

	e.mustConsume(id, "acme", after[6:]...) // the first 6 expired: collected unused
	clk.SetMS(after[len(after)-1].ExpiresAt + time.Minute.Milliseconds())
	e.collect(id, after[len(after)-1])
	await.True(t, 10*time.Second, "collection of every nonce", func() bool { return e.keys(id) == base })
}

// The gc alarm lowers a mark far above an exact count, never below it: after a failover the
// organisation is counted from the lowered mark.
func TestOutstandingMarkIsLowered(t *testing.T) {
	const perShard = 32 // a slack of 2
	e, clk, _ := newQuotaEnv(t, oracle.Config{TTL: time.Minute, Retention: time.Minute, MaxOutstanding: perShard * oracle.Shards})
	const id = "d7"
	first := e.issue(id, "acme")
	e.mustConsume(id, "acme", first)
	clk.Advance(10 * time.Second)
	held := e.issueN("20", id, "acme", 20) // the mark rises to 21
	e.mustConsume(id, "acme", held[:15]...)

	clk.SetMS(first.ExpiresAt + time.Minute.Milliseconds())
	e.collect(id, first) // acme holds 5, exactly: the mark goes down to 7
	e.Failover()
	e.issueN("counted from the mark", id, "acme", perShard-7)
	e.refused("at the bound", id, "acme", time.Second)
}

// A mark whose organisation holds nothing any more is deleted, even when two new activations
// came before the gc alarm could tell.
func TestOutstandingMarksAreCollected(t *testing.T) {
	e, clk, _ := newQuotaEnv(t, oracle.Config{TTL: time.Minute, Retention: time.Minute, MaxOutstanding: 16 * oracle.Shards})
	const id = "5e"
	base := e.keys(id)
	beta := e.issue(id, "beta")
	e.mustConsume(id, "beta", beta)
	clk.Advance(10 * time.Second)
	acme := e.issue(id, "acme")

	e.Failover()
	clk.SetMS(beta.ExpiresAt + time.Minute.Milliseconds())
	e.collect(id, beta) // beta counted from its mark: not exact, kept
	e.Failover()
	clk.SetMS(acme.ExpiresAt + time.Minute.Milliseconds())
	e.collect(id, acme)
	await.True(t, 10*time.Second, "collection of every nonce and mark", func() bool { return e.keys(id) == base })
}

// Whether a nonce counts is stored with it: nonces issued with no bound (or before counting
// existed) never count once a bound is set, and consuming them frees nothing. A restart
// counts the earlier nonces from the mark, exact again once they are collected.
func TestOutstandingAcrossBoundChanges(t *testing.T) {
	const perShard = 8
	bounded := oracle.Config{TTL: time.Minute, Retention: time.Minute, MaxOutstanding: perShard * oracle.Shards}
	e, clk, _ := newQuotaEnv(t, bounded)
	const id = "c1"
	x := e.issue(id, "acme") // counted: the mark is 2 (1 and a slack of 1)

	e.start(oracle.Config{TTL: time.Minute, Retention: time.Minute})
	y, z := e.issue(id, "acme"), e.issue(id, "acme")
	e.mustConsume(id, "acme", x)

	e.start(bounded)
	clk.Advance(time.Second)
	e.issueN("after the restart", id, "acme", perShard-2)
	e.refused("6 counted, and the mark", id, "acme", time.Second)
	e.mustConsume(id, "acme", y)
	e.refused("y was not counted", id, "acme", time.Second)

	clk.SetMS(z.ExpiresAt + time.Minute.Milliseconds())
	e.collect(id, z)
	e.issueN("exact again", id, "acme", 2)
	e.refused("at the bound", id, "acme", time.Second)
}

// More organisations than a shard keeps counts of in memory (4096) neither lose a count nor
// admit past the bound: the counts of organisations holding nothing are dropped, and when
// that is not enough the shard counts again from the marks.
func TestOutstandingWithManyOrganisations(t *testing.T) {
	const perShard = 64
	e, _, _ := newQuotaEnv(t, oracle.Config{MaxOutstanding: perShard * oracle.Shards})
	const id = "e4"
	e.issueN("acme up to the bound", id, "acme", perShard)
	for i := range 5000 { // each holds one: 4096 of them end the epoch
		e.issue(id, fmt.Sprintf("org-%d", i))
	}
	e.refused("acme after 5000 others", id, "acme", time.Minute)
	for i := range 5000 { // each consumes its one and issues again: dropped, then counted again
		org := fmt.Sprintf("other-%d", i)
		e.mustConsume(id, org, e.issue(id, org))
	}
	e.refused("acme after 5000 more", id, "acme", time.Minute)
	// org-0 holds 1, counted in a later epoch from its mark: 1 and a slack of 4.
	e.issueN("org-0, after all", id, "org-0", perShard-5)
	e.refused("org-0 at its mark's bound", id, "org-0", time.Minute)
}
