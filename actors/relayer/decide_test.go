package relayer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/near"
)

func outcome(level near.TxExecutionStatus, status string) *Outcome {
	o := &near.TxOutcome{FinalExecutionStatus: level}
	if status != "" {
		o.Status = json.RawMessage(status)
	}
	return &Outcome{Level: level, Kind: o.Kind(), Status: o.Status}
}

var (
	errLostAnswer = fmt.Errorf("dropped: %w", near.ErrOutcomeUnknown)
	timeoutErr    = &near.TimeoutError{}
	unknownTx     = &near.UnknownTransactionError{Hash: "x"}
	invalidNon    = &near.InvalidNonceError{TxNonce: 5, AkNonce: 9}
	expired       = &near.ExpiredError{}
	noBalance     = &near.NotEnoughBalanceError{SignerID: "relay.near"}
	badReceiver   = &near.InvalidReceiverIDError{ReceiverID: "X"}
	// A refusal that an earlier copy's unknown outcome contradicts: not a proof of anything.
	refusedAfterUnknown = errors.Join(noBalance, errLostAnswer)
	nonceNoNumbers      = &near.InvalidTxError{Name: "InvalidNonce"}
	success             = `{"SuccessValue":""}`
	failure             = `{"Failure":{"ActionError":{"index":0,"kind":{"AccountDoesNotExist":{"account_id":"x.near"}}}}}`
)

func TestDecideSend(t *testing.T) {
	f := Flight{Nonce: 5, BlockHeight: 1000}
	for _, c := range []struct {
		name string
		o    *Outcome
		err  error
		want string
	}{
		{"accepted, included", outcome(near.TxIncluded, ""), nil, "query"},
		{"accepted, final success", outcome(near.TxFinal, success), nil, "succeeded"},
		{"accepted, final failure", outcome(near.TxFinal, failure), nil, "failed"},
		{"optimistic success is not final", outcome(near.TxExecutedOptimistic, success), nil, "query"},
		{"answer lost", nil, errLostAnswer, "query"},
		{"node timed out", nil, timeoutErr, "query"},
		{"invalid nonce", nil, invalidNon, "query stale ak_nonce=9"},
		{"invalid nonce without numbers", nil, nonceNoNumbers, "query stale nonce-unknown"},
		{"expired", nil, expired, "query stale block-stale"},
		{"not enough balance", nil, noBalance, "rejected NotEnoughBalance"},
		{"invalid receiver", nil, badReceiver, "rejected InvalidReceiverId"},
		{"refusal after an unknown copy", nil, refusedAfterUnknown, "query"},
		{"no answer about it", nil, context.Canceled, "wait"},
	} {
		if got := DecideSend(f, c.o, c.err).String(); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestDecideStatus(t *testing.T) {
	const window = 100
	for _, c := range []struct {
		name string
		f    Flight
		head uint64
		o    *Outcome
		err  error
		want string
	}{
		{"final success", Flight{BlockHeight: 1000}, 1001, outcome(near.TxFinal, success), nil, "succeeded"},
		{"final failure", Flight{BlockHeight: 1000}, 1001, outcome(near.TxFinal, failure), nil, "failed"},
		{"executed counts as final", Flight{BlockHeight: 1000}, 1001, outcome(near.TxExecuted, success), nil, "succeeded"},
		{"known, not final", Flight{BlockHeight: 1000}, 1001, outcome(near.TxIncluded, ""), nil, "wait landed"},
		{"known, not included yet", Flight{BlockHeight: 1000}, 1001, outcome(near.TxNone, ""), nil, "wait"},
		{"unknown, within the window", Flight{BlockHeight: 1000}, 1100, nil, unknownTx, "resend"},
		{"unknown, head behind the block", Flight{BlockHeight: 1000}, 900, nil, unknownTx, "resend"},
		{"unknown, head unknown", Flight{BlockHeight: 1000}, 0, nil, unknownTx, "resend"},
		{"unknown, past the window", Flight{BlockHeight: 1000}, 1101, nil, unknownTx, "replace block-stale"},
		{"unknown, sent a moment ago", Flight{BlockHeight: 1000, Recent: true}, 1001, nil, unknownTx, "wait"},
		{"unknown, sent a moment ago, past the window", Flight{BlockHeight: 1000, Recent: true}, 1101, nil, unknownTx, "replace block-stale"},
		{"unknown, sent a moment ago, refused before", Flight{BlockHeight: 1000, Recent: true, Stale: true}, 1001, nil, unknownTx, "replace"},
		{"refused: invalid nonce", Flight{BlockHeight: 1000}, 1001, nil, invalidNon, "replace stale ak_nonce=9"},
		{"refused: expired", Flight{BlockHeight: 1000}, 1001, nil, expired, "replace stale block-stale"},
		{"refused: not enough balance", Flight{BlockHeight: 1000}, 1001, nil, noBalance, "rejected NotEnoughBalance"},
		{"refusal after an unknown copy", Flight{BlockHeight: 1000}, 1001, nil, refusedAfterUnknown, "wait"},
		{"unknown after a stale refusal", Flight{BlockHeight: 1000, Stale: true}, 1001, nil, unknownTx, "replace"},
		{"stale, but it landed", Flight{BlockHeight: 1000, Stale: true}, 1001, outcome(near.TxFinal, success), nil, "succeeded"},
		{"node timed out", Flight{BlockHeight: 1000, Stale: true}, 5000, nil, timeoutErr, "wait"},
		{"no answer", Flight{BlockHeight: 1000}, 5000, nil, errLostAnswer, "wait"},
		{"unknown tx, but another endpoint's fate open", Flight{BlockHeight: 1000}, 5000, nil, errors.Join(unknownTx, errLostAnswer), "wait"},
	} {
		if got := DecideStatus(c.f, c.head, window, c.o, c.err).String(); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestNextNonceAndSignable(t *testing.T) {
	for _, c := range []struct{ used, chain, want uint64 }{{0, 0, 1}, {0, 41, 42}, {50, 41, 51}, {50, 60, 61}} {
		if got := NextNonce(c.used, c.chain); got != c.want {
			t.Errorf("NextNonce(%d, %d) = %d, want %d", c.used, c.chain, got, c.want)
		}
	}
	for _, c := range []struct {
		nonce, block             bool
		queued, inFlight, max, n int
	}{
		{false, true, 5, 0, 32, 0}, {true, false, 5, 0, 32, 0}, {true, true, 5, 0, 32, 5},
		{true, true, 50, 30, 32, 2}, {true, true, 50, 32, 32, 0}, {true, true, 50, 40, 32, 0}, {true, true, 0, 0, 32, 0},
	} {
		if got := Signable(c.nonce, c.block, c.queued, c.inFlight, c.max); got != c.n {
			t.Errorf("Signable%v = %d, want %d", c, got, c.n)
		}
	}
}

// A send waits for the sends of smaller nonces taken before it, until their requests are
// written or they end; a larger nonce, or one taken after it, does not hold it.
func TestSequencer(t *testing.T) {
	var s sequencer
	t1, t2, t4 := s.take(1), s.take(2), s.take(4)
	t3 := s.take(3) // taken after 4: it waits for 1 and 2, and does not hold 4
	blocked := func(tk *ticket) bool {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		return errors.Is(tk.wait(ctx), context.DeadlineExceeded)
	}
	if !blocked(t2) || !blocked(t3) || !blocked(t4) {
		t.Fatal("a send went ahead of nonce 1")
	}
	t1.release()
	if blocked(t2) || !blocked(t3) || !blocked(t4) {
		t.Fatal("after 1: 2 must go, 3 and 4 wait for 2")
	}
	t2.release()
	if blocked(t3) || blocked(t4) {
		t.Fatal("after 2: 3 and 4 must go")
	}
	t3.release()
	t3.release() // idempotent
	t4.release()
	if len(s.pending) != 0 {
		t.Fatalf("pending after release: %v", s.pending)
	}
}

// A re-send of a transaction that landed earlier is refused for its nonce, or as Expired once
// its block hash left the validity window (NEAR checks expiry before it looks for the
// transaction): no stale send refusal may lead to a new signature before a status answer
// says the transaction is unknown.
func TestStaleSendRefusalNeverReplaces(t *testing.T) {
	const window = 100
	landed := Flight{Nonce: 5, BlockHeight: 1000}
	stale := []error{
		expired, invalidNon, nonceNoNumbers,
		&near.NonceTooLargeError{TxNonce: 5, UpperBound: 1},
		&near.InvalidTxError{Name: "InvalidChain"},
	}
	for _, err := range stale {
		d := DecideSend(landed, nil, err)
		if d.Verdict != Query || !d.Stale {
			t.Errorf("send refused with %v: %s, want a query of a stale flight", err, d)
		}
		f := landed
		f.Stale = d.Stale
		// Far past the window: only the status answer may tell the transaction dead.
		for _, a := range []struct {
			name string
			o    *Outcome
			err  error
			want string
		}{
			{"landed", outcome(near.TxFinal, success), nil, "succeeded"},
			{"landed, not final", outcome(near.TxIncluded, ""), nil, "wait landed"},
			{"node timed out", nil, timeoutErr, "wait"},
			{"no answer", nil, errLostAnswer, "wait"},
			{"unknown here, open elsewhere", nil, errors.Join(unknownTx, errLostAnswer), "wait"},
			{"unknown", nil, unknownTx, "replace"},
		} {
			if got := DecideStatus(f, 5000, window, a.o, a.err).String(); got != a.want {
				t.Errorf("send refused with %v, then %s: %s, want %s", err, a.name, got, a.want)
			}
		}
	}
	if got := DecideSend(landed, nil, expired).String(); got != "query stale block-stale" {
		t.Errorf("re-send answered Expired: %s, want a query", got)
	}
}

// A Delegate action's inner receipt fails under a SuccessValue status: the intent fails, with
// the receipt's failure as its outcome.
func TestDelegateReceiptFailure(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "near", "testdata", "rpc", "tx_delegate_receipt_failure.json"))
	if err != nil {
		t.Fatal(err)
	}
	var answer struct {
		Result near.TxOutcome `json:"result"`
	}
	if err := json.Unmarshal(b, &answer); err != nil {
		t.Fatal(err)
	}
	if answer.Result.Kind() != near.OutcomeSucceeded {
		t.Fatalf("the status should hide the failure: %s", answer.Result.Status)
	}
	// What the actor stores for the answer (encodeOutcome) reads back as failed.
	stored, err := encodeOutcome(&answer.Result)
	if err != nil {
		t.Fatal(err)
	}
	if back, err := decodeOutcome(stored); err != nil || back.Kind != near.OutcomeFailed {
		t.Fatalf("stored outcome %s reads back as %+v, %v; want failed", stored, back, err)
	}
	o := OutcomeOf(&answer.Result)
	f := Flight{Nonce: 5, BlockHeight: 1000}
	if got := DecideStatus(f, 1001, 100, o, nil).String(); got != "failed" {
		t.Errorf("status: %s, want failed", got)
	}
	if got := DecideSend(f, o, nil).String(); got != "failed" {
		t.Errorf("send: %s, want failed", got)
	}
	var st struct {
		Failure json.RawMessage `json:"Failure"`
	}
	if json.Unmarshal(o.Status, &st) != nil || !strings.Contains(string(st.Failure), "greeting too long") {
		t.Errorf("outcome %s, want the receipt's failure", o.Status)
	}
	// Stored the way the actor stores an outcome, the failed status keeps the verdict.
	enc, err := encodeOutcome(&near.TxOutcome{FinalExecutionStatus: o.Level, Status: o.Status})
	if err != nil {
		t.Fatal(err)
	}
	if back, err := decodeOutcome(enc); err != nil || back.Kind != near.OutcomeFailed {
		t.Errorf("decoded outcome %+v, %v", back, err)
	}
	// Without receipts, or with all of them succeeded, nothing changes.
	if o := OutcomeOf(&near.TxOutcome{FinalExecutionStatus: near.TxFinal, Status: json.RawMessage(success)}); o.Kind != near.OutcomeSucceeded || string(o.Status) != success {
		t.Errorf("plain success: %+v", o)
	}
	if OutcomeOf(nil) != nil {
		t.Error("an outcome of no answer")
	}
}
