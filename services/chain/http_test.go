package chain_test

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/arweave"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/node/apitest"
	"github.com/shardkeeper/shardkeeper/services/chain"
	"github.com/shardkeeper/shardkeeper/test/await"
	"github.com/shardkeeper/shardkeeper/test/fakearweave"
)

const token = "chain-token-long-enough-for-the-test-0123"

func startChainNode(t *testing.T, gateway bool) *apitest.Node {
	t.Helper()
	return startChainNodeWith(t, gateway, nil)
}

// startChainNodeWith is startChainNode with the core settings changed by mutate.
func startChainNodeWith(t *testing.T, gateway bool, mutate func(*config.Config)) *apitest.Node {
	t.Helper()
	f := fakearweave.New(fakearweave.Config{BlockInterval: 20 * time.Millisecond})
	srv := httptest.NewServer(f)
	t.Cleanup(func() { srv.Close(); f.Close() })
	wallet := filepath.Join(t.TempDir(), "wallet.json")
	if err := os.WriteFile(wallet, arweave.TestWalletJWK(t), 0o600); err != nil {
		t.Fatal(err)
	}
	return apitest.Start(t, func(c *config.Config) {
		if mutate != nil {
			mutate(c)
		}
		chain.Settings.Update(c, func(o *chain.Options) {
			o.Token = token
			if gateway {
				o.Gateway, o.WalletFile = srv.URL, wallet
			}
			if err := o.Load(); err != nil {
				t.Fatal(err)
			}
		})
	})
}

// Every row of the contract's chain table, and its error codes.
func TestChainAPI(t *testing.T) {
	n := startChainNode(t, true)
	auth := []string{"Authorization", "Bearer " + token}
	ev := `{"entity_id":"org:acme.dev-1","ver":1,"op":"create","vis":"public","manifest":{"b":2,"a":1}}`
	for _, tc := range []struct {
		name, method, path, body string
		header                   []string
		status                   int
		code                     string
	}{
		{"head of a chain never written", "GET", "/v1/chains/main/head", "", nil, 200, ""},
		{"no token", "POST", "/v1/chains/main/events", ev, nil, 401, "unauthorized"},
		{"accepted", "POST", "/v1/chains/main/events", ev, auth, 201, ""},
		{"identical repeat", "POST", "/v1/chains/main/events", ev, auth, 200, ""},
		{"the same version, other content", "POST", "/v1/chains/main/events", strings.Replace(ev, "create", "update", 1), auth, 409, "event_conflict"},
		{"a cid that is not the manifest's", "POST", "/v1/chains/main/events", strings.Replace(ev, `"manifest"`, `"cid":"bafkreicecnx2gvntm6fbcrvnc336qze6st5u7qq7457igegamd3bzkx7ri","manifest"`, 1), auth, 400, "cid_mismatch"},
		{"a bad entity id", "POST", "/v1/chains/main/events", strings.Replace(ev, "org:acme.dev-1", "a b", 1), auth, 400, "invalid_id"},
		{"no manifest", "POST", "/v1/chains/main/events", `{"entity_id":"e","ver":1,"op":"create","vis":"public"}`, auth, 400, "invalid_request"},
		{"a second version", "POST", "/v1/chains/main/events", strings.Replace(ev, `"ver":1`, `"ver":2`, 1), auth, 201, ""},
		{"unknown event", "GET", "/v1/chains/main/events/99", "", nil, 404, "unknown_event"},
		{"unknown entity", "GET", "/v1/chains/main/entities/nobody", "", nil, 404, "unknown_entity"},
		{"unknown version", "GET", "/v1/chains/main/entities/org:acme.dev-1/versions/7", "", nil, 404, "unknown_version"},
		{"bad chain name", "GET", "/v1/chains/a%20b/head", "", nil, 400, "invalid_id"},
	} {
		var body any
		if tc.body != "" {
			body = tc.body
		}
		r := n.Do(t, tc.method, tc.path, body, tc.header...)
		if r.Status != tc.status || r.ErrorCode() != tc.code {
			t.Errorf("%s: %d %s, want %d %q", tc.name, r.Status, r.Body, tc.status, tc.code)
		}
	}
	var head chain.Head
	await.True(t, 30*time.Second, "both events confirmed", func() bool {
		n.Do(t, "GET", "/v1/chains/main/head", nil).JSON(t, &head)
		return head.ConfirmedSeq == 2
	})
	var e struct {
		Seq    int64   `json:"seq"`
		TxID   string  `json:"tx_id"`
		PrevTx *string `json:"prev_tx"`
		Status string  `json:"status"`
	}
	n.Do(t, "GET", "/v1/chains/main/events/2", nil).JSON(t, &e)
	var first struct {
		TxID string `json:"tx_id"`
	}
	n.Do(t, "GET", "/v1/chains/main/events/1", nil).JSON(t, &first)
	if e.Seq != 2 || e.Status != "confirmed" || e.PrevTx == nil || *e.PrevTx != first.TxID || *head.TxID != e.TxID {
		t.Fatalf("event 2 %+v, event 1 %+v, head %+v", e, first, head)
	}
	var latest map[string]any
	n.Do(t, "GET", "/v1/chains/main/entities/org:acme.dev-1", nil).JSON(t, &latest)
	if latest["ver"] != float64(2) || latest["tx_id"] != e.TxID {
		t.Fatalf("latest %v", latest)
	}
	// The log: proofs over the confirmed events; no checkpoint without a log key.
	var p chain.Proof
	if r := n.Do(t, "GET", "/v1/chains/main/proof/inclusion?seq=1&size=2", nil); r.Status != 200 {
		t.Fatalf("inclusion proof: %d %s", r.Status, r.Body)
	} else if r.JSON(t, &p); len(p.Hashes) != 1 {
		t.Fatalf("inclusion proof of 1 in 2: %s", r.Body)
	}
	for path, code := range map[string]string{
		"/v1/chains/main/proof/inclusion?seq=3&size=3":  "invalid_request",
		"/v1/chains/main/proof/inclusion?seq=x":         "invalid_id",
		"/v1/chains/main/proof/consistency?from=2&to=1": "invalid_request",
		"/v1/chains/main/checkpoint":                    "chain_log_disabled",
	} {
		if r := n.Do(t, "GET", path, nil); r.ErrorCode() != code {
			t.Errorf("%s: %d %s, want %s", path, r.Status, r.Body, code)
		}
	}
	var v map[string]any
	n.Do(t, "GET", "/v1/chains/main/entities/org:acme.dev-1/versions/1", nil).JSON(t, &v)
	if v["status"] != "confirmed" || v["seq"] != float64(1) {
		t.Fatalf("version 1 %v", v)
	}
}

func TestChainDisabled(t *testing.T) {
	n := startChainNode(t, false)
	r := n.Do(t, "POST", "/v1/chains/main/events", `{"entity_id":"e","ver":1,"op":"a","vis":"b","manifest":{}}`, "Authorization", "Bearer "+token)
	if r.Status != 403 || r.ErrorCode() != "chain_disabled" {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
}

// Chain names count against --max-registries: past it the first write to a new chain answers
// 503 registry_full, and nothing of it is stored; the chains that exist go on taking writes,
// and reads of a chain never written are answered as before.
func TestChainNamesBounded(t *testing.T) {
	n := startChainNodeWith(t, true, func(c *config.Config) { c.MaxRegistries = 2 })
	auth := []string{"Authorization", "Bearer " + token}
	ev := func(ver int) string {
		return `{"entity_id":"e","ver":` + strconv.Itoa(ver) + `,"op":"create","vis":"public","manifest":{}}`
	}
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"a read of a chain never written", "GET", "/v1/chains/never/head", "", 200, ""},
		{"the first chain", "POST", "/v1/chains/c1/events", ev(1), 201, ""},
		{"the second chain", "POST", "/v1/chains/c2/events", ev(1), 201, ""},
		{"a malformed write to a new chain is judged first", "POST", "/v1/chains/c3/events", strings.Replace(ev(1), `"e"`, `"a b"`, 1), 400, "invalid_id"},
		{"a third chain", "POST", "/v1/chains/c3/events", ev(1), 503, "registry_full"},
		{"the third chain again", "POST", "/v1/chains/c3/events", ev(2), 503, "registry_full"},
		{"the first chain, a new event", "POST", "/v1/chains/c1/events", ev(2), 201, ""},
		{"the second chain, a repeat", "POST", "/v1/chains/c2/events", ev(1), 200, ""},
		{"a read of the chain refused", "GET", "/v1/chains/c3/head", "", 200, ""},
		{"a read of another chain never written", "GET", "/v1/chains/other/events/1", "", 404, "unknown_event"},
	} {
		var body any
		var header []string
		if tc.method == "POST" {
			body, header = tc.body, auth
		}
		r := n.Do(t, tc.method, tc.path, body, header...)
		if r.Status != tc.status || r.ErrorCode() != tc.code {
			t.Errorf("%s: %d %s, want %d %q", tc.name, r.Status, r.Body, tc.status, tc.code)
		}
	}
	var h chain.Head
	n.Do(t, "GET", "/v1/chains/c3/head", nil).JSON(t, &h)
	if h.Seq != 0 || h.Queued != 0 || h.UpdatedAt != 0 {
		t.Fatalf("the chain refused holds %+v", h)
	}
	await.True(t, 30*time.Second, "the chains that exist anchor their events", func() bool {
		var h1, h2 chain.Head
		n.Do(t, "GET", "/v1/chains/c1/head", nil).JSON(t, &h1)
		n.Do(t, "GET", "/v1/chains/c2/head", nil).JSON(t, &h2)
		return h1.ConfirmedSeq == 2 && h2.ConfirmedSeq == 1
	})
}

// --chain-max-reward: 0.01 AR by default; a value that is not a positive number of winston
// stops the process naming the flag.
func TestChainMaxRewardFlag(t *testing.T) {
	load := func(args ...string) (chain.Options, error) {
		c, err := config.Load(append([]string{"--node-id", "n1"}, args...), func(string) (string, bool) { return "", false }, nil, chain.Settings)
		return chain.Settings.Get(c), err
	}
	if o, err := load(); err != nil || o.MaxReward != 10_000_000_000 {
		t.Fatalf("default: %d %v", o.MaxReward, err)
	}
	if o, err := load("--chain-max-reward", "18446744073709551615"); err != nil || o.MaxReward != 1<<64-1 {
		t.Fatalf("the largest: %d %v", o.MaxReward, err)
	}
	for _, v := range []string{"-1", "x", "1.5", "0", "18446744073709551616"} {
		if _, err := load("--chain-max-reward", v); err == nil || !strings.Contains(err.Error(), "--chain-max-reward") {
			t.Errorf("--chain-max-reward %s: %v, want an error naming the flag", v, err)
		}
	}
}
