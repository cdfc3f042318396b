package chain_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/shardkeeper/shardkeeper/arweave"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/node/apitest"
	"github.com/shardkeeper/shardkeeper/services/chain"
)

// --chain-max-queued bounds the events a chain holds accepted and not yet signed: with its
// gateway down (so nothing is signed), past the bound a new event answers 429 queue_full with
// Retry-After and is not stored, an identical repeat of an accepted one is still 200 (and a
// conflicting one 409), and other chains take events.
func TestChainMaxQueued(t *testing.T) {
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down for the test", http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)
	wallet := filepath.Join(t.TempDir(), "wallet.json")
	if err := os.WriteFile(wallet, arweave.TestWalletJWK(t), 0o600); err != nil {
		t.Fatal(err)
	}
	n := apitest.Start(t, func(c *config.Config) {
		chain.Settings.Update(c, func(o *chain.Options) {
			o.Token, o.Gateway, o.WalletFile, o.MaxQueued = token, down.URL, wallet, 2
			if err := o.Load(); err != nil {
				t.Fatal(err)
			}
		})
	})
	auth := []string{"Authorization", "Bearer " + token}
	ev := func(ver int, op string) string {
		return `{"entity_id":"doc","ver":` + strconv.Itoa(ver) + `,"op":"` + op + `","vis":"public","manifest":{"v":` + strconv.Itoa(ver) + `}}`
	}
	for _, tc := range []struct {
		name, chain, body string
		status            int
		code              string
	}{
		{"the first event", "main", ev(1, "create"), 201, ""},
		{"the second", "main", ev(2, "update"), 201, ""},
		{"a third, past the bound", "main", ev(3, "update"), 429, "queue_full"},
		{"the third again", "main", ev(3, "update"), 429, "queue_full"},
		{"an identical repeat of the first", "main", ev(1, "create"), 200, ""},
		{"the second, other content", "main", ev(2, "delete"), 409, "event_conflict"},
		{"another chain", "other", ev(1, "create"), 201, ""},
	} {
		r := n.Do(t, "POST", "/v1/chains/"+tc.chain+"/events", tc.body, auth...)
		if r.Status != tc.status || r.ErrorCode() != tc.code {
			t.Fatalf("%s: %d %s, want %d %q", tc.name, r.Status, r.Body, tc.status, tc.code)
		}
		if tc.code == "queue_full" {
			// The chain's next attempt to sign: --chain-poll-interval (5s) at least, a minute
			// at most.
			if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 5 || s > 60 {
				t.Fatalf("%s: Retry-After %q, want 5 to 60 seconds", tc.name, r.Header.Get("Retry-After"))
			}
		}
	}
	var h chain.Head
	n.Do(t, "GET", "/v1/chains/main/head", nil).JSON(t, &h)
	if h.Queued != 2 || h.Seq != 0 {
		t.Fatalf("head %+v, want 2 queued, none signed", h)
	}
	if r := n.Do(t, "GET", "/v1/chains/main/entities/doc/versions/3", nil); r.ErrorCode() != "unknown_version" {
		t.Fatalf("the refused event was stored: %d %s", r.Status, r.Body)
	}
	if r := n.Do(t, "GET", "/v1/chains/main/entities/doc/versions/1", nil); r.Status != 200 || !strings.Contains(string(r.Body), `"status":"queued"`) {
		t.Fatalf("version 1: %d %s", r.Status, r.Body)
	}
}

// --chain-max-queued is at least 1, 10000 by default.
func TestChainMaxQueuedFlag(t *testing.T) {
	load := func(args ...string) (chain.Options, error) {
		c, err := config.Load(append([]string{"--node-id", "n1"}, args...), func(string) (string, bool) { return "", false }, nil, chain.Settings)
		return chain.Settings.Get(c), err
	}
	if o, err := load(); err != nil || o.MaxQueued != chain.DefaultMaxQueued || chain.DefaultMaxQueued != 10000 {
		t.Fatalf("default: %d %v", o.MaxQueued, err)
	}
	for _, v := range []string{"0", "-1", "x"} {
		if _, err := load("--chain-max-queued", v); err == nil || !strings.Contains(err.Error(), "--chain-max-queued") {
			t.Errorf("--chain-max-queued %s: %v, want an error naming the flag", v, err)
		}
	}
}
