package relayer_test

import (
	"encoding/base64"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/near"
	"github.com/shardkeeper/shardkeeper/node/apitest"
	"github.com/shardkeeper/shardkeeper/services/relayer"
	"github.com/shardkeeper/shardkeeper/test/fakenear"
)

const (
	openAccount  = "open.near" // no policy: the default one
	ownAccount   = "own.near"  // a policy with a token file of its own
	accountToken = "own-account-token-for-tests-0123456789abcdef"
)

// policyKeys is a keys file of three accounts: account with policy, openAccount with none, and
// ownAccount with only its own token file (tokenFile, relative to the keys file).
func policyKeys(policy, tokenFile string) string {
	a, _ := secret("policy a")
	o, _ := secret("policy open")
	w, _ := secret("policy own")
	return fmt.Sprintf(`{"accounts":[
		{"account_id":%q,"keys":[%q],"policy":%s},
		{"account_id":%q,"keys":[%q]},
		{"account_id":%q,"keys":[%q],"policy":{"token_file":%q}}]}`,
		account, a, policy, openAccount, o, ownAccount, w, tokenFile)
}

// startPolicyRelayer starts a node on the fake with policyKeys in dir, and the relayer token.
func startPolicyRelayer(t *testing.T, fake *fakenear.Fake, dir, policy string) *apitest.Node {
	t.Helper()
	return startPolicyRelayerWith(t, fake, dir, policy, nil)
}

// startPolicyRelayerWith is startPolicyRelayer with the relayer's options adjusted by mutate.
func startPolicyRelayerWith(t *testing.T, fake *fakenear.Fake, dir, policy string, mutate func(*relayer.Options)) *apitest.Node {
	t.Helper()
	keys := filepath.Join(dir, "keys.json")
	if err := os.WriteFile(keys, []byte(policyKeys(policy, "own.token")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "own.token"), []byte(accountToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return startNode(t, fake, keys, mutate)
}

func startPolicyFake(t *testing.T) *fakenear.Fake {
	t.Helper()
	rich, _ := near.ParseU128("1000000000000000000000000000")
	acct := func(id, label string) fakenear.Account {
		_, pk := secret(label)
		return fakenear.Account{ID: id, Balance: rich, Keys: []fakenear.AccountKey{{PublicKey: pk}}}
	}
	return fakenear.Start(t, fakenear.Config{BlockInterval: 20 * time.Millisecond, Accounts: []fakenear.Account{
		acct(account, "policy a"), acct(openAccount, "policy open"), acct(ownAccount, "policy own"),
		{ID: "app.near", Balance: rich}, {ID: "a.users.near", Balance: rich}, {ID: "users.near", Balance: rich},
	}})
}

const testPolicy = `{"receivers":["app.near","*.users.near"],"actions":["CreateAccount","Transfer","FunctionCall","AddKey","Delegate"],
	"methods":["register"],"max_deposit":"100","deposit_budget":{"amount":"150","window":"1h"}}`

// delegateBody is a signed_delegate intent of alice.near to receiver with actions.
func delegateBody(t *testing.T, receiver string, actions ...near.Action) string {
	t.Helper()
	alice := near.NewKeyPairFromSeed(make([]byte, 32))
	sda, _, err := near.SignDelegateAction(near.DelegateAction{SenderID: "alice.near", ReceiverID: receiver,
		Actions: actions, Nonce: 1, MaxBlockHeight: 1 << 40, PublicKey: alice.PublicKey()}, alice)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := sda.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`{"signed_delegate":%q}`, base64.StdEncoding.EncodeToString(raw))
}

// Every rule of a policy, and the own-account rule no policy lifts, through HTTP: a refusal
// names its rule and value, writes nothing (no record, no budget charged), and is counted.
func TestPolicyRules(t *testing.T) {
	fake := startPolicyFake(t)
	n := startPolicyRelayer(t, fake, t.TempDir(), testPolicy)
	fc := func(method, deposit string) string {
		return fmt.Sprintf(`{"FunctionCall":{"method_name":%q,"args":"e30=","gas":30000000000000,"deposit":%q}}`, method, deposit)
	}
	transfer := func(d string) string { return fmt.Sprintf(`{"Transfer":{"deposit":%q}}`, d) }
	intent := func(idem, receiver string, actions ...string) string {
		return fmt.Sprintf(`{"idempotency_key":%q,"receiver_id":%q,"actions":[%s]}`, idem, receiver, strings.Join(actions, ","))
	}
	fullAccess := `{"AddKey":{"public_key":"ed25519:6E8sCci9badyRkXb3JoRpBj5p8C6Tw41ELDZoiihKEtp","access_key":{"nonce":0,"permission":"FullAccess"}}}`
	deleteKey := `{"DeleteKey":{"public_key":"ed25519:6E8sCci9badyRkXb3JoRpBj5p8C6Tw41ELDZoiihKEtp"}}`
	call := func(inner near.Action) near.Action { return inner }
	register := near.FunctionCall{MethodName: "register", Args: []byte("{}"), Gas: 1, Deposit: near.U128From64(1000)}

	for _, c := range []struct {
		name, account, body string
		status              int
		code, says          string // the error code, and what its message names
	}{
		{"an allowed receiver", account, intent("ok-app", "app.near", transfer("1")), 201, "", ""},
		{"a sub-account of a wildcard", account, intent("ok-sub", "a.users.near", fc("register", "2")), 201, "", ""},
		{"a receiver not listed", account, intent("r1", "evil.near", transfer("1")), 403, "policy_denied", `receivers does not allow receiver_id \"evil.near\"`},
		{"the wildcard's own account", account, intent("r2", "users.near", transfer("1")), 403, "policy_denied", `receiver_id \"users.near\"`},
		{"an action kind not listed", account, intent("r3", "app.near", deleteKey), 403, "policy_denied", "actions does not allow DeleteKey"},
		{"a method not listed", account, intent("r4", "app.near", fc("withdraw", "0")), 403, "policy_denied", `methods does not allow \"withdraw\"`},
		{"one deposit above max_deposit", account, intent("r5", "app.near", fc("register", "101")), 403, "policy_denied", "max_deposit is 100 yocto, the intent attaches 101"},
		{"deposits summed above max_deposit", account, intent("r6", "app.near", transfer("60"), fc("register", "50")), 403, "policy_denied", "attaches 110"},
		{"own keys, though AddKey is allowed", account, intent("r7", account, fullAccess), 403, "policy_denied", "AddKey on the relayer account relay.near itself"},
		{"own keys under the default policy", openAccount, intent("r8", openAccount, fullAccess), 403, "policy_denied", "AddKey on the relayer account"},
		{"own key deletion under the default policy", openAccount, intent("r9", openAccount, deleteKey), 403, "policy_denied", "DeleteKey on the relayer account"},
		{"a transfer to itself is no key change", openAccount, intent("ok-self", openAccount, transfer("1")), 201, "", ""},
		{"keys of another account under the default policy", openAccount, intent("ok-addkey", "app.near", fullAccess), 201, "", ""},
		{"a delegate: inner deposits are not the relayer's", account, delegateBody(t, "app.near", call(register)), 201, "", ""},
		{"a delegate to a receiver not listed", account, delegateBody(t, "evil.near", call(register)), 403, "policy_denied", `receiver_id \"evil.near\"`},
		{"a delegate calling a method not listed", account, delegateBody(t, "app.near", near.FunctionCall{MethodName: "drain", Gas: 1}), 403, "policy_denied", `\"drain\"`},
		{"a delegate deleting keys of the relayer", openAccount, delegateBody(t, openAccount, near.DeleteKey{PublicKey: near.NewKeyPairFromSeed(make([]byte, 32)).PublicKey()}), 403, "policy_denied", "DeleteKey on the relayer account"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := "/v1/relayers/" + c.account + "/intents"
			for try := range 2 { // a refused intent is judged again, identically
				r := n.Do(t, "POST", path, c.body, bearer...)
				if c.code == "" {
					if r.Status != c.status {
						t.Fatalf("%d %s, want %d", r.Status, r.Body, c.status)
					}
					break
				}
				if r.Status != c.status || r.ErrorCode() != c.code || !strings.Contains(string(r.Body), c.says) {
					t.Fatalf("try %d: %d %s, want %d %s naming %q", try, r.Status, r.Body, c.status, c.code, c.says)
				}
			}
		})
	}
	// Refusals wrote no record, and charged nothing: the budget holds the accepted deposits.
	var st relayer.RelayerStatus
	n.Do(t, "GET", "/v1/relayers/"+account, nil, bearer...).JSON(t, &st)
	if st.BudgetUsed == nil || *st.BudgetUsed != "3" {
		t.Errorf("budget_used %v after accepting deposits of 1 and 2, want 3", st.BudgetUsed)
	}
	for _, idem := range []string{"r1", "r3", "r5", "r7"} {
		if r := n.Do(t, "GET", "/v1/relayers/"+account+"/intents/"+idem, nil, bearer...); r.Status != http.StatusNotFound || r.ErrorCode() != "unknown_intent" {
			t.Errorf("refused %s: %d %s", idem, r.Status, r.Body)
		}
	}
	m := n.Do(t, "GET", "/metrics", nil)
	for rule, want := range map[string]int{"receivers": 6, "actions": 2, "methods": 4, "max_deposit": 4, "own_account": 2} {
		line := fmt.Sprintf(`shardkeeper_relayer_policy_refusals_total{account="relay.near",rule=%q} %d`, rule, want)
		if !strings.Contains(string(m.Body), line) {
			t.Errorf("metrics lack %s", line)
		}
	}
}

// The deposit budget: intents accepted in the window attach at most its amount together; one
// that would exceed it is 429 budget_exceeded with Retry-After and writes nothing; a repeat of
// an accepted intent is not charged twice; an intent alone above the budget is denied.
func TestPolicyBudget(t *testing.T) {
	fake := startPolicyFake(t)
	n := startPolicyRelayer(t, fake, t.TempDir(), `{"deposit_budget":{"amount":"150","window":"1h"}}`)
	path := "/v1/relayers/" + account + "/intents"
	pay := func(idem, d string) apitest.Response {
		return n.Do(t, "POST", path, fmt.Sprintf(`{"idempotency_key":%q,"receiver_id":"app.near","actions":[{"Transfer":{"deposit":%q}}]}`, idem, d), bearer...)
	}
	used := func() string {
		var st relayer.RelayerStatus
		r := n.Do(t, "GET", "/v1/relayers/"+account, nil, bearer...)
		r.JSON(t, &st)
		if st.BudgetUsed == nil || st.Policy.DepositBudget == nil || st.Policy.DepositBudget.Window != "1h0m0s" {
			t.Fatalf("status: %s", r.Body)
		}
		return *st.BudgetUsed
	}
	if r := pay("b1", "100"); r.Status != http.StatusCreated {
		t.Fatalf("first: %d %s", r.Status, r.Body)
	}
	if r := pay("b1", "100"); r.Status != http.StatusOK {
		t.Fatalf("repeat: %d %s", r.Status, r.Body)
	}
	if r := pay("free", "0"); r.Status != http.StatusCreated {
		t.Fatalf("no deposit: %d %s", r.Status, r.Body)
	}
	if u := used(); u != "100" {
		t.Fatalf("budget_used %s after one intent of 100 and its repeat, want 100", u)
	}
	r := pay("b2", "51")
	if r.Status != http.StatusTooManyRequests || r.ErrorCode() != "budget_exceeded" {
		t.Fatalf("over the budget: %d %s", r.Status, r.Body)
	}
	if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 3500 || s > 3600 {
		t.Fatalf("Retry-After %q, want about an hour (when the first charge ages out)", r.Header.Get("Retry-After"))
	}
	if r := n.Do(t, "GET", path+"/b2", nil, bearer...); r.Status != http.StatusNotFound {
		t.Fatalf("refused intent: %d %s", r.Status, r.Body)
	}
	if r := pay("b3", "50"); r.Status != http.StatusCreated {
		t.Fatalf("up to the budget: %d %s", r.Status, r.Body)
	}
	if u := used(); u != "150" {
		t.Fatalf("budget_used %s, want 150", u)
	}
	if r := pay("b4", "151"); r.Status != http.StatusForbidden || r.ErrorCode() != "policy_denied" || !strings.Contains(string(r.Body), "deposit_budget") {
		t.Fatalf("alone above the budget: %d %s", r.Status, r.Body)
	}
}

// An account with its own token file takes that token only: the relayer token (leaked, say)
// cannot submit for it, and its token cannot submit for another account.
func TestAccountToken(t *testing.T) {
	fake := startPolicyFake(t)
	dir := t.TempDir()
	n := startPolicyRelayer(t, fake, dir, `{}`)
	own := []string{"Authorization", "Bearer " + accountToken}
	body := `{"idempotency_key":"t1","receiver_id":"app.near","actions":[{"Transfer":{"deposit":"1"}}]}`
	if r := n.Do(t, "POST", "/v1/relayers/"+ownAccount+"/intents", body, bearer...); r.Status != http.StatusUnauthorized {
		t.Fatalf("relayer token on an account with its own: %d %s", r.Status, r.Body)
	}
	if r := n.Do(t, "POST", "/v1/relayers/"+account+"/intents", body, own...); r.Status != http.StatusUnauthorized {
		t.Fatalf("an account's token on another account: %d %s", r.Status, r.Body)
	}
	if r := n.Do(t, "POST", "/v1/relayers/"+ownAccount+"/intents", body, own...); r.Status != http.StatusCreated {
		t.Fatalf("own token: %d %s", r.Status, r.Body)
	}
	if r := n.Do(t, "GET", "/v1/relayers/"+ownAccount, nil, own...); r.Status != http.StatusOK || strings.Contains(string(r.Body), "token") {
		t.Fatalf("status with own token: %d %s (the token file is not shown)", r.Status, r.Body)
	}
}

// Policies and account tokens reload with the keys file: a tightened policy and a rotated
// token hold without a restart; a file that no longer loads leaves the rules in force.
func TestPolicyReload(t *testing.T) {
	fake := startPolicyFake(t)
	dir := t.TempDir()
	n := startPolicyRelayer(t, fake, dir, `{}`)
	path := "/v1/relayers/" + account + "/intents"
	body := func(idem string) string {
		return fmt.Sprintf(`{"idempotency_key":%q,"receiver_id":"app.near","actions":[{"Transfer":{"deposit":"1"}}]}`, idem)
	}
	if r := n.Do(t, "POST", path, body("before"), bearer...); r.Status != http.StatusCreated {
		t.Fatalf("before: %d %s", r.Status, r.Body)
	}
	keys := filepath.Join(dir, "keys.json")
	write := func(name, content string, mode os.FileMode) {
		t.Helper()
		// Written beside and renamed, as an editor or a config manager does.
		tmp := filepath.Join(dir, name+".new")
		if err := os.WriteFile(tmp, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(tmp, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	// await posts until the answer has status want, for at most ten seconds (reloads are
	// looked for once a second).
	// Each try is a new intent: one accepted before the reload must not answer a later try.
	await := func(what, p, idem string, want int, header ...string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for i := 0; ; i++ {
			r := n.Do(t, "POST", p, body(fmt.Sprintf("%s-%d", idem, i)), header...)
			if r.Status == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d %s, want %d", what, r.Status, r.Body, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	write("keys.json", policyKeys(`{"receivers":["other.near"]}`, "own.token"), 0o600)
	await("tightened", path, "tight", http.StatusForbidden, bearer...)

	// A keys file others can read does not load: the tightened policy stays.
	write("keys.json", policyKeys(`{}`, "own.token"), 0o644)
	time.Sleep(1500 * time.Millisecond) // past a reload look; nothing to await but its absence
	if r := n.Do(t, "POST", path, body("open"), bearer...); r.Status != http.StatusForbidden {
		t.Fatalf("a keys file readable by others was loaded: %d %s", r.Status, r.Body)
	}
	if err := os.Chmod(keys, 0o600); err != nil {
		t.Fatal(err)
	}
	await("loosened", path, "loose", http.StatusCreated, bearer...)

	// A token file replaced by one others can read does not load: the account takes no token
	// at all (a revocation fails closed) until it loads.
	own := "/v1/relayers/" + ownAccount + "/intents"
	write("own.token", "rotated-account-token-0123456789abcdef\n", 0o644)
	await("old token after a rotation that does not load", own, "o0", http.StatusForbidden, "Authorization", "Bearer "+accountToken)
	if r := n.Do(t, "POST", own, body("o0-new"), "Authorization", "Bearer rotated-account-token-0123456789abcdef"); r.Status != http.StatusForbidden {
		t.Fatalf("new token from a file others can read: %d %s", r.Status, r.Body)
	}
	// The account's token rotates with its file.
	if err := os.Chmod(filepath.Join(dir, "own.token"), 0o600); err != nil {
		t.Fatal(err)
	}
	await("new token", own, "o2", http.StatusCreated, "Authorization", "Bearer rotated-account-token-0123456789abcdef")
	if r := n.Do(t, "POST", own, body("o3"), "Authorization", "Bearer "+accountToken); r.Status != http.StatusUnauthorized {
		t.Fatalf("old token after the rotation: %d %s", r.Status, r.Body)
	}
}

// The keys file's policies are checked at load: unknown fields and bad values are refused with
// a message naming the field, never a secret.
func TestPolicyParse(t *testing.T) {
	s, _ := secret("a")
	for _, c := range []struct{ policy, want string }{
		{`{"reciever":["a.near"]}`, `unknown field "reciever"`},
		{`{"receivers":["Not Valid"]}`, "receivers"},
		{`{"receivers":["*.BAD"]}`, "wildcard"},
		{`{"actions":["Stake"]}`, `actions: "Stake" is not one of`},
		{`{"methods":[""]}`, "methods"},
		{`{"max_deposit":"-1"}`, "max_deposit"},
		{`{"max_deposit":"340282366920938463463374607431768211456"}`, "max_deposit"},
		{`{"deposit_budget":{"amount":"1","window":"0s"}}`, "deposit_budget.window"},
		{`{"deposit_budget":{"amount":"x","window":"1h"}}`, "deposit_budget.amount"},
	} {
		_, err := relayer.ParseKeys([]byte(fmt.Sprintf(`{"accounts":[{"account_id":%q,"keys":[%q],"policy":%s}]}`, account, s, c.policy)))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), s[8:20]) {
			t.Errorf("%s: %v, want an error naming %q", c.policy, err, c.want)
		}
	}
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys.json")
	if err := os.WriteFile(keys, []byte(policyKeys(`{}`, "open.token")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "open.token"), []byte(accountToken), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := relayer.LoadKeys(keys); err == nil || !strings.Contains(err.Error(), "token_file") || strings.Contains(err.Error(), accountToken) {
		t.Fatalf("a token file others can read: %v", err)
	}
}

// Tightening a policy does not turn the retry of an intent it accepted into a refusal: an
// identical repeat answers its record. Another body under an accepted key is a conflict, and
// is not charged.
func TestPolicyRepeatAndConflict(t *testing.T) {
	fake := startPolicyFake(t)
	dir := t.TempDir()
	n := startPolicyRelayer(t, fake, dir, `{"deposit_budget":{"amount":"150","window":"1h"}}`)
	path := "/v1/relayers/" + account + "/intents"
	body := func(d string) string {
		return fmt.Sprintf(`{"idempotency_key":"kept","receiver_id":"app.near","actions":[{"Transfer":{"deposit":%q}}]}`, d)
	}
	if r := n.Do(t, "POST", path, body("100"), bearer...); r.Status != http.StatusCreated {
		t.Fatalf("first: %d %s", r.Status, r.Body)
	}
	if r := n.Do(t, "POST", path, body("40"), bearer...); r.Status != http.StatusConflict || r.ErrorCode() != "idempotency_conflict" {
		t.Fatalf("another body: %d %s", r.Status, r.Body)
	}
	var st relayer.RelayerStatus
	n.Do(t, "GET", "/v1/relayers/"+account, nil, bearer...).JSON(t, &st)
	if st.BudgetUsed == nil || *st.BudgetUsed != "100" {
		t.Fatalf("budget_used %v after a conflict, want 100", st.BudgetUsed)
	}
	if err := os.WriteFile(filepath.Join(dir, "keys.json.new"), []byte(policyKeys(`{"receivers":["other.near"]}`, "own.token")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "keys.json.new"), filepath.Join(dir, "keys.json")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ { // until the tightened policy refuses a new intent
		r := n.Do(t, "POST", path, strings.Replace(body("1"), "kept", fmt.Sprintf("probe-%d", i), 1), bearer...)
		if r.Status == http.StatusForbidden {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tightened policy never applied: %d %s", r.Status, r.Body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r := n.Do(t, "POST", path, body("100"), bearer...); r.Status != http.StatusOK {
		t.Fatalf("repeat of an accepted intent after tightening: %d %s", r.Status, r.Body)
	}
}

// The budget counts what lands: two bodies racing under one key are both charged (one may win
// the claim), and a key reused once its record is gone is a new intent, charged again. The
// deposits that landed never exceed the budget.
func TestPolicyBudgetCannotBeBypassed(t *testing.T) {
	fake := startPolicyFake(t)
	n := startPolicyRelayerWith(t, fake, t.TempDir(), `{"deposit_budget":{"amount":"150","window":"1h"}}`, func(o *relayer.Options) {
		o.Retention = time.Second
	})
	path := "/v1/relayers/" + account + "/intents"
	post := func(idem, d string) apitest.Response {
		return n.Do(t, "POST", path, fmt.Sprintf(`{"idempotency_key":%q,"receiver_id":"app.near","actions":[{"Transfer":{"deposit":%q}}]}`, idem, d), bearer...)
	}
	// A key reused after its record is gone: k0 lands, retention removes it, then the same
	// key and body again, which the budget has no room for a second time.
	if r := post("k0", "100"); r.Status != http.StatusCreated {
		t.Fatalf("k0: %d %s", r.Status, r.Body)
	}
	deadline := time.Now().Add(30 * time.Second)
	for n.Do(t, "GET", path+"/k0", nil, bearer...).Status != http.StatusNotFound {
		if time.Now().After(deadline) {
			t.Fatal("k0 was never removed by retention")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r := post("k0", "100"); r.Status != http.StatusTooManyRequests || r.ErrorCode() != "budget_exceeded" {
		t.Fatalf("a reused key with a deposit past the budget: %d %s", r.Status, r.Body)
	}
	// Two bodies racing under each key: 50 left in the budget.
	var wg sync.WaitGroup
	for i := range 20 {
		for _, d := range []string{"1", "49"} {
			wg.Go(func() { post(fmt.Sprintf("race-%d", i), d) })
		}
	}
	wg.Wait()
	// Everything that will land has landed once no intent is in flight.
	deadline = time.Now().Add(30 * time.Second)
	for {
		var st relayer.RelayerStatus
		n.Do(t, "GET", "/v1/relayers/"+account, nil, bearer...).JSON(t, &st)
		busy := 0
		for _, k := range st.Keys {
			busy += k.Queued + k.InFlight
		}
		if busy == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("intents still in flight: %+v", st.Keys)
		}
		time.Sleep(100 * time.Millisecond)
	}
	b, _ := fake.Balance("app.near")
	rich, _ := near.ParseU128("1000000000000000000000000000")
	landed := new(big.Int).Sub(b.Big(), rich.Big()).Uint64()
	if landed > 150 {
		t.Fatalf("deposits of %d yocto landed in the window, the budget is 150", landed)
	}
}
