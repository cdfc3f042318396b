package fakenear

import (
	"encoding/json"

	"github.com/shardkeeper/shardkeeper/near"
)

// rpcError is the error member of a JSON-RPC answer as nearcore writes it: the structured
// fields (name, cause.name, cause.info) next to the legacy ones (code, message, data).
type rpcError struct {
	Name    string    `json:"name,omitempty"`
	Cause   *rpcCause `json:"cause,omitempty"`
	Code    int64     `json:"code"`
	Message string    `json:"message"`
	Data    any       `json:"data,omitempty"`
}

// rpcCause: info is absent for unit variants (TIMEOUT_ERROR) and {} for INVALID_TRANSACTION,
// whose details nearcore puts in data only.
type rpcCause struct {
	Name string          `json:"name"`
	Info json.RawMessage `json:"info,omitempty"`
}

const (
	codeServerError    = -32000
	codeParseError     = -32700
	codeMethodNotFound = -32601
)

func marshalInfo(v any) json.RawMessage {
	raw, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(`{}`)
	}
	return raw
}

// handlerError is a HANDLER_ERROR (nearcore's new_internal_or_handler_error for a handler's
// own errors): code -32000 "Server error".
func handlerError(cause string, info any, data any) *rpcError {
	e := &rpcError{Name: "HANDLER_ERROR", Cause: &rpcCause{Name: cause}, Code: codeServerError, Message: "Server error", Data: data}
	if info != nil {
		e.Cause.Info = marshalInfo(info)
	}
	return e
}

// errInvalidTransaction is a refused transaction: RpcTransactionError::InvalidTransaction, its
// InvalidTxError in data as {"TxExecutionError":{"InvalidTxError":…}}.
func errInvalidTransaction(e *txError) *rpcError {
	data := map[string]any{"TxExecutionError": map[string]json.RawMessage{"InvalidTxError": e.raw}}
	return handlerError("INVALID_TRANSACTION", struct{}{}, data)
}

// errTimeout is RpcTransactionError::TimeoutError.
func errTimeout() *rpcError { return handlerError("TIMEOUT_ERROR", nil, "Timeout") }

// errUnknownTransaction is RpcTransactionError::UnknownTransaction.
func errUnknownTransaction(h near.Hash) *rpcError {
	return handlerError("UNKNOWN_TRANSACTION",
		map[string]string{"requested_transaction_hash": h.String()},
		"Transaction "+h.String()+" doesn't exist")
}

func errUnknownAccount(id string, b *block) *rpcError {
	return handlerError("UNKNOWN_ACCOUNT", struct {
		RequestedAccountID string    `json:"requested_account_id"`
		BlockHeight        uint64    `json:"block_height"`
		BlockHash          near.Hash `json:"block_hash"`
	}{id, b.height, b.hash}, "account "+id+" does not exist while viewing")
}

// errUnknownBlock answers a block reference the fake does not have (never had, or forgot).
func errUnknownBlock(ref any, data string) *rpcError {
	return handlerError("UNKNOWN_BLOCK", map[string]any{"block_reference": ref}, data)
}

// errParse is a request that does not parse (RpcParseError): REQUEST_VALIDATION_ERROR.
func errParse(msg string) *rpcError {
	return &rpcError{
		Name: "REQUEST_VALIDATION_ERROR", Cause: &rpcCause{Name: "PARSE_ERROR", Info: marshalInfo(map[string]string{"error_message": msg})},
		Code: codeParseError, Message: "Parse error", Data: msg,
	}
}

func errMethodNotFound(method string) *rpcError {
	return &rpcError{
		Name: "REQUEST_VALIDATION_ERROR", Cause: &rpcCause{Name: "METHOD_NOT_FOUND", Info: marshalInfo(map[string]string{"method_name": method})},
		Code: codeMethodNotFound, Message: "Method not found", Data: method,
	}
}
