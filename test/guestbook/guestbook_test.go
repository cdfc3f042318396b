package guestbook_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/node/nodetest"
	"github.com/shardkeeper/shardkeeper/services"
	"github.com/shardkeeper/shardkeeper/services/all"
	"github.com/shardkeeper/shardkeeper/test/guestbook"
)

// A sixth service, listed with one line, is served whole: its setting parses like any other,
// its routes answer through its actor, its error code has its status, its metric is on
// /metrics and its figure on the dashboard.
func TestASixthServiceTakesOneLine(t *testing.T) {
	ss := append(all.Services(), guestbook.Service()) // the one line

	loaded, err := config.Load([]string{"--guestbook-max-entries", "2"}, func(string) (string, bool) { return "", false }, io.Discard, services.Settings(ss)...)
	if err != nil {
		t.Fatal(err)
	}
	if got := guestbook.Settings.Get(loaded).MaxEntries; got != 2 {
		t.Fatalf("--guestbook-max-entries 2 loaded as %d", got)
	}
	if _, err := config.Load([]string{"--guestbook-max-entries", "0"}, func(string) (string, bool) { return "", false }, io.Discard, services.Settings(ss)...); err == nil ||
		!strings.Contains(err.Error(), "guestbook-max-entries") {
		t.Fatalf("--guestbook-max-entries 0: %v, want a refusal naming the flag", err)
	}

	n := nodetest.StartWith(t, ss, func(c *config.Config) {
		guestbook.Settings.Update(c, func(g *guestbook.Config) { *g = guestbook.Settings.Get(loaded) })
	})
	base := "http://" + n.HTTPAddr()
	do := func(method, path, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	for i, name := range []string{"ada", "grace"} {
		if code, body := do("POST", "/v1/guestbooks/hall/entries", `{"name":"`+name+`"}`); code != http.StatusOK || !strings.Contains(body, `"entries":`+string(rune('1'+i))) {
			t.Fatalf("signature %d: %d %s", i+1, code, body)
		}
	}
	code, body := do("POST", "/v1/guestbooks/hall/entries", `{"name":"linus"}`)
	var e struct{ Error, Message string }
	if err := json.Unmarshal([]byte(body), &e); err != nil || code != http.StatusConflict || e.Error != "guestbook_full" {
		t.Fatalf("a third signature with room for 2: %d %s, want 409 guestbook_full", code, body)
	}
	if code, body := do("GET", "/v1/guestbooks/hall", ""); code != http.StatusOK || !strings.Contains(body, `["ada","grace"]`) {
		t.Fatalf("read: %d %s", code, body)
	}
	if code, body := do("GET", "/metrics", ""); code != http.StatusOK || !strings.Contains(body, "shardkeeper_guestbook_signatures_total 2") {
		t.Fatalf("/metrics has no shardkeeper_guestbook_signatures_total 2 (%d)", code)
	}
	if code, body := do("GET", "/ui", ""); code != http.StatusOK || !strings.Contains(body, "<th>guestbook signatures</th><td>2</td>") {
		t.Fatalf("the dashboard shows no guestbook figure of 2 (%d)", code)
	}
	// The binary's services answer beside it, unchanged.
	if code, body := do("POST", "/v1/nonces", `{"org_id":"acme"}`); code != http.StatusCreated {
		t.Fatalf("a nonce beside the guestbook: %d %s", code, body)
	}
}
