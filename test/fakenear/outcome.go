package fakenear

import (
	"encoding/json"
	"fmt"

	"github.com/shardkeeper/shardkeeper/near"
)

// txRecord is a transaction that landed: the block that included it and the outcomes of its
// receipts. Records are never removed: `tx` answers for them as long as the fake runs.
type txRecord struct {
	hash      near.Hash
	signed    *near.SignedTransaction
	height    uint64
	blockHash near.Hash
	receipts  []receiptOutcome // receipts[0] is the transaction's own receipt
	foreign   bool
}

// status is NEAR's FinalExecutionStatus: nearcore follows SuccessReceiptId links from the
// transaction's outcome; the fake's receipts never return another receipt, so the chain ends
// at the transaction's own receipt.
func (r *txRecord) status() json.RawMessage { return r.receipts[0].status }

// Gas figures the outcomes report; the fake burns no gas.
const (
	txGasBurnt      = 223182562500
	receiptGasBurnt = 223182562500
)

// The JSON of nearcore's FinalExecutionOutcomeView (and, with receipts, of
// FinalExecutionOutcomeWithReceiptView) next to final_execution_status.
type (
	outcomeView struct {
		FinalExecutionStatus near.TxExecutionStatus `json:"final_execution_status"`
		Status               json.RawMessage        `json:"status"`
		Transaction          txView                 `json:"transaction"`
		TransactionOutcome   outcomeWithID          `json:"transaction_outcome"`
		ReceiptsOutcome      []outcomeWithID        `json:"receipts_outcome"`
		Receipts             []receiptView          `json:"receipts,omitempty"`
	}
	txView struct {
		SignerID    string         `json:"signer_id"`
		PublicKey   near.PublicKey `json:"public_key"`
		Nonce       uint64         `json:"nonce"`
		ReceiverID  string         `json:"receiver_id"`
		Actions     []near.Action  `json:"actions"`
		PriorityFee uint64         `json:"priority_fee"`
		Signature   near.Signature `json:"signature"`
		Hash        near.Hash      `json:"hash"`
	}
	outcomeWithID struct {
		Proof     []any       `json:"proof"`
		BlockHash near.Hash   `json:"block_hash"`
		ID        near.Hash   `json:"id"`
		Outcome   executionOV `json:"outcome"`
	}
	executionOV struct {
		Logs        []string        `json:"logs"`
		ReceiptIDs  []near.Hash     `json:"receipt_ids"`
		GasBurnt    uint64          `json:"gas_burnt"`
		TokensBurnt string          `json:"tokens_burnt"`
		ExecutorID  string          `json:"executor_id"`
		Status      json.RawMessage `json:"status"`
		Metadata    metadataView    `json:"metadata"`
	}
	metadataView struct {
		Version    int   `json:"version"`
		GasProfile []any `json:"gas_profile"`
	}
	receiptView struct {
		PredecessorID string          `json:"predecessor_id"`
		ReceiverID    string          `json:"receiver_id"`
		ReceiptID     near.Hash       `json:"receipt_id"`
		Receipt       json.RawMessage `json:"receipt"`
		Priority      uint64          `json:"priority"`
	}
)

// view renders the record as a tx/send_tx result that reached level.
func (r *txRecord) view(level near.TxExecutionStatus, withReceipts bool) json.RawMessage {
	tx := r.signed.Transaction
	actions := tx.Actions
	if actions == nil {
		actions = []near.Action{}
	}
	v := outcomeView{
		FinalExecutionStatus: level,
		Status:               r.status(),
		Transaction: txView{
			SignerID: tx.SignerID, PublicKey: tx.PublicKey, Nonce: tx.Nonce, ReceiverID: tx.ReceiverID,
			Actions: actions, Signature: r.signed.Signature, Hash: r.hash,
		},
		TransactionOutcome: outcomeWithID{
			Proof: []any{}, BlockHash: r.blockHash, ID: r.hash,
			Outcome: executionOV{
				Logs: []string{}, ReceiptIDs: []near.Hash{r.receipts[0].id}, GasBurnt: txGasBurnt, TokensBurnt: "0",
				ExecutorID: tx.SignerID, Status: receiptIDStatus(r.receipts[0].id),
				Metadata: metadataView{Version: 1},
			},
		},
		ReceiptsOutcome: []outcomeWithID{},
	}
	for _, ro := range r.receipts {
		var children []near.Hash
		for _, c := range r.receipts {
			if c.parent == ro.id {
				children = append(children, c.id)
			}
		}
		if children == nil {
			children = []near.Hash{}
		}
		v.ReceiptsOutcome = append(v.ReceiptsOutcome, outcomeWithID{
			Proof: []any{}, BlockHash: r.blockHash, ID: ro.id,
			Outcome: executionOV{
				Logs: []string{}, ReceiptIDs: children, GasBurnt: receiptGasBurnt, TokensBurnt: "0",
				ExecutorID: ro.receiver, Status: ro.status, Metadata: metadataView{Version: 3, GasProfile: []any{}},
			},
		})
		if withReceipts {
			v.Receipts = append(v.Receipts, ro.view())
		}
	}
	out, err := json.Marshal(v)
	if err != nil {
		// Every action of a decoded transaction re-encodes (the decoder refuses the others).
		panic(fmt.Sprintf("fakenear: marshal outcome of %s: %v", r.hash, err))
	}
	return out
}

func receiptIDStatus(id near.Hash) json.RawMessage {
	raw, _ := json.Marshal(map[string]near.Hash{"SuccessReceiptId": id})
	return raw
}

// view is the receipt as EXPERIMENTAL_tx_status lists it (ReceiptView with an Action receipt).
func (ro receiptOutcome) view() receiptView {
	actions := ro.actions
	if actions == nil {
		actions = []near.Action{}
	}
	body, err := json.Marshal(map[string]any{"Action": map[string]any{
		"signer_id": ro.signer, "signer_public_key": ro.signerKey, "gas_price": gasPrice,
		"output_data_receivers": []any{}, "input_data_ids": []any{}, "actions": actions, "is_promise_yield": false,
	}})
	if err != nil {
		panic(fmt.Sprintf("fakenear: marshal receipt %s: %v", ro.id, err))
	}
	return receiptView{PredecessorID: ro.predecessor, ReceiverID: ro.receiver, ReceiptID: ro.id, Receipt: body}
}
