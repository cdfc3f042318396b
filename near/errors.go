package near

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrOutcomeUnknown is wrapped by every failure after which a sent transaction may or may
// not have been accepted: no answer (connection refused after the request may have been
// written, dropped, timed out), HTTP 408, 429 and 5xx, an unreadable answer, and the node's
// own TIMEOUT_ERROR and INTERNAL_ERROR. The only safe reaction is to learn the transaction's
// fate (query its status, send the same bytes again), never to sign a replacement.
var ErrOutcomeUnknown = errors.New("outcome unknown: the transaction may or may not have been accepted")

// IsOutcomeUnknown reports whether err leaves open whether the transaction was accepted.
func IsOutcomeUnknown(err error) bool { return errors.Is(err, ErrOutcomeUnknown) }

// IsRefused reports whether err proves that NEAR refused the transaction sent in this call:
// a node answered with one of NEAR's InvalidTxError variants (an InvalidTx error), and no
// attempt of the call left the outcome unknown. It speaks for this send only, never for a
// copy of the same transaction sent earlier, which may have landed before. Such a re-send
// is refused with InvalidNonce when wait_until is NONE; with another wait_until, nearcore
// answers an InvalidNonce by looking the transaction up and returns its status if the node
// knows it. But nearcore checks the block hash's age before the nonce, so once the hash has
// left the validity window the re-send is refused with Expired, whatever wait_until asks and
// without that look-up. Only a status answer, by hash or by the signed bytes, tells whether
// an earlier copy landed.
func IsRefused(err error) bool {
	if err == nil || IsOutcomeUnknown(err) {
		return false
	}
	var it InvalidTx
	return errors.As(err, &it)
}

// IsStale reports whether err is a refusal for the transaction's nonce or block hash
// (InvalidNonce, NonceTooLarge, Expired, InvalidChain): the same actions signed again with a
// fresh nonce and block hash may be accepted. Other refusals (NotEnoughBalance,
// InvalidReceiverId, ...) would refuse a new signature just the same.
//
// A stale refusal of a re-send never proves the earlier copy dead: that copy may have landed
// and used the nonce (InvalidNonce), or landed while its block hash was recent (Expired, as
// nearcore checks the expiry first). Signing the actions again is safe only once a status
// query, by hash or by the signed bytes, answers that the transaction is unknown.
func IsStale(err error) bool {
	if !IsRefused(err) {
		return false
	}
	var it InvalidTx
	errors.As(err, &it)
	switch it.InvalidTxName() {
	case "InvalidNonce", "NonceTooLarge", "Expired", "InvalidChain":
		return true
	}
	return false
}

// InvalidTx is implemented by the errors of NEAR's InvalidTxError enum: the node refused the
// transaction at validation, before it could land.
type InvalidTx interface {
	error
	// InvalidTxName is NEAR's name of the variant, such as "NotEnoughBalance".
	InvalidTxName() string
}

// InvalidNonceError: the access key's nonce AkNonce is not below the transaction's TxNonce,
// so some transaction with that nonce or a later one was already accepted.
type InvalidNonceError struct {
	TxNonce uint64 `json:"tx_nonce"`
	AkNonce uint64 `json:"ak_nonce"`
}

func (e *InvalidNonceError) Error() string {
	return fmt.Sprintf("InvalidNonce: transaction nonce %d must be larger than the access key's nonce %d", e.TxNonce, e.AkNonce)
}

// InvalidTxName implements InvalidTx.
func (e *InvalidNonceError) InvalidTxName() string { return "InvalidNonce" }

// NonceTooLargeError: TxNonce is beyond UpperBound (the block height times 10^6), the limit
// nearcore puts on how far ahead a nonce may jump.
type NonceTooLargeError struct {
	TxNonce    uint64 `json:"tx_nonce"`
	UpperBound uint64 `json:"upper_bound"`
}

func (e *NonceTooLargeError) Error() string {
	return fmt.Sprintf("NonceTooLarge: transaction nonce %d is above the upper bound %d", e.TxNonce, e.UpperBound)
}

// InvalidTxName implements InvalidTx.
func (e *NonceTooLargeError) InvalidTxName() string { return "NonceTooLarge" }

// ExpiredError: the transaction's block hash is too old.
type ExpiredError struct{}

func (e *ExpiredError) Error() string { return "Expired: the transaction's block hash is too old" }

// InvalidTxName implements InvalidTx.
func (e *ExpiredError) InvalidTxName() string { return "Expired" }

// InvalidSignatureError: the signature does not verify against the transaction's key.
type InvalidSignatureError struct{}

func (e *InvalidSignatureError) Error() string {
	return "InvalidSignature: the signature does not verify"
}

// InvalidTxName implements InvalidTx.
func (e *InvalidSignatureError) InvalidTxName() string { return "InvalidSignature" }

// NotEnoughBalanceError: SignerID's Balance cannot cover the transaction's Cost.
type NotEnoughBalanceError struct {
	SignerID string `json:"signer_id"`
	Balance  U128   `json:"balance"`
	Cost     U128   `json:"cost"`
}

func (e *NotEnoughBalanceError) Error() string {
	return fmt.Sprintf("NotEnoughBalance: %s has %s yoctoNEAR, the transaction costs %s", e.SignerID, e.Balance, e.Cost)
}

// InvalidTxName implements InvalidTx.
func (e *NotEnoughBalanceError) InvalidTxName() string { return "NotEnoughBalance" }

// InvalidReceiverIDError: the receiver id is not a valid account id.
type InvalidReceiverIDError struct {
	ReceiverID string `json:"receiver_id"`
}

func (e *InvalidReceiverIDError) Error() string {
	return fmt.Sprintf("InvalidReceiverId: %s is not a valid account id", clip(e.ReceiverID))
}

// InvalidTxName implements InvalidTx.
func (e *InvalidReceiverIDError) InvalidTxName() string { return "InvalidReceiverId" }

// SignerDoesNotExistError: the signer account does not exist.
type SignerDoesNotExistError struct {
	SignerID string `json:"signer_id"`
}

func (e *SignerDoesNotExistError) Error() string {
	return fmt.Sprintf("SignerDoesNotExist: account %s does not exist", clip(e.SignerID))
}

// InvalidTxName implements InvalidTx.
func (e *SignerDoesNotExistError) InvalidTxName() string { return "SignerDoesNotExist" }

// InvalidAccessKeyError: the access key is missing or does not permit the transaction. Kind
// is NEAR's variant (AccessKeyNotFound, ReceiverMismatch, MethodNameMismatch,
// RequiresFullAccess, NotEnoughAllowance, DepositWithFunctionCall); Detail its fields, if any.
type InvalidAccessKeyError struct {
	Kind   string
	Detail json.RawMessage
}

func (e *InvalidAccessKeyError) Error() string {
	if len(e.Detail) == 0 {
		return "InvalidAccessKeyError: " + e.Kind
	}
	return "InvalidAccessKeyError: " + e.Kind + " " + string(e.Detail)
}

// InvalidTxName implements InvalidTx.
func (e *InvalidAccessKeyError) InvalidTxName() string { return "InvalidAccessKeyError" }

// InvalidTxError is any other refusal (InvalidChain, CostOverflow, LackBalanceForState,
// ActionsValidation, ShardCongested, ...): Name is NEAR's variant, Detail its fields if any.
type InvalidTxError struct {
	Name   string
	Detail json.RawMessage
}

func (e *InvalidTxError) Error() string {
	if len(e.Detail) == 0 {
		return e.Name
	}
	return e.Name + ": " + string(e.Detail)
}

// InvalidTxName implements InvalidTx.
func (e *InvalidTxError) InvalidTxName() string { return e.Name }

// TimeoutError is nearcore's TIMEOUT_ERROR: the node did not see the transaction reach the
// requested status in its polling time (10 s by default). The transaction may still land, so
// it wraps ErrOutcomeUnknown. Cause is the node's explanation when it gives one
// (NOT_OBSERVED, PENDING, DOES_NOT_TRACK_SHARD, ERROR; empty from older nodes).
type TimeoutError struct {
	Cause string
}

func (e *TimeoutError) Error() string {
	if e.Cause == "" {
		return "TIMEOUT_ERROR: the node timed out waiting for the transaction"
	}
	return "TIMEOUT_ERROR (" + e.Cause + "): the node timed out waiting for the transaction"
}

// Unwrap returns ErrOutcomeUnknown.
func (e *TimeoutError) Unwrap() error { return ErrOutcomeUnknown }

// InternalError is the node's INTERNAL_ERROR: it failed on its side, outcome unknown.
type InternalError struct {
	Message string
}

func (e *InternalError) Error() string { return "INTERNAL_ERROR: " + e.Message }

// Unwrap returns ErrOutcomeUnknown.
func (e *InternalError) Unwrap() error { return ErrOutcomeUnknown }

// UnknownTransactionError is nearcore's UNKNOWN_TRANSACTION: the node does not know the
// transaction Hash (yet, or any more). It proves nothing about its fate: the transaction may
// sit in another node's pool, or NEAR may have dropped it.
type UnknownTransactionError struct {
	Hash string
}

func (e *UnknownTransactionError) Error() string {
	return "UNKNOWN_TRANSACTION: the node does not know transaction " + e.Hash
}

// UnknownAccessKeyError: the viewed access key does not exist on the account (at the block).
type UnknownAccessKeyError struct {
	PublicKey   string
	BlockHeight uint64
	BlockHash   string
}

func (e *UnknownAccessKeyError) Error() string {
	return fmt.Sprintf("UNKNOWN_ACCESS_KEY: access key %s does not exist at block %d", e.PublicKey, e.BlockHeight)
}

// UnknownAccountError: the viewed account does not exist (at the block).
type UnknownAccountError struct {
	AccountID   string
	BlockHeight uint64
	BlockHash   string
}

func (e *UnknownAccountError) Error() string {
	return fmt.Sprintf("UNKNOWN_ACCOUNT: account %s does not exist at block %d", clip(e.AccountID), e.BlockHeight)
}

// RPCError is a JSON-RPC error a node answered. It keeps nearcore's fields as they came and
// unwraps to the typed error they describe, when there is one (errors.As finds it).
type RPCError struct {
	Method string
	// Code and Message are JSON-RPC's (nearcore: -32000 "Server error" for most errors).
	Code    int64
	Message string
	// Name is error.name (HANDLER_ERROR, REQUEST_VALIDATION_ERROR, INTERNAL_ERROR); Cause is
	// error.cause.name (INVALID_TRANSACTION, TIMEOUT_ERROR, ...) and Info error.cause.info.
	// All three are empty from nodes older than structured errors.
	Name  string
	Cause string
	Info  json.RawMessage
	// Data is the legacy error.data: for a refused transaction the InvalidTxError nested in
	// {"TxExecutionError":{"InvalidTxError":…}}, otherwise often a message string.
	Data json.RawMessage

	typed error
}

func (e *RPCError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "near rpc %s: ", e.Method)
	if e.typed != nil {
		b.WriteString(e.typed.Error())
		return b.String()
	}
	if e.Cause != "" {
		fmt.Fprintf(&b, "%s/%s", e.Name, e.Cause)
	} else if e.Name != "" {
		b.WriteString(e.Name)
	} else {
		fmt.Fprintf(&b, "%d %s", e.Code, e.Message)
	}
	if len(e.Data) > 0 && string(e.Data) != "null" {
		const max = 300
		d := string(e.Data)
		if len(d) > max {
			d = d[:max] + "…"
		}
		b.WriteString(": " + d)
	}
	return b.String()
}

// Unwrap returns the typed error, if any.
func (e *RPCError) Unwrap() error { return e.typed }

// rpcErrorJSON is the error member of a JSON-RPC response as nearcore writes it: the
// structured fields (name, cause) next to the legacy ones (code, message, data).
type rpcErrorJSON struct {
	Name  string `json:"name"`
	Cause *struct {
		Name string          `json:"name"`
		Info json.RawMessage `json:"info"`
	} `json:"cause"`
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// toError builds the RPCError with its typed error.
func (r *rpcErrorJSON) toError(method string) *RPCError {
	e := &RPCError{Method: method, Code: r.Code, Message: r.Message, Name: r.Name, Data: r.Data}
	if r.Cause != nil {
		e.Cause, e.Info = r.Cause.Name, r.Cause.Info
	}
	e.typed = classify(e)
	return e
}

// classify finds the typed error an RPC error describes, or nil.
func classify(e *RPCError) error {
	// A refused transaction: the InvalidTxError rides in data (current nodes send
	// cause INVALID_TRANSACTION with an empty info next to it; nodes older than
	// structured errors send data alone).
	if it, ok := invalidTxIn(e.Data); ok {
		return it
	}
	if it, ok := invalidTxIn(e.Info); ok {
		return it
	}
	var info struct {
		Cause                    string `json:"cause"`
		RequestedTransactionHash string `json:"requested_transaction_hash"`
		ErrorMessage             string `json:"error_message"`
		DebugInfo                string `json:"debug_info"`
		PublicKey                string `json:"public_key"`
		RequestedAccountID       string `json:"requested_account_id"`
		BlockHeight              uint64 `json:"block_height"`
		BlockHash                string `json:"block_hash"`
	}
	if len(e.Info) > 0 {
		_ = json.Unmarshal(e.Info, &info) // a mismatched info leaves the fields empty
	}
	switch e.Cause {
	case "INVALID_TRANSACTION":
		// The details did not come or did not parse; it is a refusal all the same.
		return &InvalidTxError{Name: "InvalidTransaction", Detail: e.Data}
	case "TIMEOUT_ERROR":
		return &TimeoutError{Cause: info.Cause}
	case "UNKNOWN_TRANSACTION":
		return &UnknownTransactionError{Hash: info.RequestedTransactionHash}
	case "INTERNAL_ERROR":
		return &InternalError{Message: firstNonEmpty(info.ErrorMessage, info.DebugInfo, dataString(e.Data))}
	case "UNKNOWN_ACCESS_KEY":
		return &UnknownAccessKeyError{PublicKey: info.PublicKey, BlockHeight: info.BlockHeight, BlockHash: info.BlockHash}
	case "UNKNOWN_ACCOUNT":
		return &UnknownAccountError{AccountID: info.RequestedAccountID, BlockHeight: info.BlockHeight, BlockHash: info.BlockHash}
	}
	if e.Name == "INTERNAL_ERROR" {
		return &InternalError{Message: firstNonEmpty(info.ErrorMessage, dataString(e.Data))}
	}
	if e.Name == "" {
		// Nodes older than structured errors: ServerError serialized into data.
		switch d := dataString(e.Data); {
		case d == "Timeout":
			return &TimeoutError{}
		case d == "Closed" || d == "InternalError":
			return &InternalError{Message: d}
		case strings.HasPrefix(d, "Transaction ") && strings.HasSuffix(d, " doesn't exist"):
			return &UnknownTransactionError{Hash: strings.TrimSuffix(strings.TrimPrefix(d, "Transaction "), " doesn't exist")}
		}
	}
	return nil
}

// invalidTxIn finds {"TxExecutionError":{"InvalidTxError":X}} in raw and parses X.
func invalidTxIn(raw json.RawMessage) (InvalidTx, bool) {
	var v struct {
		TxExecutionError *struct {
			InvalidTxError json.RawMessage `json:"InvalidTxError"`
		} `json:"TxExecutionError"`
	}
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &v) != nil ||
		v.TxExecutionError == nil || len(v.TxExecutionError.InvalidTxError) == 0 {
		return nil, false
	}
	return ParseInvalidTx(v.TxExecutionError.InvalidTxError), true
}

// ParseInvalidTx turns NEAR's JSON of an InvalidTxError (a bare variant name such as
// "Expired", or {"Variant":{fields}}) into its typed error. Variants without a type of their
// own, or whose fields do not parse, become *InvalidTxError with the name and raw fields.
func ParseInvalidTx(raw json.RawMessage) InvalidTx {
	var name string
	if json.Unmarshal(raw, &name) == nil {
		switch name {
		case "Expired":
			return &ExpiredError{}
		case "InvalidSignature":
			return &InvalidSignatureError{}
		}
		return &InvalidTxError{Name: name}
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || len(obj) != 1 {
		return &InvalidTxError{Name: "InvalidTransaction", Detail: raw}
	}
	var detail json.RawMessage
	for name, detail = range obj {
	}
	var typed InvalidTx
	switch name {
	case "InvalidNonce":
		typed = &InvalidNonceError{}
	case "NonceTooLarge":
		typed = &NonceTooLargeError{}
	case "NotEnoughBalance":
		typed = &NotEnoughBalanceError{}
	case "InvalidReceiverId":
		typed = &InvalidReceiverIDError{}
	case "SignerDoesNotExist":
		typed = &SignerDoesNotExistError{}
	case "InvalidAccessKeyError":
		return parseInvalidAccessKey(detail)
	default:
		return &InvalidTxError{Name: name, Detail: detail}
	}
	if json.Unmarshal(detail, typed) != nil {
		return &InvalidTxError{Name: name, Detail: detail}
	}
	return typed
}

func parseInvalidAccessKey(raw json.RawMessage) InvalidTx {
	var kind string
	if json.Unmarshal(raw, &kind) == nil {
		return &InvalidAccessKeyError{Kind: kind}
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) == nil && len(obj) == 1 {
		for k, v := range obj {
			return &InvalidAccessKeyError{Kind: k, Detail: v}
		}
	}
	return &InvalidAccessKeyError{Kind: "unknown", Detail: raw}
}

// dataString returns data when it is a JSON string, else "".
func dataString(data json.RawMessage) string {
	var s string
	if len(data) > 0 && data[0] == '"' && json.Unmarshal(data, &s) == nil {
		return s
	}
	return ""
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
