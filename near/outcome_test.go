package near

import (
	"encoding/json"
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
