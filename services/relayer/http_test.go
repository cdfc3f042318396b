package relayer_test

import (
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mr-tron/base58"
	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/near"
	"github.com/shardkeeper/shardkeeper/node/apitest"
	"github.com/shardkeeper/shardkeeper/services"
	"github.com/shardkeeper/shardkeeper/services/all"
	"github.com/shardkeeper/shardkeeper/services/relayer"
	"github.com/shardkeeper/shardkeeper/test/fakenear"
)

const (
	account = "relay.near"
	token   = "relayer-token-for-tests-0123456789abcdef"
)

// secret is a test key's secret in the keys file's syntax, and its public key.
func secret(label string) (string, near.PublicKey) {
	seed := sha256.Sum256([]byte("relayer http test " + label))
	sk := ed25519.NewKeyFromSeed(seed[:])
	var pk near.PublicKey
	copy(pk[:], sk.Public().(ed25519.PublicKey))
	return "ed25519:" + base58.Encode(sk), pk
}

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// startRelayer starts a node whose relayer has keys for account on the fake's endpoints.
func startRelayer(t *testing.T, fake *fakenear.Fake, labels ...string) *apitest.Node {
	t.Helper()
	var secrets []string
	for _, l := range labels {
		s, _ := secret(l)
		secrets = append(secrets, fmt.Sprintf("%q", s))
	}
	keys := writeFile(t, "keys.json", fmt.Sprintf(`{"accounts":[{"account_id":%q,"keys":[%s]}]}`, account, strings.Join(secrets, ",")))
	return startNode(t, fake, keys, nil)
}

// startNode starts a node whose relayer reads keys, takes the relayer token and sends to the
// fake's endpoints; mutate, if not nil, adjusts the options before they load.
func startNode(t *testing.T, fake *fakenear.Fake, keys string, mutate func(*relayer.Options)) *apitest.Node {
	t.Helper()
	tokenFile := writeFile(t, "token", token+"\n")
	return apitest.Start(t, func(c *config.Config) {
		relayer.Settings.Update(c, func(o *relayer.Options) {
			o.KeysFile, o.TokenFile = keys, tokenFile
			for _, ep := range fake.Endpoints() {
				o.RPC = append(o.RPC, ep.URL())
			}
			if mutate != nil {
				mutate(o)
			}
			if err := o.Load(); err != nil {
				t.Fatal(err)
			}
		})
	})
}

func startFake(t *testing.T, labels ...string) *fakenear.Fake {
	t.Helper()
	return startFakeWith(t, nil, labels...)
}

// startFakeWith starts the fake chain with endpoints (none: one default endpoint).
func startFakeWith(t *testing.T, endpoints []fakenear.EndpointConfig, labels ...string) *fakenear.Fake {
	t.Helper()
	rich, _ := near.ParseU128("1000000000000000000000000000")
	var keys []fakenear.AccountKey
	for _, l := range labels {
		_, pk := secret(l)
		keys = append(keys, fakenear.AccountKey{PublicKey: pk})
	}
	return fakenear.Start(t, fakenear.Config{BlockInterval: 20 * time.Millisecond, Accounts: []fakenear.Account{
		{ID: account, Balance: rich, Keys: keys},
		{ID: "bob.near", Balance: near.U128From64(0)},
	}}, endpoints...)
}

var bearer = []string{"Authorization", "Bearer " + token}

// The relayer's routes on a real node over the fake NEAR: tokens, a submitted intent that
// lands once and is read back with a long poll, repeats and conflicts, the key's status, and
// the contract's errors.
func TestRelayerRoutes(t *testing.T) {
	fake := startFake(t, "a", "b")
	n := startRelayer(t, fake, "a", "b")
	path := "/v1/relayers/" + account + "/intents"
	body := `{"idempotency_key":"pay:alice:1","receiver_id":"bob.near","actions":[{"Transfer":{"deposit":"5"}}]}`

	if r := n.Do(t, "POST", path, body); r.Status != http.StatusUnauthorized || r.ErrorCode() != "unauthorized" {
		t.Fatalf("no token: %d %s", r.Status, r.Body)
	}
	if r := n.Do(t, "POST", path, body, "Authorization", "Bearer wrong"); r.Status != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d %s", r.Status, r.Body)
	}
	r := n.Do(t, "POST", path, body, bearer...)
	if r.Status != http.StatusCreated {
		t.Fatalf("submit: %d %s", r.Status, r.Body)
	}
	var first relayer.Intent
	r.JSON(t, &first)
	// The same JSON, keys in another order and spaced: a repeat.
	again := `{ "actions": [ {"Transfer": {"deposit": "5"}} ], "receiver_id": "bob.near", "idempotency_key": "pay:alice:1" }`
	if r := n.Do(t, "POST", path, again, bearer...); r.Status != http.StatusOK {
		t.Fatalf("repeat: %d %s", r.Status, r.Body)
	}
	other := strings.Replace(body, `"5"`, `"6"`, 1)
	if r := n.Do(t, "POST", path, other, bearer...); r.Status != http.StatusConflict || r.ErrorCode() != "idempotency_conflict" {
		t.Fatalf("another body: %d %s", r.Status, r.Body)
	}

	r = n.Do(t, "GET", path+"/pay:alice:1?wait=20s", nil, bearer...)
	var done relayer.Intent
	r.JSON(t, &done)
	if r.Status != http.StatusOK || done.Status != relayer.StatusSucceeded || done.TxHash == nil || done.PublicKey != first.PublicKey || len(done.Outcome) == 0 {
		t.Fatalf("long poll: %d %s", r.Status, r.Body)
	}
	h, _ := near.ParseHash(*done.TxHash)
	landed := 0
	for _, l := range fake.Ledger() {
		if l.Kind == fakenear.Landed && l.Signer == account {
			landed++
			if l.Hash != h.String() {
				t.Fatalf("landed %s, the intent's is %s", l.Hash, h)
			}
		}
	}
	if landed != 1 {
		t.Fatalf("%d transactions landed, want 1", landed)
	}
	if b, _ := fake.Balance("bob.near"); b.String() != "5" {
		t.Fatalf("bob.near holds %s", b)
	}
	r = n.Do(t, "POST", path, again, bearer...)
	var repeat relayer.Intent
	r.JSON(t, &repeat)
	if r.Status != http.StatusOK || repeat.TxHash == nil || *repeat.TxHash != *done.TxHash || repeat.Status != relayer.StatusSucceeded {
		t.Fatalf("repeat after landing: %d %s", r.Status, r.Body)
	}

	var st relayer.RelayerStatus
	r = n.Do(t, "GET", "/v1/relayers/"+account, nil, bearer...)
	r.JSON(t, &st)
	if r.Status != http.StatusOK || st.AccountID != account || len(st.Keys) != 2 {
		t.Fatalf("status: %d %s", r.Status, r.Body)
	}
	for _, k := range st.Keys {
		if k.PublicKey == done.PublicKey && (k.NextNonce == nil || *k.NextNonce != *done.Nonce+1 || k.InFlight != 0) {
			t.Fatalf("status of the key used: %s", r.Body)
		}
	}

	for _, c := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"GET", path + "/pay:nobody", "", http.StatusNotFound, "unknown_intent"},
		{"GET", path + "/pay:alice:1?wait=soon", "", http.StatusBadRequest, "invalid_request"},
		{"GET", "/v1/relayers/other.near", "", http.StatusNotFound, "unknown_relayer"},
		{"POST", "/v1/relayers/other.near/intents", body, http.StatusNotFound, "unknown_relayer"},
		{"POST", path, `{"idempotency_key":"bad key","receiver_id":"bob.near","actions":["CreateAccount"]}`, http.StatusBadRequest, "invalid_id"},
		{"POST", path, `{"idempotency_key":"k","receiver_id":"bob.near","actions":[{"Stake":{"stake":"1","public_key":"x"}}]}`, http.StatusBadRequest, "unsupported_action"},
		{"POST", path, `{"idempotency_key":"k","receiver_id":"bob.near","actions":[]}`, http.StatusBadRequest, "invalid_request"},
		{"POST", path, `{"idempotency_key":"k","signed_delegate":"AAAA"}`, http.StatusBadRequest, "invalid_delegate"},
		{"POST", path, `{"idempotency_key":"k","receiver_id":"Bob!","actions":["CreateAccount"]}`, http.StatusBadRequest, "invalid_request"},
	} {
		var r apitest.Response
		if c.body == "" {
			r = n.Do(t, c.method, c.path, nil, bearer...)
		} else {
			r = n.Do(t, c.method, c.path, c.body, bearer...)
		}
		if r.Status != c.status || r.ErrorCode() != c.code {
			t.Errorf("%s %s %s: %d %s, want %d %s", c.method, c.path, c.body, r.Status, r.Body, c.status, c.code)
		}
	}
}

// Without a token configured the relayer's paths are disabled.
func TestRelayerDisabledWithoutToken(t *testing.T) {
	n := apitest.Start(t, nil)
	for _, p := range []string{"/v1/relayers/" + account, "/v1/relayers/" + account + "/intents/x"} {
		if r := n.Do(t, "GET", p, nil, bearer...); r.Status != http.StatusForbidden || r.ErrorCode() != "relayer_disabled" {
			t.Fatalf("GET %s: %d %s", p, r.Status, r.Body)
		}
	}
}

// The relayer's flags: a keys file other users can read is refused, keys need RPC URLs, one
// token source only; the secret never shows in the error.
func TestRelayerFlags(t *testing.T) {
	s, _ := secret("a")
	good := writeFile(t, "keys.json", fmt.Sprintf(`{"accounts":[{"account_id":%q,"keys":[%q]}]}`, account, s))
	open := filepath.Join(t.TempDir(), "open.json")
	if err := os.WriteFile(open, []byte(fmt.Sprintf(`{"accounts":[{"account_id":%q,"keys":[%q]}]}`, account, s)), 0o644); err != nil {
		t.Fatal(err)
	}
	load := func(args ...string) error {
		_, err := config.Load(append([]string{"--node-id", "n1"}, args...), func(string) (string, bool) { return "", false },
			nil, services.Settings(all.Services())...)
		return err
	}
	for _, c := range []struct {
		args []string
		want string // in the error; "" means success
	}{
		{[]string{"--relayer-keys", good, "--near-rpc", "http://127.0.0.1:3030"}, ""},
		{[]string{"--relayer-keys", open, "--near-rpc", "http://127.0.0.1:3030"}, "invalid --relayer-keys"},
		{[]string{"--relayer-keys", good}, "invalid --near-rpc"},
		{[]string{"--near-rpc", "ftp://x"}, "invalid --near-rpc"},
		{[]string{"--relayer-token", "x", "--relayer-token-file", good}, "invalid --relayer-token-file"},
		{[]string{"--relayer-retention", "0s"}, "invalid --relayer-retention"},
		{[]string{"--relayer-max-in-flight", "0"}, "invalid --relayer-max-in-flight"},
	} {
		err := load(c.args...)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: %v, want an error with %q", c.args, err, c.want)
		case err != nil && strings.Contains(err.Error(), s[8:20]):
			t.Errorf("%v: the error shows the secret: %v", c.args, err)
		}
	}
}

// A NEAR endpoint that lies — it answers every status question and every send as a node that
// never saw the transaction, so a landed one reads as refused for its nonce — cannot make an
// intent land twice when a second, honest endpoint is configured: a transaction is signed
// again only when two endpoints say it is dead, each on its own check, and the honest one
// shows it landed.
func TestLyingEndpointCannotDoubleLand(t *testing.T) {
	fake := startFakeWith(t, []fakenear.EndpointConfig{
		{Name: "liar", Faults: fakenear.Faults{Rules: []fakenear.FaultRule{{Kind: fakenear.FaultLie, Rate: 1, Methods: []string{"tx", "EXPERIMENTAL_tx_status", "send_tx"}}}}},
		{Name: "honest"},
	}, "a")
	n := startRelayer(t, fake, "a")
	const intents = 8
	for i := range intents {
		body := fmt.Sprintf(`{"idempotency_key":"lie:%d","receiver_id":"bob.near","actions":[{"Transfer":{"deposit":"1"}}]}`, i)
		if r := n.Do(t, "POST", "/v1/relayers/"+account+"/intents", body, bearer...); r.Status != http.StatusCreated {
			t.Fatalf("submit %d: %d %s", i, r.Status, r.Body)
		}
	}
	for i := range intents {
		var in relayer.Intent
		r := n.Do(t, "GET", fmt.Sprintf("/v1/relayers/%s/intents/lie:%d?wait=25s", account, i), nil, bearer...)
		r.JSON(t, &in)
		if in.Status != relayer.StatusSucceeded || in.Attempts != 1 {
			t.Fatalf("intent %d: %s", i, r.Body)
		}
	}
	landed := 0
	for _, l := range fake.Ledger() {
		if l.Kind == fakenear.Landed && l.Signer == account {
			landed++
		}
	}
	if b, _ := fake.Balance("bob.near"); landed != intents || b.String() != fmt.Sprint(intents) {
		t.Fatalf("%d transactions landed and bob.near holds %s, want %d each", landed, b, intents)
	}
	m := n.Do(t, "GET", "/metrics", nil)
	if !strings.Contains(string(m.Body), `shardkeeper_relayer_death_checks_total{verdict="refuted"}`) {
		t.Fatal("no death check was refuted: the liar was never asked, and the test proves nothing")
	}
}
