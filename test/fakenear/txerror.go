package fakenear

import (
	"encoding/json"
	"fmt"

	"github.com/shardkeeper/shardkeeper/near"
)

// txError is a refusal of a transaction: one variant of nearcore's InvalidTxError, kept as the
// JSON nearcore writes for it — a bare name ("Expired") or {"Variant":{fields}} — so that the
// RPC error, the ledger and the tests all carry the same bytes.
type txError struct {
	name string
	raw  json.RawMessage
}

func (e *txError) Error() string { return string(e.raw) }

// variant marshals NEAR's externally tagged enum form: "Name" without fields, else
// {"Name":fields}. Field structs declare their JSON in nearcore's field order.
func variant(name string, fields any) json.RawMessage {
	var v any = name
	if fields != nil {
		v = map[string]any{name: fields}
	}
	raw, err := json.Marshal(v)
	if err != nil {
		// Every fields value here is a plain struct of strings and numbers.
		panic(fmt.Sprintf("fakenear: marshal %s: %v", name, err))
	}
	return raw
}

func invalidTx(name string, fields any) *txError {
	return &txError{name: name, raw: variant(name, fields)}
}

func errExpired() *txError          { return invalidTx("Expired", nil) }
func errInvalidSignature() *txError { return invalidTx("InvalidSignature", nil) }

func errInvalidNonce(txNonce, akNonce uint64) *txError {
	return invalidTx("InvalidNonce", struct {
		TxNonce uint64 `json:"tx_nonce"`
		AkNonce uint64 `json:"ak_nonce"`
	}{txNonce, akNonce})
}

func errNonceTooLarge(txNonce, upperBound uint64) *txError {
	return invalidTx("NonceTooLarge", struct {
		TxNonce    uint64 `json:"tx_nonce"`
		UpperBound uint64 `json:"upper_bound"`
	}{txNonce, upperBound})
}

func errSignerDoesNotExist(signer string) *txError {
	return invalidTx("SignerDoesNotExist", struct {
		SignerID string `json:"signer_id"`
	}{signer})
}

func errInvalidSignerID(signer string) *txError {
	return invalidTx("InvalidSignerId", struct {
		SignerID string `json:"signer_id"`
	}{signer})
}

func errInvalidReceiverID(receiver string) *txError {
	return invalidTx("InvalidReceiverId", struct {
		ReceiverID string `json:"receiver_id"`
	}{receiver})
}

func errNotEnoughBalance(signer string, balance, cost near.U128) *txError {
	return invalidTx("NotEnoughBalance", struct {
		SignerID string    `json:"signer_id"`
		Balance  near.U128 `json:"balance"`
		Cost     near.U128 `json:"cost"`
	}{signer, balance, cost})
}

// errAccessKey wraps an InvalidAccessKeyError variant (see the accessKey* helpers).
func errAccessKey(kind json.RawMessage) *txError { return invalidTx("InvalidAccessKeyError", kind) }

func errActionsValidation(kind json.RawMessage) *txError { return invalidTx("ActionsValidation", kind) }

// The variants of InvalidAccessKeyError, shared by transactions and delegate actions.

func akNotFound(accountID string, pk near.PublicKey) json.RawMessage {
	return variant("AccessKeyNotFound", struct {
		AccountID string         `json:"account_id"`
		PublicKey near.PublicKey `json:"public_key"`
	}{accountID, pk})
}

func akReceiverMismatch(txReceiver, akReceiver string) json.RawMessage {
	return variant("ReceiverMismatch", struct {
		TxReceiver string `json:"tx_receiver"`
		AkReceiver string `json:"ak_receiver"`
	}{txReceiver, akReceiver})
}

func akMethodNameMismatch(method string) json.RawMessage {
	return variant("MethodNameMismatch", struct {
		MethodName string `json:"method_name"`
	}{method})
}

func akRequiresFullAccess() json.RawMessage      { return variant("RequiresFullAccess", nil) }
func akDepositWithFunctionCall() json.RawMessage { return variant("DepositWithFunctionCall", nil) }

func akNotEnoughAllowance(accountID string, pk near.PublicKey, allowance, cost near.U128) json.RawMessage {
	return variant("NotEnoughAllowance", struct {
		AccountID string         `json:"account_id"`
		PublicKey near.PublicKey `json:"public_key"`
		Allowance near.U128      `json:"allowance"`
		Cost      near.U128      `json:"cost"`
	}{accountID, pk, allowance, cost})
}

// actionFailure is the Failure status of a receipt whose action index failed with kind (an
// ActionErrorKind variant): {"Failure":{"ActionError":{"index":i,"kind":…}}}.
func actionFailure(index int, kind json.RawMessage) json.RawMessage {
	raw, err := json.Marshal(map[string]any{"Failure": map[string]any{"ActionError": struct {
		Index int             `json:"index"`
		Kind  json.RawMessage `json:"kind"`
	}{index, kind}}})
	if err != nil {
		panic(fmt.Sprintf("fakenear: marshal action error: %v", err))
	}
	return raw
}

// successValue is the status of a receipt that ran every action and returned nothing.
var successValue = json.RawMessage(`{"SuccessValue":""}`)
