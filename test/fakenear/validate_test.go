package fakenear

import (
	"context"
	"errors"
	"testing"

	"github.com/shardkeeper/shardkeeper/near"
)

// TestValidityWindow: a block hash at most ValidityPeriod blocks behind the head is accepted;
// one more block and it is Expired; a hash the chain never had is Expired too.
func TestValidityWindow(t *testing.T) {
	const period = 5
	f, c := testChain(t, Config{ValidityPeriod: period})
	ctx := context.Background()
	base := f.Head()
	f.StepN(period) // head = base + period: still valid
	edge, hEdge := signTx(t, f, txSpec{block: base.Hash})
	if _, err := c.SendTx(ctx, edge, near.TxNone); err != nil {
		t.Fatal(err)
	}
	if !f.Pending(hEdge) {
		t.Fatalf("a transaction on the block %d blocks back was not accepted: %v", period, f.LedgerOf(hEdge))
	}
	f.Step() // included in base+period+1: its parent is base+period, still within the window
	if k := kinds(f, hEdge); !sameKinds(k, Landed) {
		t.Fatalf("ledger %v, want landed", k)
	}

	old, _ := signTx(t, f, txSpec{block: base.Hash}) // head is now base+period+1
	_, err := c.SendTx(ctx, old, near.TxFinal)
	wantInvalidTx(t, err, "Expired")
	if !near.IsStale(err) {
		t.Fatal("Expired is not IsStale")
	}
	unknown, _ := signTx(t, f, txSpec{block: near.Hash{0xfe}})
	_, err = c.SendTx(ctx, unknown, near.TxFinal)
	wantInvalidTx(t, err, "Expired")
}

// TestExpiresWhileHeld: a transaction held by a late endpoint until its block hash left the
// window is dropped as Expired when it reaches the pool.
func TestExpiresWhileHeld(t *testing.T) {
	const period = 3
	f, _ := testChain(t, Config{ValidityPeriod: period}, EndpointConfig{}, EndpointConfig{Name: "late", ForwardDelayBlocks: period + 1})
	late := f.Client(t, f.Endpoint("late"))
	raw, h := signTx(t, f, txSpec{})
	if _, err := late.SendTx(context.Background(), raw, near.TxNone); err != nil {
		t.Fatal(err)
	}
	f.StepN(period + 2)
	e := f.LedgerOf(h)
	if len(e) != 1 || e[0].Kind != Dropped || e[0].ReasonName != "Expired" || e[0].Endpoint != "late" {
		t.Fatalf("ledger %+v, want dropped Expired by the late endpoint", e)
	}
}

// TestRefusals checks the refusals of validation through near.Client's typed errors.
func TestRefusals(t *testing.T) {
	f, c := testChain(t, Config{Accounts: []Account{{ID: "poor.test", Balance: near.U128From64(10), Keys: []AccountKey{{PublicKey: KeyFromLabel("poor").PublicKey()}}}}})
	ctx := context.Background()
	send := func(spec txSpec) error {
		raw, _ := signTx(t, f, spec)
		_, err := c.SendTx(ctx, raw, near.TxFinal)
		return err
	}

	t.Run("InvalidSignature", func(t *testing.T) {
		raw, _ := signTx(t, f, txSpec{})
		raw[len(raw)-1] ^= 1 // the last byte belongs to the signature
		_, err := c.SendTx(ctx, raw, near.TxFinal)
		wantInvalidTx(t, err, "InvalidSignature")
		// Signed by another key than the one the transaction names.
		tx := near.Transaction{SignerID: relayerID, PublicKey: relayerKey.PublicKey(), Nonce: nonceOf(t, f, relayerID, relayerKey) + 1,
			ReceiverID: bobID, BlockHash: f.Head().Hash, Actions: []near.Action{near.Transfer{Deposit: near.U128From64(1)}}}
		h, _ := tx.Hash()
		st := near.SignedTransaction{Transaction: tx, Signature: bobKey.Sign(h[:])}
		raw, _ = st.Encode()
		_, err = c.SendTx(ctx, raw, near.TxFinal)
		wantInvalidTx(t, err, "InvalidSignature")
	})
	t.Run("SignerDoesNotExist", func(t *testing.T) {
		it := wantInvalidTx(t, send(txSpec{signer: "ghost.test", nonce: 1}), "SignerDoesNotExist").(*near.SignerDoesNotExistError)
		if it.SignerID != "ghost.test" {
			t.Fatalf("%+v", it)
		}
	})
	t.Run("AccessKeyNotFound", func(t *testing.T) {
		it := wantInvalidTx(t, send(txSpec{key: bobKey, nonce: 1}), "InvalidAccessKeyError").(*near.InvalidAccessKeyError)
		if it.Kind != "AccessKeyNotFound" {
			t.Fatalf("%v", it)
		}
	})
	t.Run("NotEnoughBalance", func(t *testing.T) {
		err := send(txSpec{signer: "poor.test", key: KeyFromLabel("poor"), actions: []near.Action{near.Transfer{Deposit: near.U128From64(11)}}})
		it := wantInvalidTx(t, err, "NotEnoughBalance").(*near.NotEnoughBalanceError)
		if it.SignerID != "poor.test" || it.Balance != near.U128From64(10) || it.Cost != near.U128From64(11) {
			t.Fatalf("%+v", it)
		}
		if near.IsStale(err) {
			t.Fatal("NotEnoughBalance counted as stale")
		}
	})
	t.Run("ActionsValidation", func(t *testing.T) {
		err := send(txSpec{actions: []near.Action{near.FunctionCall{MethodName: "m", Gas: 0}}})
		it := wantInvalidTx(t, err, "ActionsValidation").(*near.InvalidTxError)
		if string(it.Detail) != `"FunctionCallZeroAttachedGas"` {
			t.Fatalf("%v", it)
		}
	})
}

// TestFunctionCallKeyPermission checks a function-call key's refusals, in nearcore's order.
func TestFunctionCallKeyPermission(t *testing.T) {
	fcKey := KeyFromLabel("fc")
	perm := near.AccessKeyPermission{FunctionCall: &near.FunctionCallPermission{ReceiverID: "app.test", MethodNames: []string{"allowed"}}}
	f, c := testChain(t, Config{Accounts: []Account{{ID: "app.test", Balance: hundredNEAR}}})
	if err := f.AddKey(relayerID, AccountKey{PublicKey: fcKey.PublicKey(), Permission: &perm}); err != nil {
		t.Fatal(err)
	}
	call := func(method string, deposit uint64) near.Action {
		return near.FunctionCall{MethodName: method, Args: []byte("{}"), Gas: 30_000_000_000_000, Deposit: near.U128From64(deposit)}
	}
	for _, tc := range []struct {
		name     string
		receiver string
		actions  []near.Action
		kind     string
	}{
		{"transfer", "app.test", []near.Action{near.Transfer{Deposit: near.U128From64(1)}}, "RequiresFullAccess"},
		{"two calls", "app.test", []near.Action{call("allowed", 0), call("allowed", 0)}, "RequiresFullAccess"},
		{"deposit", "app.test", []near.Action{call("allowed", 1)}, "DepositWithFunctionCall"},
		{"receiver", "other.test", []near.Action{call("allowed", 0)}, "ReceiverMismatch"},
		{"method", "app.test", []near.Action{call("other", 0)}, "MethodNameMismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, _ := signTx(t, f, txSpec{key: fcKey, receiver: tc.receiver, actions: tc.actions})
			_, err := c.SendTx(context.Background(), raw, near.TxFinal)
			it := wantInvalidTx(t, err, "InvalidAccessKeyError").(*near.InvalidAccessKeyError)
			if it.Kind != tc.kind {
				t.Fatalf("kind %s (%s), want %s", it.Kind, it.Detail, tc.kind)
			}
		})
	}
	raw, h := signTx(t, f, txSpec{key: fcKey, receiver: "app.test", actions: []near.Action{call("allowed", 0)}})
	if _, err := c.SendTx(context.Background(), raw, near.TxNone); err != nil {
		t.Fatal(err)
	}
	f.Step()
	if k := kinds(f, h); !sameKinds(k, Landed) {
		t.Fatalf("permitted call: %v", k)
	}
}

// TestInvalidReceiverID: current nearcore refuses to decode a transaction naming an invalid
// account id (PARSE_ERROR, even with NONE); LegacyAccountIDCheck answers InvalidReceiverId.
func TestInvalidReceiverID(t *testing.T) {
	t.Run("parse error", func(t *testing.T) {
		f, c := testChain(t, Config{})
		raw, _ := signTx(t, f, txSpec{receiver: "Bob.Test"})
		for _, wait := range []near.TxExecutionStatus{near.TxNone, near.TxFinal} {
			_, err := c.SendTx(context.Background(), raw, wait)
			var re *near.RPCError
			if !errors.As(err, &re) || re.Cause != "PARSE_ERROR" || near.IsRefused(err) || near.IsOutcomeUnknown(err) {
				t.Fatalf("wait %s: %v, want a PARSE_ERROR", wait, err)
			}
			if !contains(re.Error(), "Bob.Test") {
				t.Fatalf("the parse error does not name the id: %v", re)
			}
		}
		if n := len(f.Ledger()); n != 0 {
			t.Fatalf("an undecodable transaction reached the ledger: %v", f.Ledger())
		}
	})
	t.Run("legacy", func(t *testing.T) {
		f, c := testChain(t, Config{LegacyAccountIDCheck: true})
		raw, _ := signTx(t, f, txSpec{receiver: "Bob.Test"})
		_, err := c.SendTx(context.Background(), raw, near.TxFinal)
		it := wantInvalidTx(t, err, "InvalidReceiverId").(*near.InvalidReceiverIDError)
		if it.ReceiverID != "Bob.Test" {
			t.Fatalf("%+v", it)
		}
	})
}
