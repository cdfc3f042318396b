package near

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
)

// TxExecutionStatus is how far a transaction has got, as send_tx's and tx's wait_until and
// final_execution_status name it. Each level implies the ones before it, except that
// INCLUDED_FINAL and EXECUTED_OPTIMISTIC are reached independently.
type TxExecutionStatus string

// The levels of nearcore's TxExecutionStatus.
const (
	TxNone               TxExecutionStatus = "NONE"                // not even included
	TxIncluded           TxExecutionStatus = "INCLUDED"            // in a block, not yet final
	TxExecutedOptimistic TxExecutionStatus = "EXECUTED_OPTIMISTIC" // executed, maybe in blocks not yet final
	TxIncludedFinal      TxExecutionStatus = "INCLUDED_FINAL"      // in a final block
	TxExecuted           TxExecutionStatus = "EXECUTED"            // included final, receipts executed
	TxFinal              TxExecutionStatus = "FINAL"               // every receipt's block final
)

func (s TxExecutionStatus) check() error {
	switch s {
	case TxNone, TxIncluded, TxExecutedOptimistic, TxIncludedFinal, TxExecuted, TxFinal:
		return nil
	}
	return fmt.Errorf("wait_until %q is not a TxExecutionStatus", string(s))
}

// TxOutcome is a send_tx or tx answer.
type TxOutcome struct {
	// FinalExecutionStatus is how far the transaction got when the node answered.
	FinalExecutionStatus TxExecutionStatus
	// Status is NEAR's FinalExecutionStatus JSON as it came ({"SuccessValue":"<base64>"},
	// {"Failure":{…}}, "NotStarted", "Started"); nil when the answer has no execution outcome
	// (wait_until NONE, or a transaction not executed yet).
	Status json.RawMessage
	// TransactionHash is the hash the answer reports, when it carries the transaction.
	TransactionHash *Hash
	// Receipts are the outcomes of the receipts the transaction caused (receipts_outcome), in
	// the node's order; empty when the answer carries none (before execution).
	Receipts []ReceiptOutcome
	// Raw is the whole result.
	Raw json.RawMessage
}

// ReceiptOutcome is one entry of receipts_outcome: the execution outcome of a receipt.
type ReceiptOutcome struct {
	// ID is the receipt's id, BlockHash the block it was executed in.
	ID        string           `json:"id"`
	BlockHash string           `json:"block_hash"`
	Outcome   ExecutionOutcome `json:"outcome"`
}

// ExecutionOutcome is the part of nearcore's ExecutionOutcomeView a client reads. Gas and
// token figures are left in TxOutcome.Raw: a change in their encoding must not make the
// whole answer unreadable.
type ExecutionOutcome struct {
	// Status is NEAR's ExecutionStatus JSON as it came ({"SuccessValue":…},
	// {"SuccessReceiptId":…}, {"Failure":{…}}, "Unknown").
	Status     json.RawMessage `json:"status"`
	Logs       []string        `json:"logs"`
	ReceiptIDs []string        `json:"receipt_ids"`
	ExecutorID string          `json:"executor_id"`
}

// Failure returns the TxExecutionError of a Failure status, and nil for any other status.
func (r *ReceiptOutcome) Failure() json.RawMessage { return failureIn(r.Outcome.Status) }

// OutcomeKind classifies a TxOutcome's Status.
type OutcomeKind int

// The kinds of outcome.
const (
	OutcomePending   OutcomeKind = iota // no status yet, NotStarted or Started
	OutcomeSucceeded                    // SuccessValue: every action ran
	OutcomeFailed                       // Failure: the transaction landed and its execution failed
)

func (k OutcomeKind) String() string {
	switch k {
	case OutcomeSucceeded:
		return "succeeded"
	case OutcomeFailed:
		return "failed"
	}
	return "pending"
}

// UnmarshalJSON implements json.Unmarshaler.
func (o *TxOutcome) UnmarshalJSON(data []byte) error {
	var v struct {
		FinalExecutionStatus TxExecutionStatus `json:"final_execution_status"`
		Status               json.RawMessage   `json:"status"`
		Transaction          *struct {
			Hash *Hash `json:"hash"`
		} `json:"transaction"`
		Receipts []ReceiptOutcome `json:"receipts_outcome"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*o = TxOutcome{FinalExecutionStatus: v.FinalExecutionStatus, Receipts: v.Receipts, Raw: append(json.RawMessage(nil), data...)}
	if len(v.Status) > 0 && !bytes.Equal(v.Status, []byte("null")) {
		o.Status = v.Status
	}
	if v.Transaction != nil {
		o.TransactionHash = v.Transaction.Hash
	}
	return nil
}

func (o *TxOutcome) validate() error {
	if o.FinalExecutionStatus == "" {
		return errors.New("no final_execution_status")
	}
	return o.FinalExecutionStatus.check()
}

// Kind classifies the status. A status of an unknown form counts as pending: only the two
// terminal forms this package knows end a transaction's story.
func (o *TxOutcome) Kind() OutcomeKind {
	var v map[string]json.RawMessage
	if len(o.Status) == 0 || json.Unmarshal(o.Status, &v) != nil {
		return OutcomePending // absent, or a bare name: "NotStarted", "Started"
	}
	if _, ok := v["SuccessValue"]; ok {
		return OutcomeSucceeded
	}
	if _, ok := v["Failure"]; ok {
		return OutcomeFailed
	}
	return OutcomePending
}

// SuccessValue returns the decoded value of a SuccessValue status (the last receipt's
// return value, often JSON), and false for any other status.
func (o *TxOutcome) SuccessValue() ([]byte, bool) {
	var v struct {
		SuccessValue *string `json:"SuccessValue"`
	}
	if len(o.Status) == 0 || json.Unmarshal(o.Status, &v) != nil || v.SuccessValue == nil {
		return nil, false
	}
	b, err := base64.StdEncoding.DecodeString(*v.SuccessValue)
	if err != nil {
		return nil, false
	}
	return b, true
}

// Failure returns the TxExecutionError of a Failure status ({"ActionError":…} or
// {"InvalidTxError":…}), and nil for any other status.
func (o *TxOutcome) Failure() json.RawMessage { return failureIn(o.Status) }

// ReceiptsFailure returns the TxExecutionError of the first failed receipt in
// receipts_outcome, and nil when none failed. The transaction's status only follows the
// chain of receipts whose result is the transaction's: a receipt outside it can fail under a
// SuccessValue status. A transaction carrying a Delegate action is the common case: its
// status is the outcome of the receipt that delivers the delegate action, which succeeds
// once that receipt is created, while the inner actions fail in a receipt of their own.
func (o *TxOutcome) ReceiptsFailure() json.RawMessage {
	for i := range o.Receipts {
		if f := o.Receipts[i].Failure(); f != nil {
			return f
		}
	}
	return nil
}

// KindWithReceipts is Kind, except that a succeeded status with a failed receipt counts as
// failed (see ReceiptsFailure): a succeeded status alone does not mean that every action the
// transaction carried ran.
func (o *TxOutcome) KindWithReceipts() OutcomeKind {
	k := o.Kind()
	if k == OutcomeSucceeded && o.ReceiptsFailure() != nil {
		return OutcomeFailed
	}
	return k
}

// failureIn returns the value of status's Failure member, or nil.
func failureIn(status json.RawMessage) json.RawMessage {
	var v struct {
		Failure json.RawMessage `json:"Failure"`
	}
	if len(status) == 0 || json.Unmarshal(status, &v) != nil || bytes.Equal(v.Failure, []byte("null")) {
		return nil
	}
	return v.Failure
}
