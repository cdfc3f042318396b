package relayer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// captureLogs sends the default logger's lines to a buffer for the test, as JSON.
func captureLogs(t *testing.T) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewJSONHandler(&buf, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	return &buf
}

// At start, each account of the keys file whose policy restricts nothing is warned about
// once, by name, without a key or token; accounts with a rule are not (an empty list is one:
// it allows nothing), and a keys file whose accounts all have one starts quietly.
func TestUnrestrictedAccountsWarnedAtStart(t *testing.T) {
	logs := captureLogs(t)
	body := fmt.Sprintf(`{"accounts":[
		{"account_id":"open.near","keys":[%q]},
		{"account_id":"empty.near","keys":[%q],"policy":{}},
		{"account_id":"payer.near","keys":[%q],"policy":{"receivers":["*.shop.near"],"actions":["Transfer"]}},
		{"account_id":"capped.near","keys":[%q],"policy":{"max_deposit":"1000"}},
		{"account_id":"closed.near","keys":[%q],"policy":{"receivers":[]}}]}`,
		secretKey("open"), secretKey("empty"), secretKey("payer"), secretKey("capped"), secretKey("closed"))
	path := writeKeys(t, 0o600, body)
	keys, err := LoadKeys(path)
	if err != nil {
		t.Fatal(err)
	}
	a := newAccess(path, keys)
	var warned []string
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var line struct{ Level, Msg, Account, Path string }
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if line.Level != "WARN" || !strings.Contains(line.Msg, "no policy") || line.Path != path {
			t.Errorf("unexpected log line %s", l)
		}
		warned = append(warned, line.Account)
	}
	if want := []string{"empty.near", "open.near"}; strings.Join(warned, " ") != strings.Join(want, " ") {
		t.Errorf("warned about %v, want %v", warned, want)
	}
	for _, name := range []string{"open", "empty", "payer", "capped", "closed"} {
		secret := strings.TrimPrefix(secretKey(name), "ed25519:")
		if strings.Contains(logs.String(), secret[:16]) {
			t.Errorf("the warnings show %s's secret key", name)
		}
	}

	// Later looks at the rules (the file unchanged) say nothing more.
	logs.Reset()
	a.next = a.now() // due for a look
	if a.rules() == nil || logs.Len() != 0 {
		t.Errorf("rules() logged %s", logs)
	}

	// Every account restricted: nothing said; nor by a server of keys not from a file.
	logs.Reset()
	quiet := writeKeys(t, 0o600, fmt.Sprintf(`{"accounts":[{"account_id":"payer.near","keys":[%q],"policy":{"receivers":["shop.near"]}}]}`, secretKey("q")))
	if keys, err = LoadKeys(quiet); err != nil {
		t.Fatal(err)
	}
	newAccess(quiet, keys)
	newAccess("", keys)
	if logs.Len() != 0 {
		t.Errorf("a keys file whose accounts all have a policy logged %s", logs)
	}
}
