package fakenear

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/near"
)

// TestSendNoneAnswersBeforeValidation: with wait_until NONE the answer is
// {"final_execution_status":"NONE"} whatever the transaction; a refused one just never lands.
func TestSendNoneAnswersBeforeValidation(t *testing.T) {
	f, c := testChain(t, Config{})
	ctx := context.Background()
	raw, h := signTx(t, f, txSpec{})
	raw[len(raw)-1] ^= 1 // bad signature
	out, err := c.SendTx(ctx, raw, near.TxNone)
	if err != nil || out.FinalExecutionStatus != near.TxNone || out.Status != nil {
		t.Fatalf("NONE answer %+v, %v; want final_execution_status NONE and no error", out, err)
	}
	if string(out.Raw) != `{"final_execution_status":"NONE"}` {
		t.Fatalf("NONE answer %s", out.Raw)
	}
	e := f.LedgerOf(h)
	if len(e) != 1 || e[0].Kind != Refused || e[0].ReasonName != "InvalidSignature" {
		t.Fatalf("ledger %+v, want refused InvalidSignature", e)
	}
	f.Step()
	if _, err := c.TxStatus(ctx, near.TxQuery{Hash: h, SenderID: relayerID, WaitUntil: near.TxNone}); !isUnknownTx(err) {
		t.Fatalf("status of the refused transaction: %v, want UNKNOWN_TRANSACTION", err)
	}
	// The same bytes with a waiting level are refused in the answer.
	_, err = c.SendTx(ctx, raw, near.TxIncluded)
	wantInvalidTx(t, err, "InvalidSignature")
}

func isUnknownTx(err error) bool {
	var ut *near.UnknownTransactionError
	return errors.As(err, &ut)
}

// TestSendWaitLevels: INCLUDED and EXECUTED_OPTIMISTIC answer once a block includes the
// transaction, FINAL once that block is final; each answer is the outcome.
func TestSendWaitLevels(t *testing.T) {
	f, c := testChain(t, Config{})
	for _, tc := range []struct {
		wait   near.TxExecutionStatus
		blocks int
		level  near.TxExecutionStatus
	}{
		{near.TxIncluded, 1, near.TxExecutedOptimistic},
		{near.TxExecutedOptimistic, 1, near.TxExecutedOptimistic},
		{near.TxIncludedFinal, 1 + DefaultFinalityLag, near.TxFinal},
		{near.TxFinal, 1 + DefaultFinalityLag, near.TxFinal},
	} {
		t.Run(string(tc.wait), func(t *testing.T) {
			raw, h := signTx(t, f, txSpec{})
			res := sendAsync(c, raw, tc.wait)
			awaitPending(t, f, h)
			for i := 1; i < tc.blocks; i++ {
				f.Step()
				select {
				case r := <-res:
					t.Fatalf("answered after %d of %d blocks: %+v %v", i, tc.blocks, r.out, r.err)
				default:
				}
			}
			f.Step()
			r := result(t, res)
			if r.err != nil || r.out.FinalExecutionStatus != tc.level || r.out.Kind() != near.OutcomeSucceeded ||
				r.out.TransactionHash == nil || *r.out.TransactionHash != h {
				t.Fatalf("answer %+v, %v; want %s, succeeded, hash %s", r.out, r.err, tc.level, h)
			}
		})
	}
}

// TestSendTimeout: a transaction no block includes within the poll timeout answers
// TIMEOUT_ERROR (outcome unknown), and lands later all the same.
func TestSendTimeout(t *testing.T) {
	f, c := testChain(t, Config{PollTimeout: 200 * time.Millisecond})
	raw, h := signTx(t, f, txSpec{})
	_, err := c.SendTx(context.Background(), raw, near.TxFinal)
	var te *near.TimeoutError
	if !errors.As(err, &te) || !near.IsOutcomeUnknown(err) {
		t.Fatalf("%v, want TIMEOUT_ERROR", err)
	}
	f.Step()
	if k := kinds(f, h); !sameKinds(k, Landed) {
		t.Fatalf("ledger %v, want landed", k)
	}
}

// TestTxStatus: by hash and sender, by signed transaction, waiting or not, with receipts.
func TestTxStatus(t *testing.T) {
	f, c := testChain(t, Config{PollTimeout: 300 * time.Millisecond})
	ctx := context.Background()
	raw, h := signTx(t, f, txSpec{})

	if _, err := c.TxStatus(ctx, near.TxQuery{Hash: h, SenderID: relayerID, WaitUntil: near.TxNone}); !isUnknownTx(err) {
		t.Fatalf("never sent: %v, want UNKNOWN_TRANSACTION", err)
	}
	// By signed transaction the node checks it: valid, so unknown; with a wait, a timeout.
	if _, err := c.TxStatus(ctx, near.TxQuery{SignedTx: raw, WaitUntil: near.TxNone}); !isUnknownTx(err) {
		t.Fatalf("signed, never sent: %v, want UNKNOWN_TRANSACTION", err)
	}
	var te *near.TimeoutError
	if _, err := c.TxStatus(ctx, near.TxQuery{Hash: h, SenderID: relayerID}); !errors.As(err, &te) {
		t.Fatalf("waiting for a transaction never sent: %v, want TIMEOUT_ERROR", err)
	}
	stale, _ := signTx(t, f, txSpec{nonce: nonceOf(t, f, relayerID, relayerKey)})
	_, err := c.TxStatus(ctx, near.TxQuery{SignedTx: stale, WaitUntil: near.TxNone})
	wantInvalidTx(t, err, "InvalidNonce")

	if _, err := c.SendTx(ctx, raw, near.TxNone); err != nil {
		t.Fatal(err)
	}
	// A pooled transaction is not known to tx until a block includes it.
	if _, err := c.TxStatus(ctx, near.TxQuery{Hash: h, SenderID: relayerID, WaitUntil: near.TxNone}); !isUnknownTx(err) {
		t.Fatalf("pooled: %v, want UNKNOWN_TRANSACTION", err)
	}
	waiting := make(chan sendResult, 1)
	go func() {
		out, err := near.NewClient([]string{f.Endpoints()[0].URL()})
		if err != nil {
			waiting <- sendResult{nil, err}
			return
		}
		o, err := out.TxStatus(ctx, near.TxQuery{Hash: h, SenderID: relayerID, WaitUntil: near.TxFinal})
		waiting <- sendResult{o, err}
	}()
	f.StepN(1 + DefaultFinalityLag)
	r := result(t, waiting)
	if r.err != nil || r.out.FinalExecutionStatus != near.TxFinal || r.out.Kind() != near.OutcomeSucceeded {
		t.Fatalf("tx FINAL: %+v, %v", r.out, r.err)
	}
	if _, err := c.TxStatus(ctx, near.TxQuery{Hash: h, SenderID: bobID, WaitUntil: near.TxNone}); !isUnknownTx(err) {
		t.Fatalf("wrong sender: %v, want UNKNOWN_TRANSACTION", err)
	}
	out, err := c.TxStatus(ctx, near.TxQuery{SignedTx: raw, Receipts: true})
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Receipts []struct {
			ReceiverID string `json:"receiver_id"`
		} `json:"receipts"`
	}
	if err := json.Unmarshal(out.Raw, &v); err != nil || len(v.Receipts) != 1 || v.Receipts[0].ReceiverID != bobID {
		t.Fatalf("EXPERIMENTAL_tx_status receipts %s", out.Raw)
	}
}

// TestBroadcastMethods: broadcast_tx_async answers the hash, broadcast_tx_commit the outcome.
func TestBroadcastMethods(t *testing.T) {
	f, _ := testChain(t, Config{})
	url := f.Endpoints()[0].URL()
	raw, h := signTx(t, f, txSpec{})
	var got near.Hash
	if err := json.Unmarshal(rawCall(t, url, "broadcast_tx_async", []string{b64(raw)})["result"], &got); err != nil || got != h {
		t.Fatalf("broadcast_tx_async: %s, %v; want %s", got, err, h)
	}
	raw2, h2 := signTx(t, f, txSpec{nonce: nonceOf(t, f, relayerID, relayerKey) + 2})
	done := make(chan map[string]json.RawMessage, 1)
	go func() { done <- rawCall(t, url, "broadcast_tx_commit", []string{b64(raw2)}) }()
	awaitPending(t, f, h2)
	f.Step()
	var out near.TxOutcome
	if err := json.Unmarshal((<-done)["result"], &out); err != nil || out.TransactionHash == nil || *out.TransactionHash != h2 ||
		out.FinalExecutionStatus != near.TxExecutedOptimistic {
		t.Fatalf("broadcast_tx_commit: %+v, %v", out, err)
	}
	if k := kinds(f, h); !sameKinds(k, Landed) {
		t.Fatalf("async one: %v", k)
	}
}
