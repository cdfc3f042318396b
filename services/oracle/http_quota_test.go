package oracle_test

import (
	"net/http"
	"testing"

	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/node/apitest"
	"github.com/shardkeeper/shardkeeper/services/oracle"
)

// oracleRefused checks that an issue for org answers 429 too_many_outstanding with
// Retry-After 60: a sixtieth of the default TTL (1 h).
func oracleRefused(t *testing.T, n *apitest.Node, step, org string) {
	t.Helper()
	r := n.Do(t, "POST", "/v1/nonces", map[string]string{"org_id": org})
	if r.Status != http.StatusTooManyRequests || r.ErrorCode() != "too_many_outstanding" {
		t.Fatalf("%s: issue for %s: %d %s, want 429 too_many_outstanding", step, org, r.Status, r.Body)
	}
	if got := r.Header.Get("Retry-After"); got != "60" {
		t.Fatalf("%s: Retry-After %q, want 60 (TTL/60)", step, got)
	}
}

// oracleIssueOn issues a nonce to org, which must land in shard.
func oracleIssueOn(t *testing.T, n *apitest.Node, step, org, shard string) oracleNonce {
	t.Helper()
	got := oracleIssue(t, n, org, nil)
	if got.Nonce[:2] != shard {
		t.Fatalf("%s: issued in shard %s, want %s", step, got.Nonce[:2], shard)
	}
	return got
}

// --oracle-max-outstanding bounds each organisation's unused nonces, each shard admitting its
// share (here 512 / 256 = 2): past it an issue tries other shards, up to 4 in all, then
// answers 429 too_many_outstanding with Retry-After and issues nothing, while other
// organisations, and the organisation's own reads and consumes, are served. The first
// successful consume of a nonce makes room once; a repeat, or a refused consume, makes none.
func TestOracleMaxOutstanding(t *testing.T) {
	n := apitest.Start(t, func(c *config.Config) {
		oracle.Settings.Update(c, func(o *oracle.Config) { o.MaxOutstanding = 2 * oracle.Shards })
	})
	oracle.PinIssueShards(t, "3f")
	held := []oracleNonce{oracleIssueOn(t, n, "first", "acme", "3f"), oracleIssueOn(t, n, "second", "acme", "3f")}
	oracleRefused(t, n, "third", "acme")
	oracleRefused(t, n, "third, again", "acme")

	// Other organisations are served by the same shard; so are acme's reads and consumes.
	other := oracleIssueOn(t, n, "another organisation", "other-org", "3f")
	if r := n.Do(t, "GET", "/v1/nonces/"+held[0].Nonce, nil); r.Status != http.StatusOK {
		t.Fatalf("get a held nonce: %d %s", r.Status, r.Body)
	}
	oracleConsume(t, n, held[1].Nonce, "acme", "rid-1")

	// The consume made room for one; the refusals before it took none.
	held[1] = oracleIssueOn(t, n, "after a consume", "acme", "3f")
	oracleRefused(t, n, "after the room was taken", "acme")
	consumed := held[1]
	oracleConsume(t, n, consumed.Nonce, "acme", "rid-2")
	held[1] = oracleIssueOn(t, n, "after another consume", "acme", "3f")
	// Repeats of that consume, answered again or refused, and a consume by another
	// organisation, make none.
	oracleConsume(t, n, consumed.Nonce, "acme", "rid-2")
	if r := n.Do(t, "POST", oracleConsumePath(consumed.Nonce), map[string]string{"org_id": "acme"}); r.ErrorCode() != "nonce_used" {
		t.Fatalf("consume again: %d %s", r.Status, r.Body)
	}
	if r := n.Do(t, "POST", oracleConsumePath(held[0].Nonce), map[string]string{"org_id": "other-org"}); r.ErrorCode() != "org_mismatch" {
		t.Fatalf("consume by another organisation: %d %s", r.Status, r.Body)
	}
	oracleRefused(t, n, "after repeated and refused consumes", "acme")
	oracleConsume(t, n, other.Nonce, "other-org", "")
	oracleRefused(t, n, "after another organisation's consume", "acme")

	// A client cannot pick its nonce or its times.
	r := n.Do(t, "POST", "/v1/nonces", map[string]any{"org_id": "new-org", "nonce": held[0].Nonce, "expires_at": 1})
	if r.Status != http.StatusBadRequest || r.ErrorCode() != "invalid_request" {
		t.Fatalf("issue naming its nonce: %d %s", r.Status, r.Body)
	}

	// Refused by a full shard, an issue tries the next: 3f is full, so acme's nonces go to
	// 40, 41 and 42 until each holds two. Then four shards refused: 429, though 43 has room.
	oracle.PinIssueShards(t, "3f", "40", "41", "42", "43")
	for _, shard := range []string{"40", "40", "41", "41", "42", "42"} {
		oracleIssueOn(t, n, "spilling over", "acme", shard)
	}
	oracleRefused(t, n, "four shards full", "acme")
	oracle.PinIssueShards(t, "43")
	oracleIssueOn(t, n, "a fifth shard", "acme", "43")
}

// With --oracle-max-outstanding 0 no organisation is bounded.
func TestOracleMaxOutstandingOff(t *testing.T) {
	n := apitest.Start(t, func(c *config.Config) {
		oracle.Settings.Update(c, func(o *oracle.Config) { o.MaxOutstanding = 0 })
	})
	oracle.PinIssueShards(t, "07")
	for range 20 {
		oracleIssueOn(t, n, "unbounded", "acme", "07")
	}
}
