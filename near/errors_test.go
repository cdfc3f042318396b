package near

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

func TestParseInvalidTx(t *testing.T) {
	cases := []struct {
		in   string
		name string
		typ  string
	}{
		{`"Expired"`, "Expired", "*near.ExpiredError"},
		{`"InvalidSignature"`, "InvalidSignature", "*near.InvalidSignatureError"},
		{`"CostOverflow"`, "CostOverflow", "*near.InvalidTxError"},
		{`{"InvalidNonce":{"tx_nonce":1,"ak_nonce":2}}`, "InvalidNonce", "*near.InvalidNonceError"},
		{`{"InvalidNonce":{"tx_nonce":"x"}}`, "InvalidNonce", "*near.InvalidTxError"}, // unreadable fields: still a refusal
		{`{"NonceTooLarge":{"tx_nonce":1,"upper_bound":0}}`, "NonceTooLarge", "*near.NonceTooLargeError"},
		{`{"InvalidAccessKeyError":"RequiresFullAccess"}`, "InvalidAccessKeyError", "*near.InvalidAccessKeyError"},
		{`{"LackBalanceForState":{"signer_id":"a.near","amount":"1"}}`, "LackBalanceForState", "*near.InvalidTxError"},
		{`{"ActionsValidation":"DeleteActionMustBeFinal"}`, "ActionsValidation", "*near.InvalidTxError"},
	}
	for _, tc := range cases {
		it := ParseInvalidTx(json.RawMessage(tc.in))
		if it.InvalidTxName() != tc.name || fmt.Sprintf("%T", it) != tc.typ || it.Error() == "" {
			t.Errorf("%s: %T %s", tc.in, it, it.InvalidTxName())
		}
	}
	var ak *InvalidAccessKeyError
	if !errors.As(ParseInvalidTx(json.RawMessage(`{"InvalidAccessKeyError":"RequiresFullAccess"}`)), &ak) || ak.Kind != "RequiresFullAccess" {
		t.Fatalf("%+v", ak)
	}
}

func TestActionErrorInDataIsNotARefusal(t *testing.T) {
	// Old nodes answered broadcast_tx_commit with the execution failure as an RPC error: the
	// transaction landed, so nothing about it may read as refused.
	raw := &rpcErrorJSON{Code: -32000, Message: "Server error",
		Data: json.RawMessage(`{"TxExecutionError":{"ActionError":{"index":0,"kind":{"AccountDoesNotExist":{"account_id":"x.near"}}}}}`)}
	err := raw.toError("broadcast_tx_commit")
	if IsRefused(err) || IsOutcomeUnknown(err) || err.Unwrap() != nil {
		t.Fatalf("%v", err)
	}
}
