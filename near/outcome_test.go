package near

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOutcomeKinds(t *testing.T) {
	cases := []struct {
		result string
		kind   OutcomeKind
		value  string
		ok     bool
	}{
		{`{"final_execution_status":"NONE"}`, OutcomePending, "", false},
		{`{"final_execution_status":"INCLUDED","status":"Started"}`, OutcomePending, "", false},
		{`{"final_execution_status":"INCLUDED","status":"NotStarted"}`, OutcomePending, "", false},
		{`{"final_execution_status":"EXECUTED_OPTIMISTIC","status":{"SuccessValue":"eyJvayI6dHJ1ZX0="}}`, OutcomeSucceeded, `{"ok":true}`, true},
		{`{"final_execution_status":"FINAL","status":{"Failure":{"ActionError":{"index":0,"kind":{"AccountDoesNotExist":{"account_id":"x.near"}}}}}}`, OutcomeFailed, "", false},
		{`{"final_execution_status":"FINAL","status":{"SomethingNew":{}}}`, OutcomePending, "", false},
		{`{"final_execution_status":"FINAL","status":null}`, OutcomePending, "", false},
	}
	for _, tc := range cases {
		var o TxOutcome
		if err := json.Unmarshal([]byte(tc.result), &o); err != nil {
			t.Fatal(err)
		}
		if err := o.validate(); err != nil {
			t.Fatalf("%s: %v", tc.result, err)
		}
		v, ok := o.SuccessValue()
		if o.Kind() != tc.kind || ok != tc.ok || string(v) != tc.value {
			t.Errorf("%s: kind %v, value %q %v", tc.result, o.Kind(), v, ok)
		}
		if (o.Failure() != nil) != (tc.kind == OutcomeFailed) {
			t.Errorf("%s: failure %s", tc.result, o.Failure())
		}
	}
	for _, bad := range []string{`{}`, `{"final_execution_status":"DONE"}`} {
		var o TxOutcome
		if err := json.Unmarshal([]byte(bad), &o); err != nil {
			t.Fatal(err)
		}
		if o.validate() == nil {
			t.Errorf("%s validated", bad)
		}
	}
}

// resultOf returns the result member of a testdata/rpc answer.
func resultOf(t *testing.T, file string) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "rpc", file))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(b, &v); err != nil || v.Result == nil {
		t.Fatalf("%s: no result (%v)", file, err)
	}
	return v.Result
}

// A Delegate action's inner receipt fails outside the chain the final status follows: the
// status says SuccessValue and only receipts_outcome tells the failure.
func TestOutcomeDelegateReceiptFailure(t *testing.T) {
	var o TxOutcome
	if err := json.Unmarshal(resultOf(t, "tx_delegate_receipt_failure.json"), &o); err != nil {
		t.Fatal(err)
	}
	if o.Kind() != OutcomeSucceeded || o.Failure() != nil {
		t.Fatalf("status: kind %v, failure %s", o.Kind(), o.Failure())
	}
	if len(o.Receipts) != 3 || o.Receipts[1].ID != "FmiQSKCzinb4teE8VzGNqXXph5tcnjmyttEDD78Bfpyh" ||
		o.Receipts[1].Outcome.ExecutorID != "app.testnet" || o.Receipts[1].BlockHash != "5rNnxom2PJaTwxQhnJAC5cxKgDnVRzcFwrCcfGLYFFpn" ||
		len(o.Receipts[0].Outcome.ReceiptIDs) != 1 {
		t.Fatalf("receipts: %+v", o.Receipts)
	}
	if o.Receipts[0].Failure() != nil || o.Receipts[2].Failure() != nil {
		t.Fatal("a succeeded receipt reports a failure")
	}
	f := o.ReceiptsFailure()
	if !strings.Contains(string(f), `"ActionError"`) || !strings.Contains(string(f), "greeting too long") {
		t.Fatalf("receipts failure %s", f)
	}
	if o.KindWithReceipts() != OutcomeFailed {
		t.Fatalf("kind with receipts %v", o.KindWithReceipts())
	}
}

func TestOutcomeKindWithReceipts(t *testing.T) {
	for _, tc := range []struct {
		file string
		kind OutcomeKind
	}{
		{"tx_executed_failure.json", OutcomeFailed},      // the status fails already
		{"send_tx_final_success.json", OutcomeSucceeded}, // every receipt succeeded
		{"send_tx_none.json", OutcomePending},            // no receipts yet
	} {
		var o TxOutcome
		if err := json.Unmarshal(resultOf(t, tc.file), &o); err != nil {
			t.Fatal(err)
		}
		if o.KindWithReceipts() != tc.kind || o.KindWithReceipts() != o.Kind() {
			t.Errorf("%s: kind with receipts %v, kind %v, want %v", tc.file, o.KindWithReceipts(), o.Kind(), tc.kind)
		}
	}
	// Failures in receipts do not make a pending transaction final.
	o := TxOutcome{Status: json.RawMessage(`"Started"`), Receipts: []ReceiptOutcome{{}}}
	o.Receipts[0].Outcome.Status = json.RawMessage(`{"Failure":{"ActionError":{}}}`)
	if o.KindWithReceipts() != OutcomePending || o.ReceiptsFailure() == nil {
		t.Errorf("started: %v, %s", o.KindWithReceipts(), o.ReceiptsFailure())
	}
}
