package fakenear

import (
	"context"
	"encoding/json"
	"math/big"
	"testing"

	"github.com/shardkeeper/shardkeeper/near"
)

// land sends the transaction of spec (wait_until NONE), produces a block and returns the
// ledger entry of its landing.
func land(t *testing.T, f *Fake, c *near.Client, spec txSpec) LedgerEntry {
	t.Helper()
	raw, h := signTx(t, f, spec)
	if _, err := c.SendTx(context.Background(), raw, near.TxNone); err != nil {
		t.Fatal(err)
	}
	f.Step()
	e := f.LedgerOf(h)
	if len(e) != 1 || e[0].Kind != Landed {
		t.Fatalf("ledger %+v, want landed", e)
	}
	return e[0]
}

// failureKind returns the ActionError kind name of a Failure status, or "".
func failureKind(t *testing.T, status json.RawMessage) string {
	t.Helper()
	var v struct {
		Failure *struct {
			ActionError struct {
				Kind json.RawMessage `json:"kind"`
			} `json:"ActionError"`
		} `json:"Failure"`
	}
	if err := json.Unmarshal(status, &v); err != nil {
		t.Fatalf("%s: %v", status, err)
	}
	if v.Failure == nil {
		return ""
	}
	var name string
	if json.Unmarshal(v.Failure.ActionError.Kind, &name) == nil {
		return name
	}
	var obj map[string]json.RawMessage
	_ = json.Unmarshal(v.Failure.ActionError.Kind, &obj)
	for k := range obj {
		return k
	}
	return "?"
}

func TestTransferMovesBalance(t *testing.T) {
	f, c := testChain(t, Config{})
	r0, b0 := balance(t, f, relayerID), balance(t, f, bobID)
	amount := yocto("1500000000000000000000000")
	e := land(t, f, c, txSpec{actions: []near.Action{near.Transfer{Deposit: amount}}})
	if e.Outcome() != near.OutcomeSucceeded {
		t.Fatalf("status %s", e.Status)
	}
	if got := new(big.Int).Sub(r0, balance(t, f, relayerID)); got.Cmp(amount.Big()) != 0 {
		t.Fatalf("relayer paid %s, want %s", got, amount)
	}
	if got := new(big.Int).Sub(balance(t, f, bobID), b0); got.Cmp(amount.Big()) != 0 {
		t.Fatalf("bob got %s, want %s", got, amount)
	}
}

// TestLandedButFailed: a FunctionCall to method "fail" lands with a Failure outcome (near.Client
// sees OutcomeFailed); its deposit goes back and no state change of the receipt stays.
func TestLandedButFailed(t *testing.T) {
	f, c := testChain(t, Config{})
	r0, b0 := balance(t, f, relayerID), balance(t, f, bobID)
	ctx := context.Background()
	raw, h := signTx(t, f, txSpec{actions: []near.Action{
		near.Transfer{Deposit: near.U128From64(5)},
		near.FunctionCall{MethodName: "fail", Args: []byte("{}"), Gas: 30_000_000_000_000, Deposit: near.U128From64(7)},
	}})
	res := sendAsync(c, raw, near.TxFinal)
	awaitPending(t, f, h)
	f.StepN(1 + DefaultFinalityLag)
	r := result(t, res)
	if r.err != nil || r.out.Kind() != near.OutcomeFailed {
		t.Fatalf("answer %+v, %v; want a Failure outcome", r.out, r.err)
	}
	if k := failureKind(t, r.out.Status); k != "FunctionCallError" {
		t.Fatalf("failure kind %s: %s", k, r.out.Status)
	}
	e := f.LedgerOf(h)
	if len(e) != 1 || e[0].Kind != Landed || e[0].Outcome() != near.OutcomeFailed {
		t.Fatalf("ledger %+v", e)
	}
	if balance(t, f, relayerID).Cmp(r0) != 0 || balance(t, f, bobID).Cmp(b0) != 0 {
		t.Fatal("a failed receipt moved money")
	}
	if got := nonceOf(t, f, relayerID, relayerKey); got != e[0].Nonce {
		t.Fatalf("a failed transaction still takes its nonce: %d, want %d", got, e[0].Nonce)
	}
	if _, err := c.SendTx(ctx, raw, near.TxFinal); err != nil {
		t.Fatalf("re-send of a failed one: %v", err)
	}
}

// TestAccountActions: a sub-account is created with a key and money; a top-level or foreign
// sub-account is refused; a transfer to a missing account fails and is refunded.
func TestAccountActions(t *testing.T) {
	f, c := testChain(t, Config{})
	userKey := KeyFromLabel("user")
	e := land(t, f, c, txSpec{receiver: "alice." + relayerID, actions: []near.Action{
		near.CreateAccount{},
		near.Transfer{Deposit: near.U128From64(1000)},
		near.AddKey{PublicKey: userKey.PublicKey(), AccessKey: near.AccessKey{Permission: near.AccessKeyPermission{FullAccess: true}}},
	}})
	if e.Outcome() != near.OutcomeSucceeded {
		t.Fatalf("create sub-account: %s", e.Status)
	}
	if b, _ := f.Balance("alice." + relayerID); b != near.U128From64(1000) {
		t.Fatalf("new account balance %s", b)
	}
	if n := nonceOf(t, f, "alice."+relayerID, userKey); n != (e.Height-1)*nonceMultiplier {
		t.Fatalf("new account's key nonce %d", n)
	}

	r0 := balance(t, f, relayerID)
	for _, tc := range []struct {
		receiver string
		actions  []near.Action
		kind     string
	}{
		{"carol.test", []near.Action{near.CreateAccount{}}, "CreateAccountNotAllowed"},
		{"short", []near.Action{near.CreateAccount{}}, "CreateAccountOnlyByRegistrar"},
		{bobID, []near.Action{near.CreateAccount{}}, "AccountAlreadyExists"},
		{"ghost.test", []near.Action{near.Transfer{Deposit: near.U128From64(9)}}, "AccountDoesNotExist"},
		{bobID, []near.Action{near.AddKey{PublicKey: userKey.PublicKey(), AccessKey: near.AccessKey{Permission: near.AccessKeyPermission{FullAccess: true}}}}, "ActorNoPermission"},
		{relayerID, []near.Action{near.DeleteKey{PublicKey: userKey.PublicKey()}}, "DeleteKeyDoesNotExist"},
	} {
		e := land(t, f, c, txSpec{receiver: tc.receiver, actions: tc.actions})
		if k := failureKind(t, e.Status); k != tc.kind {
			t.Fatalf("%s %s: failure %q (%s), want %s", tc.receiver, e.Actions, k, e.Status, tc.kind)
		}
	}
	if balance(t, f, relayerID).Cmp(r0) != 0 {
		t.Fatal("failed transfers were not refunded")
	}
}
