package relayer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
		{"unknown, sent a moment ago with no answer, later sends held", Flight{BlockHeight: 1000, Recent: true, Held: true}, 1001, nil, unknownTx, "resend"},
		{"unknown, held, past the window", Flight{BlockHeight: 1000, Recent: true, Held: true}, 1101, nil, unknownTx, "replace block-stale"},
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

// A transaction is dead only when two endpoints say so and none knows it; an endpoint that
// shows it landed is followed.
func TestConfirmDeath(t *testing.T) {
	dead := Witness{Decision: Decision{Verdict: Replace}}
	expired := Witness{Decision: Decision{Verdict: Replace, BlockStale: true}}
	silent := Witness{Decision: Decision{Verdict: Wait}} // no answer
	pooled := Witness{Decision: Decision{Verdict: Wait}, Outcome: &Outcome{Level: near.TxNone}}
	inBlock := Witness{Decision: Decision{Verdict: Wait, Landed: true}, Outcome: &Outcome{Level: near.TxIncluded}}
	final := Witness{Decision: Decision{Verdict: Succeeded}, Outcome: &Outcome{Level: near.TxFinal, Kind: near.OutcomeSucceeded}}
	for _, c := range []struct {
		name string
		ws   []Witness
		want string
	}{
		{"one liar, one that saw it land", []Witness{dead, final}, "succeeded"},
		{"one liar, one that has it in a block", []Witness{dead, inBlock}, "wait landed"},
		{"one liar, one that has it pooled", []Witness{dead, pooled}, "wait"},
		{"one says dead, the other does not answer", []Witness{dead, silent}, "wait"},
		{"two agree", []Witness{dead, dead}, "replace"},
		{"two agree, one past the window", []Witness{dead, expired, silent}, "replace block-stale"},
		{"two agree, a third knows it", []Witness{dead, dead, pooled}, "wait"},
		{"one endpoint only", []Witness{dead}, "wait"},
	} {
		if d, _ := ConfirmDeath(c.ws); d.String() != c.want {
			t.Errorf("%s: %s, want %s", c.name, d, c.want)
		}
	}
}

// A send waits until every smaller nonce held is admitted; a larger one does not hold it, and
// a nonce held again (its transaction lost by the node, sent again) holds the later ones anew.
func TestGate(t *testing.T) {
	var g gate
	for _, n := range []uint64{1, 2, 4, 3} {
		g.hold(n)
	}
	blocked := func(n uint64) bool {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		return errors.Is(g.wait(ctx, n), context.DeadlineExceeded)
	}
	if blocked(1) || !blocked(2) || !blocked(3) || !blocked(4) {
		t.Fatal("only nonce 1 may go first")
	}
	g.admit(1)
	if blocked(2) || !blocked(3) || !blocked(4) {
		t.Fatal("after 1: 2 must go, 3 and 4 wait for 2")
	}
	g.admit(2)
	if blocked(3) || !blocked(4) {
		t.Fatal("after 2: 3 must go, 4 waits for 3")
	}
	g.admit(3)
	g.admit(3) // idempotent
	if blocked(4) || !blocked(5) {
		t.Fatal("after 3: 4 must go, 5 waits for 4")
	}
	g.admit(4)
	g.hold(2) // found lost: sent again, ahead of anything later
	if blocked(2) || !blocked(4) || !g.isHeld(2) {
		t.Fatal("2 held again must hold 4")
	}
	// A waiter is woken by the admission, not by its deadline.
	done := make(chan error, 1)
	go func() { done <- g.wait(context.Background(), 4) }()
	g.admit(2)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiter was not woken by the admission")
	}
}

// A send answered admits its nonce, as does a refusal for good. No answer about it (503, 408,
// a dropped answer) leaves it held and has the same bytes sent again at once, up to
// sendRetries times; a send held past its time never goes out.
func TestSendOnceAdmitsOnAnswer(t *testing.T) {
	unknown := func(status int) error {
		return fmt.Errorf("near rpc send_tx: HTTP %d: %w", status, near.ErrOutcomeUnknown)
	}
	var g gate
	g.hold(1)
	g.hold(2)
	s := &scriptedSender{errs: []error{unknown(503), unknown(408), nil, &near.InvalidTxError{Name: "NotEnoughBalance"}}}
	if _, retried, err := sendOnce(context.Background(), &g, s, 1, []byte("one"), time.Second); err != nil || g.isHeld(1) || retried == nil || !strings.Contains(retried.Error(), "408") {
		t.Fatalf("answered at the third attempt: %v, retried %v, held %v", err, retried, g.isHeld(1))
	}
	if _, _, err := sendOnce(context.Background(), &g, s, 2, []byte("two"), time.Second); !near.IsRefused(err) || g.isHeld(2) {
		t.Fatalf("refused for good: %v, held %v", err, g.isHeld(2))
	}
	if got := strings.Join(s.sent, ","); got != "one,one,one,two" {
		t.Fatalf("sent %s", got)
	}

	// Never answered: held after sendRetries+1 attempts, and the later send stays back.
	g.hold(3)
	g.hold(4)
	s = &scriptedSender{errs: []error{unknown(503), unknown(503), unknown(503), unknown(503)}}
	if _, _, err := sendOnce(context.Background(), &g, s, 3, []byte("three"), time.Second); !near.IsOutcomeUnknown(err) || !g.isHeld(3) || len(s.sent) != sendRetries+1 {
		t.Fatalf("unanswered: %v, held %v, sent %v", err, g.isHeld(3), s.sent)
	}
	if _, _, err := sendOnce(context.Background(), &g, s, 4, []byte("four"), 20*time.Millisecond); !errors.Is(err, errHeld) || len(s.sent) != sendRetries+1 {
		t.Fatalf("a later send went out past a held nonce: %v, sent %v", err, s.sent)
	}

	// A refusal after an unanswered attempt does not speak for the first copy.
	g.admit(3)
	s = &scriptedSender{errs: []error{unknown(503), &near.InvalidTxError{Name: "NotEnoughBalance"}}}
	if _, _, err := sendOnce(context.Background(), &g, s, 4, []byte("four"), time.Second); near.IsRefused(err) || !near.IsOutcomeUnknown(err) {
		t.Fatalf("a refusal after an unanswered attempt: %v, taken as a refusal of the intent", err)
	}
}

// scriptedSender answers its sends with errs in turn (nil: success), then success, and records
// what it sent.
type scriptedSender struct {
	mu   sync.Mutex
	errs []error
	sent []string
}

func (s *scriptedSender) Close() error { return nil }

func (s *scriptedSender) SendTx(_ context.Context, raw []byte, _ near.TxExecutionStatus) (*near.TxOutcome, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, string(raw))
	var err error
	if len(s.errs) > 0 {
		err, s.errs = s.errs[0], s.errs[1:]
	}
	if err != nil {
		return nil, err
	}
	return &near.TxOutcome{FinalExecutionStatus: near.TxNone}, nil
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
	stored, err := encodeOutcome(&answer.Result, nil)
	if err != nil {
		t.Fatal(err)
	}
	if back, _, err := decodeOutcome(stored); err != nil || back.Kind != near.OutcomeFailed {
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
	enc, err := encodeOutcome(&near.TxOutcome{FinalExecutionStatus: o.Level, Status: o.Status}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if back, _, err := decodeOutcome(enc); err != nil || back.Kind != near.OutcomeFailed {
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
