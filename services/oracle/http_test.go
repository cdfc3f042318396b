package oracle_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/api"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/ident"
	"github.com/shardkeeper/shardkeeper/node/apitest"
	"github.com/shardkeeper/shardkeeper/services/oracle"
)

// oracleNonce is the body of a 201 from POST /v1/nonces.
type oracleNonce struct {
	Nonce     string `json:"nonce"`
	OrgID     string `json:"org_id"`
	IssuedAt  int64  `json:"issued_at"`
	ExpiresAt int64  `json:"expires_at"`
}

// oracleInfo is the body of a 200 from GET /v1/nonces/{nonce}.
type oracleInfo struct {
	Nonce     string `json:"nonce"`
	OrgID     string `json:"org_id"`
	IssuedAt  int64  `json:"issued_at"`
	ExpiresAt int64  `json:"expires_at"`
	UsedAt    *int64 `json:"used_at"`
}

// oracleConsumed is the body of a 200 from POST /v1/nonces/{nonce}/consume.
type oracleConsumed struct {
	Nonce  string `json:"nonce"`
	UsedAt int64  `json:"used_at"`
}

func oracleConsumePath(nonce string) string { return "/v1/nonces/" + nonce + "/consume" }

// oracleIssue issues a nonce to org and records its shard in shards (when non-nil).
func oracleIssue(t testing.TB, n *apitest.Node, org string, shards map[string]bool) oracleNonce {
	t.Helper()
	r := n.Do(t, "POST", "/v1/nonces", map[string]string{"org_id": org})
	if r.Status != http.StatusCreated {
		t.Fatalf("issue for %s: %d %s", org, r.Status, r.Body)
	}
	var out oracleNonce
	r.JSON(t, &out)
	if shards != nil {
		shards[out.Nonce[:2]] = true
	}
	return out
}

// oracleConsume consumes nonce for org with request id rid (omitted when empty); it must
// answer 200.
func oracleConsume(t testing.TB, n *apitest.Node, nonce, org, rid string) oracleConsumed {
	t.Helper()
	body := map[string]string{"org_id": org}
	if rid != "" {
		body["request_id"] = rid
	}
	r := n.Do(t, "POST", oracleConsumePath(nonce), body)
	if r.Status != http.StatusOK {
		t.Fatalf("consume %s: %d %s", nonce, r.Status, r.Body)
	}
	var out oracleConsumed
	r.JSON(t, &out)
	return out
}

// oracleAwaitWallClock waits until the wall clock is past ms (Unix ms): the node's partition
// clock is this machine's wall clock, so its expiry decisions are then past ms too.
func oracleAwaitWallClock(ms int64) {
	for time.Now().UnixMilli() <= ms {
		time.Sleep(time.Until(time.UnixMilli(ms + 1)))
	}
}

// oracleRandomPart is a fresh, well-formed random part of a nonce (what follows "<shard>_").
func oracleRandomPart(t testing.TB) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// oracleRow is one request of a table-driven oracle test and the answer it must get.
type oracleRow struct {
	name   string
	method string
	path   string
	body   any
	status int
	code   string                             // error code, "" on success
	check  func(*testing.T, apitest.Response) // further checks of a success
}

// oracleRun sends the rows to n in order.
func oracleRun(t *testing.T, n *apitest.Node, rows []oracleRow) {
	t.Helper()
	for _, tc := range rows {
		r := n.Do(t, tc.method, tc.path, tc.body)
		if r.Status != tc.status || r.ErrorCode() != tc.code {
			t.Fatalf("%s: %s %s → %d %s, want %d %q", tc.name, tc.method, tc.path, r.Status, r.Body, tc.status, tc.code)
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q", tc.name, ct)
		}
		if tc.check != nil {
			tc.check(t, r)
		}
	}
}

// oracleUsedAtIs checks that a consume answered 200 with used_at *want.
func oracleUsedAtIs(want *int64) func(*testing.T, apitest.Response) {
	return func(t *testing.T, r apitest.Response) {
		var got oracleConsumed
		r.JSON(t, &got)
		if got.UsedAt != *want || got.Nonce == "" {
			t.Fatalf("consume answered %s, want used_at %d", r.Body, *want)
		}
	}
}

// TestOracleAPI walks every row and error code of the nonce oracle contract but expiry, in
// order, on one node with the default TTL (1 h). TestOracleExpiryAPI has the expiry rows.
func TestOracleAPI(t *testing.T) {
	n := apitest.Start(t, nil)

	// Fixtures.
	shards := map[string]bool{} // shards that issued
	fresh := oracleIssue(t, n, "org-1", shards)
	usedPlain := oracleIssue(t, n, "org-1", shards)
	oracleConsume(t, n, usedPlain.Nonce, "org-1", "")
	usedRID := oracleIssue(t, n, "org-1", shards)
	use := oracleConsume(t, n, usedRID.Nonce, "org-1", "rid-1")
	forGet := oracleIssue(t, n, "org-1", shards)
	otherOrg := oracleIssue(t, n, "org-2", shards)

	// A well-shaped nonce in a shard that issued others, and one in a shard that never issued
	// (the rows below issue only at the very end).
	strangerInIssuingShard := fresh.Nonce[:3] + oracleRandomPart(t)
	var silentShard string
	for i := range 256 {
		if s := fmt.Sprintf("%02x", i); !shards[s] {
			silentShard = s
			break
		}
	}
	strangerInSilentShard := silentShard + "_" + oracleRandomPart(t)
	var forGetUse oracleConsumed // the consume of forGet, checked by a later GET
	big := `{"org_id":"` + strings.Repeat("a", api.MaxBody) + `"}`

	oracleRun(t, n, []oracleRow{
		// POST /v1/nonces/{nonce}/consume
		{name: "consume never issued, in a shard that never issued", method: "POST",
			path: oracleConsumePath(strangerInSilentShard), body: `{"org_id":"org-1"}`, status: 404, code: "unknown_nonce"},
		{name: "consume never issued, in a shard that issued", method: "POST",
			path: oracleConsumePath(strangerInIssuingShard), body: `{"org_id":"org-1"}`, status: 404, code: "unknown_nonce"},
		{name: "consume garbage", method: "POST", path: oracleConsumePath("not-a-nonce"), body: `{"org_id":"org-1"}`, status: 404, code: "unknown_nonce"},
		{name: "consume outside the nonce alphabet", method: "POST", path: oracleConsumePath(url.PathEscape("a.b c")),
			body: `{"org_id":"org-1"}`, status: 404, code: "unknown_nonce"},
		{name: "consume over 128 characters", method: "POST", path: oracleConsumePath(strings.Repeat("a", 129)),
			body: `{"org_id":"org-1"}`, status: 404, code: "unknown_nonce"},
		{name: "consume with upper-case shard", method: "POST", path: oracleConsumePath("3F_" + oracleRandomPart(t)),
			body: `{"org_id":"org-1"}`, status: 404, code: "unknown_nonce"},
		{name: "consume without org_id", method: "POST", path: oracleConsumePath(fresh.Nonce), body: `{"request_id":"x"}`, status: 400, code: "invalid_request"},
		{name: "consume with invalid org_id", method: "POST", path: oracleConsumePath(fresh.Nonce), body: `{"org_id":"org/1"}`, status: 400, code: "invalid_id"},
		{name: "consume with unknown field", method: "POST", path: oracleConsumePath(fresh.Nonce),
			body: `{"org_id":"org-1","nonce":"x"}`, status: 400, code: "invalid_request"},
		{name: "consume with malformed JSON", method: "POST", path: oracleConsumePath(fresh.Nonce), body: `["org-1"]`, status: 400, code: "invalid_request"},
		{name: "consume with too long request_id", method: "POST", path: oracleConsumePath(fresh.Nonce),
			body: `{"org_id":"org-1","request_id":"` + strings.Repeat("r", 129) + `"}`, status: 400, code: "invalid_request"},
		{name: "consume with a body over 64 KiB", method: "POST", path: oracleConsumePath(fresh.Nonce), body: big, status: 413, code: "body_too_large"},
		{name: "consume by another org", method: "POST", path: oracleConsumePath(otherOrg.Nonce), body: `{"org_id":"org-1"}`, status: 403, code: "org_mismatch"},
		{name: "consume", method: "POST", path: oracleConsumePath(fresh.Nonce), body: `{"org_id":"org-1"}`, status: 200,
			check: func(t *testing.T, r apitest.Response) {
				var got oracleConsumed
				r.JSON(t, &got)
				if got.Nonce != fresh.Nonce || got.UsedAt < fresh.IssuedAt || got.UsedAt >= fresh.ExpiresAt {
					t.Fatalf("consume answered %s for %+v", r.Body, fresh)
				}
			}},
		{name: "consume again", method: "POST", path: oracleConsumePath(fresh.Nonce), body: `{"org_id":"org-1"}`, status: 409, code: "nonce_used"},
		{name: "consume used without request_id", method: "POST", path: oracleConsumePath(usedPlain.Nonce),
			body: `{"org_id":"org-1"}`, status: 409, code: "nonce_used"},
		{name: "consume used by no request_id, with one", method: "POST", path: oracleConsumePath(usedPlain.Nonce),
			body: `{"org_id":"org-1","request_id":"rid-1"}`, status: 409, code: "nonce_used"},
		{name: "consume used with the same request_id", method: "POST", path: oracleConsumePath(usedRID.Nonce),
			body: `{"org_id":"org-1","request_id":"rid-1"}`, status: 200, check: oracleUsedAtIs(&use.UsedAt)},
		{name: "consume used with the same request_id, once more", method: "POST", path: oracleConsumePath(usedRID.Nonce),
			body: `{"org_id":"org-1","request_id":"rid-1"}`, status: 200, check: oracleUsedAtIs(&use.UsedAt)},
		{name: "consume used with another request_id", method: "POST", path: oracleConsumePath(usedRID.Nonce),
			body: `{"org_id":"org-1","request_id":"rid-2"}`, status: 409, code: "nonce_used"},
		{name: "consume used without request_id after one with", method: "POST", path: oracleConsumePath(usedRID.Nonce),
			body: `{"org_id":"org-1"}`, status: 409, code: "nonce_used"},
		{name: "consume used with the same request_id by another org", method: "POST", path: oracleConsumePath(usedRID.Nonce),
			body: `{"org_id":"org-2","request_id":"rid-1"}`, status: 403, code: "org_mismatch"},

		// GET /v1/nonces/{nonce}
		{name: "get unused", method: "GET", path: "/v1/nonces/" + forGet.Nonce, status: 200,
			check: func(t *testing.T, r apitest.Response) {
				var got oracleInfo
				r.JSON(t, &got)
				if got.Nonce != forGet.Nonce || got.OrgID != "org-1" || got.IssuedAt != forGet.IssuedAt ||
					got.ExpiresAt != forGet.ExpiresAt || got.UsedAt != nil || !bytes.Contains(r.Body, []byte(`"used_at":null`)) {
					t.Fatalf("get answered %s for %+v, want used_at null", r.Body, forGet)
				}
			}},
		{name: "consume the read nonce", method: "POST", path: oracleConsumePath(forGet.Nonce),
			body: `{"org_id":"org-1"}`, status: 200, check: func(t *testing.T, r apitest.Response) { r.JSON(t, &forGetUse) }},
		{name: "get used", method: "GET", path: "/v1/nonces/" + forGet.Nonce, status: 200,
			check: func(t *testing.T, r apitest.Response) {
				var got oracleInfo
				r.JSON(t, &got)
				if got.UsedAt == nil || *got.UsedAt != forGetUse.UsedAt || got.ExpiresAt != forGet.ExpiresAt {
					t.Fatalf("get answered %s, want used_at %d", r.Body, forGetUse.UsedAt)
				}
			}},
		{name: "get never issued, in a shard that never issued", method: "GET", path: "/v1/nonces/" + strangerInSilentShard,
			status: 404, code: "unknown_nonce"},
		{name: "get never issued, in a shard that issued", method: "GET", path: "/v1/nonces/" + strangerInIssuingShard,
			status: 404, code: "unknown_nonce"},
		{name: "get garbage", method: "GET", path: "/v1/nonces/garbage", status: 404, code: "unknown_nonce"},
		{name: "get outside the nonce alphabet", method: "GET", path: "/v1/nonces/" + url.PathEscape("x+y="), status: 404, code: "unknown_nonce"},

		// POST /v1/nonces
		{name: "issue", method: "POST", path: "/v1/nonces", body: `{"org_id":"org-1"}`, status: 201,
			check: func(t *testing.T, r apitest.Response) {
				var got oracleNonce
				r.JSON(t, &got)
				var fields map[string]any
				r.JSON(t, &fields)
				if !ident.Long(got.Nonce) || got.OrgID != "org-1" || got.IssuedAt == 0 ||
					got.ExpiresAt-got.IssuedAt != time.Hour.Milliseconds() || len(fields) != 4 {
					t.Fatalf("issued %s, want {nonce, org_id, issued_at, expires_at = issued_at + 1h}", r.Body)
				}
			}},
		{name: "issue without org_id", method: "POST", path: "/v1/nonces", body: `{}`, status: 400, code: "invalid_request"},
		{name: "issue with empty org_id", method: "POST", path: "/v1/nonces", body: `{"org_id":""}`, status: 400, code: "invalid_request"},
		{name: "issue with invalid org_id", method: "POST", path: "/v1/nonces", body: `{"org_id":"org 1"}`, status: 400, code: "invalid_id"},
		{name: "issue with too long org_id", method: "POST", path: "/v1/nonces",
			body: `{"org_id":"` + strings.Repeat("o", 65) + `"}`, status: 400, code: "invalid_id"},
		{name: "issue with unknown field", method: "POST", path: "/v1/nonces", body: `{"org_id":"org-1","ttl":5}`, status: 400, code: "invalid_request"},
		{name: "issue with malformed JSON", method: "POST", path: "/v1/nonces", body: `{"org_id":`, status: 400, code: "invalid_request"},
		{name: "issue with a body over 64 KiB", method: "POST", path: "/v1/nonces", body: big, status: 413, code: "body_too_large"},
	})
}

// TestOracleExpiryAPI has the rows of expired nonces, on a node whose nonces live 1 s: an
// expired nonce is refused (410) but kept, and a used one stays used (409 wins).
func TestOracleExpiryAPI(t *testing.T) {
	n := apitest.Start(t, func(c *config.Config) {
		oracle.Settings.Update(c, func(o *oracle.Config) { o.TTL = time.Second })
	})
	unused := oracleIssue(t, n, "org-1", nil)
	used := oracleIssue(t, n, "org-1", nil)
	use := oracleConsume(t, n, used.Nonce, "org-1", "rid-e")
	oracleAwaitWallClock(max(unused.ExpiresAt, used.ExpiresAt))

	oracleRun(t, n, []oracleRow{
		{name: "consume expired", method: "POST", path: oracleConsumePath(unused.Nonce),
			body: `{"org_id":"org-1"}`, status: 410, code: "nonce_expired"},
		{name: "consume expired, again", method: "POST", path: oracleConsumePath(unused.Nonce),
			body: `{"org_id":"org-1","request_id":"rid-x"}`, status: 410, code: "nonce_expired"},
		{name: "consume expired by another org", method: "POST", path: oracleConsumePath(unused.Nonce),
			body: `{"org_id":"org-2"}`, status: 403, code: "org_mismatch"},
		{name: "consume used and expired", method: "POST", path: oracleConsumePath(used.Nonce),
			body: `{"org_id":"org-1","request_id":"rid-other"}`, status: 409, code: "nonce_used"},
		{name: "consume used and expired without request_id", method: "POST", path: oracleConsumePath(used.Nonce),
			body: `{"org_id":"org-1"}`, status: 409, code: "nonce_used"},
		{name: "consume used and expired with the same request_id", method: "POST", path: oracleConsumePath(used.Nonce),
			body: `{"org_id":"org-1","request_id":"rid-e"}`, status: 200, check: oracleUsedAtIs(&use.UsedAt)},
		{name: "get expired, still kept", method: "GET", path: "/v1/nonces/" + unused.Nonce, status: 200,
			check: func(t *testing.T, r apitest.Response) {
				var got oracleInfo
				r.JSON(t, &got)
				if got.UsedAt != nil || got.ExpiresAt != unused.ExpiresAt || got.ExpiresAt-got.IssuedAt != time.Second.Milliseconds() {
					t.Fatalf("get answered %s for %+v", r.Body, unused)
				}
			}},
		{name: "get used and expired, still kept", method: "GET", path: "/v1/nonces/" + used.Nonce, status: 200,
			check: func(t *testing.T, r apitest.Response) {
				var got oracleInfo
				r.JSON(t, &got)
				if got.UsedAt == nil || *got.UsedAt != use.UsedAt {
					t.Fatalf("get answered %s, want used_at %d", r.Body, use.UsedAt)
				}
			}},
	})
}

// oracleRequest sends one request from any goroutine; it returns the status and body.
func oracleRequest(hc *http.Client, n *apitest.Node, method, path string, body any) (int, []byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequest(method, n.URL+path, bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, out, err
}

// 32 clients racing to consume one nonce: exactly one is accepted, every other is told
// nonce_used; repeated over several nonces.
func TestOracleConcurrentConsumeAcceptsOnce(t *testing.T) {
	n := apitest.Start(t, nil)
	const clients = 32
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	for round := range 5 {
		nonce := oracleIssue(t, n, "org-r", nil).Nonce
		var mu sync.Mutex
		outcomes := map[string]int{}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for c := range clients {
			wg.Go(func() {
				body := map[string]string{"org_id": "org-r"}
				if c%2 == 0 {
					body["request_id"] = fmt.Sprintf("client-%d", c)
				}
				<-start
				status, b, err := oracleRequest(hc, n, "POST", oracleConsumePath(nonce), body)
				var e struct {
					Error string `json:"error"`
				}
				_ = json.Unmarshal(b, &e)
				mu.Lock()
				defer mu.Unlock()
				outcomes[fmt.Sprintf("%d %s %v", status, e.Error, err)]++
			})
		}
		close(start)
		wg.Wait()
		want := map[string]int{"200  <nil>": 1, "409 nonce_used <nil>": clients - 1}
		if fmt.Sprint(outcomes) != fmt.Sprint(want) {
			t.Fatalf("round %d: outcomes %v, want %v", round, outcomes, want)
		}
	}
}

// One organisation issuing fast is spread over the shards (and so over every partition).
func TestOracleIssueSpreadsOverShards(t *testing.T) {
	n := apitest.Start(t, nil)
	const total, clients = 2000, 16
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	var mu sync.Mutex
	nonces := map[string]bool{}
	var failures []string
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for range total / clients {
				status, b, err := oracleRequest(hc, n, "POST", "/v1/nonces", map[string]string{"org_id": "busy-org"})
				var got oracleNonce
				_ = json.Unmarshal(b, &got)
				mu.Lock()
				if err != nil || status != http.StatusCreated {
					failures = append(failures, fmt.Sprintf("%d %s %v", status, b, err))
				} else {
					nonces[got.Nonce] = true
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d issues failed, first: %s", len(failures), failures[0])
	}
	if len(nonces) != total {
		t.Fatalf("%d distinct nonces from %d issues", len(nonces), total)
	}
	shards, partitions := map[string]bool{}, map[uint32]bool{}
	for nonce := range nonces {
		shards[nonce[:2]] = true
		partitions[actors.PartitionOf(oracle.KindName, nonce[:2], n.Config.Partitions)] = true
	}
	if len(shards) <= 100 || len(partitions) != n.Config.Partitions {
		t.Fatalf("%d issues for one org touched %d shards in %d of %d partitions, want > 100 shards in all",
			total, len(shards), len(partitions), n.Config.Partitions)
	}
	t.Logf("%d issues for one org touched %d shards", total, len(shards))
}
