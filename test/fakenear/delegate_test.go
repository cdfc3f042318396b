package fakenear

import (
	"crypto/sha256"
	"math/big"
	"testing"

	"github.com/shardkeeper/shardkeeper/near"
)

const userID = "user.test"

var userKey = KeyFromLabel("delegate user")

// delegateChain has a user account whose delegate actions the relayer submits.
func delegateChain(t *testing.T) (*Fake, *near.Client) {
	return testChain(t, Config{Accounts: []Account{{ID: userID, Balance: near.U128From64(0), Keys: []AccountKey{{PublicKey: userKey.PublicKey()}}}}})
}

// signedDelegate builds the user's delegate action of actions to receiver, signed over the
// NEP-461 hash unless sign says otherwise.
func signedDelegate(t *testing.T, f *Fake, d near.DelegateAction, sign func(near.DelegateAction) near.Signature) near.SignedDelegateAction {
	t.Helper()
	if d.SenderID == "" {
		d.SenderID = userID
	}
	if d.ReceiverID == "" {
		d.ReceiverID = bobID
	}
	if d.Nonce == 0 {
		d.Nonce = nonceOf(t, f, userID, userKey) + 1
	}
	if d.MaxBlockHeight == 0 {
		d.MaxBlockHeight = f.Head().Height + 100
	}
	d.PublicKey = userKey.PublicKey()
	if sign != nil {
		return near.SignedDelegateAction{DelegateAction: d, Signature: sign(d)}
	}
	sd, _, err := near.SignDelegateAction(d, userKey)
	if err != nil {
		t.Fatal(err)
	}
	return *sd
}

// TestDelegateAction: the relayer's transaction to the user carries the user's signed delegate
// action; its inner transfer runs as the user (predecessor) and is paid by the relayer; the
// user's key takes the delegate nonce.
func TestDelegateAction(t *testing.T) {
	f, c := delegateChain(t)
	r0, b0 := balance(t, f, relayerID), balance(t, f, bobID)
	sd := signedDelegate(t, f, near.DelegateAction{Actions: []near.Action{near.Transfer{Deposit: near.U128From64(42)}}}, nil)
	e := land(t, f, c, txSpec{receiver: userID, actions: []near.Action{sd}})
	if e.Outcome() != near.OutcomeSucceeded || len(e.Receipts) != 2 {
		t.Fatalf("delegate: %s, receipts %+v", e.Status, e.Receipts)
	}
	inner := e.Receipts[1]
	if inner.Predecessor != userID || inner.Receiver != bobID || string(inner.Status) != `{"SuccessValue":""}` {
		t.Fatalf("inner receipt %+v", inner)
	}
	if got := new(big.Int).Sub(balance(t, f, bobID), b0); got.Int64() != 42 {
		t.Fatalf("bob got %s", got)
	}
	if got := new(big.Int).Sub(r0, balance(t, f, relayerID)); got.Int64() != 42 {
		t.Fatalf("relayer paid %s, want the inner deposit 42", got)
	}
	if n := nonceOf(t, f, userID, userKey); n != sd.DelegateAction.Nonce {
		t.Fatalf("user key nonce %d, want the delegate nonce %d", n, sd.DelegateAction.Nonce)
	}
}

// TestDelegateActionChecks: each check of nearcore fails the relayer's receipt with its
// ActionError; the relayer's transaction lands all the same (and takes its nonce).
func TestDelegateActionChecks(t *testing.T) {
	f, c := delegateChain(t)
	transfer := []near.Action{near.Transfer{Deposit: near.U128From64(1)}}
	userNonce := nonceOf(t, f, userID, userKey)
	withoutPrefix := func(d near.DelegateAction) near.Signature {
		// Signed over sha256(borsh) without the NEP-461 prefix: the hash of a transaction, not
		// of a delegate action.
		body, err := d.Encode()
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(body)
		return userKey.Sign(h[:])
	}
	for _, tc := range []struct {
		name     string
		receiver string
		d        near.DelegateAction
		sign     func(near.DelegateAction) near.Signature
		kind     string
	}{
		{"no NEP-461 prefix", userID, near.DelegateAction{Actions: transfer}, withoutPrefix, "DelegateActionInvalidSignature"},
		{"expired", userID, near.DelegateAction{Actions: transfer, MaxBlockHeight: f.Head().Height}, nil, "DelegateActionExpired"},
		{"sent to another account", bobID, near.DelegateAction{Actions: transfer}, nil, "DelegateActionSenderDoesNotMatchTxReceiver"},
		{"stale nonce", userID, near.DelegateAction{Actions: transfer, Nonce: userNonce}, nil, "DelegateActionInvalidNonce"},
		{"nonce too large", userID, near.DelegateAction{Actions: transfer, Nonce: 1 << 60}, nil, "DelegateActionNonceTooLarge"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sd := signedDelegate(t, f, tc.d, tc.sign)
			e := land(t, f, c, txSpec{receiver: tc.receiver, actions: []near.Action{sd}})
			if k := failureKind(t, e.Status); k != tc.kind {
				t.Fatalf("failure %q (%s), want %s", k, e.Status, tc.kind)
			}
			if n := nonceOf(t, f, userID, userKey); n != userNonce {
				t.Fatalf("a failed delegate action moved the user's nonce to %d", n)
			}
		})
	}
}

// TestDelegateInnerFailure: as in nearcore, the Delegate action itself succeeds, so the
// transaction's status is SuccessValue although the inner receipt failed; the failure is in
// the inner receipt's outcome, and its deposit is refunded to the user, not the relayer.
func TestDelegateInnerFailure(t *testing.T) {
	f, c := delegateChain(t)
	r0 := balance(t, f, relayerID)
	sd := signedDelegate(t, f, near.DelegateAction{Actions: []near.Action{
		near.FunctionCall{MethodName: "fail", Args: []byte("{}"), Gas: 30_000_000_000_000, Deposit: near.U128From64(3)},
	}}, nil)
	e := land(t, f, c, txSpec{receiver: userID, actions: []near.Action{sd}})
	if e.Outcome() != near.OutcomeSucceeded {
		t.Fatalf("transaction status %s, want SuccessValue", e.Status)
	}
	if len(e.Receipts) != 2 || failureKind(t, e.Receipts[1].Status) != "FunctionCallError" {
		t.Fatalf("receipts %+v, want the inner one failed", e.Receipts)
	}
	if got := new(big.Int).Sub(r0, balance(t, f, relayerID)); got.Int64() != 3 {
		t.Fatalf("relayer paid %s, want 3", got)
	}
	if b, _ := f.Balance(userID); b != near.U128From64(3) {
		t.Fatalf("user balance %s, want the refunded 3", b)
	}
}
