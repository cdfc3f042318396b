package fakenear

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/shardkeeper/shardkeeper/near"
)

// decodeTx decodes signed_tx_base64 as nearcore's RPC does before anything else: base64, then
// borsh, with account ids validated while decoding (near-account-id refuses invalid ids in its
// borsh decoder), so that a malformed transaction is a PARSE_ERROR even with wait_until NONE.
func (e *Endpoint) decodeTx(b64 string) (*near.SignedTransaction, near.Hash, *rpcError) {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, near.Hash{}, errParse("Failed to decode transaction: " + err.Error())
	}
	signed, err := near.DecodeSignedTransaction(raw)
	if err != nil {
		return nil, near.Hash{}, errParse("Failed to decode transaction: " + err.Error())
	}
	if !e.fake.cfg.LegacyAccountIDCheck {
		for _, id := range accountIDs(&signed.Transaction) {
			if err := near.ValidateAccountID(id); err != nil {
				return nil, near.Hash{}, errParse(fmt.Sprintf("Failed to decode transaction: invalid value: %q, %v", id, err))
			}
		}
	}
	hash, err := signed.Hash()
	if err != nil {
		return nil, near.Hash{}, errParse("Failed to decode transaction: " + err.Error())
	}
	return signed, hash, nil
}

// accountIDs lists every account id a transaction's borsh carries.
func accountIDs(tx *near.Transaction) []string {
	ids := []string{tx.SignerID, tx.ReceiverID}
	var walk func([]near.Action)
	walk = func(actions []near.Action) {
		for _, a := range actions {
			switch a := a.(type) {
			case near.DeleteAccount:
				ids = append(ids, a.BeneficiaryID)
			case near.AddKey:
				if fc := a.AccessKey.Permission.FunctionCall; fc != nil {
					ids = append(ids, fc.ReceiverID)
				}
			case near.SignedDelegateAction:
				ids = append(ids, a.DelegateAction.SenderID, a.DelegateAction.ReceiverID)
				walk(a.DelegateAction.Actions)
			}
		}
	}
	walk(tx.Actions)
	return ids
}

// parseWait reads a wait_until value; empty is nearcore's default, EXECUTED_OPTIMISTIC.
func parseWait(w near.TxExecutionStatus) (near.TxExecutionStatus, *rpcError) {
	switch w {
	case "":
		return near.TxExecutedOptimistic, nil
	case near.TxNone, near.TxIncluded, near.TxExecutedOptimistic, near.TxIncludedFinal, near.TxExecuted, near.TxFinal:
		return w, nil
	}
	return "", errParse(fmt.Sprintf("Failed parsing args: unknown variant `%s`", w))
}

// sendTx answers `send_tx` {signed_tx_base64, wait_until}.
func (e *Endpoint) sendTx(ctx context.Context, params json.RawMessage, d decision) (json.RawMessage, *rpcError) {
	var p struct {
		SignedTxBase64 *string                `json:"signed_tx_base64"`
		WaitUntil      near.TxExecutionStatus `json:"wait_until"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, errParse("Failed parsing args: " + err.Error())
	}
	if p.SignedTxBase64 == nil {
		return nil, errParse("Failed parsing args: missing field `signed_tx_base64`")
	}
	wait, rerr := parseWait(p.WaitUntil)
	if rerr != nil {
		return nil, rerr
	}
	signed, hash, rerr := e.decodeTx(*p.SignedTxBase64)
	if rerr != nil {
		return nil, rerr
	}
	return e.send(ctx, signed, hash, wait, d)
}

// legacyTx reads the [signed_tx_base64] params of broadcast_tx_async and broadcast_tx_commit.
func (e *Endpoint) legacyTx(params json.RawMessage) (*near.SignedTransaction, near.Hash, *rpcError) {
	var list []string
	if err := json.Unmarshal(params, &list); err != nil || len(list) != 1 {
		return nil, near.Hash{}, errParse("Failed parsing args: expected [signed_tx_base64]")
	}
	return e.decodeTx(list[0])
}

// broadcastAsync answers `broadcast_tx_async`: the transaction's hash, at once.
func (e *Endpoint) broadcastAsync(params json.RawMessage, d decision) (json.RawMessage, *rpcError) {
	signed, hash, rerr := e.legacyTx(params)
	if rerr != nil {
		return nil, rerr
	}
	e.fake.chain.submit(e.submission(signed, hash, d, true))
	if d.kind == FaultTimeout {
		return nil, errTimeout()
	}
	return marshalResult(hash)
}

// broadcastCommit answers `broadcast_tx_commit`: send_tx with EXECUTED_OPTIMISTIC.
func (e *Endpoint) broadcastCommit(ctx context.Context, params json.RawMessage, d decision) (json.RawMessage, *rpcError) {
	signed, hash, rerr := e.legacyTx(params)
	if rerr != nil {
		return nil, rerr
	}
	return e.send(ctx, signed, hash, near.TxExecutedOptimistic, d)
}

func (e *Endpoint) submission(signed *near.SignedTransaction, hash near.Hash, d decision, async bool) submission {
	return submission{
		signed: signed, hash: hash, endpoint: e.name, forwardDelay: e.forwardDelay, async: async,
		lose: d.kind == FaultLose, foreign: d.kind == FaultForeignNonce,
	}
}

// send is nearcore's send_tx. With NONE the answer does not wait for, nor depend on, the
// validation: nearcore hands the transaction to its client and answers at once. (The fake
// validates before writing the answer only so that requests of one connection take effect in
// the order they were sent.) Otherwise a refusal is answered as InvalidTransaction, and an
// accepted transaction — new, or a re-send of one pooled or landed — is awaited like `tx` with
// the signed transaction: its outcome once it reached wait, the refusal it would now get if it
// became invalid (dropped) meanwhile, or TIMEOUT_ERROR.
func (e *Endpoint) send(ctx context.Context, signed *near.SignedTransaction, hash near.Hash, wait near.TxExecutionStatus, d decision) (json.RawMessage, *rpcError) {
	c := e.fake.chain
	if d.kind == FaultLie {
		if err := c.freshCheck(signed); err != nil {
			return nil, errInvalidTransaction(err)
		}
	}
	if wait == near.TxNone {
		c.submit(e.submission(signed, hash, d, true))
		if d.kind == FaultTimeout {
			return nil, errTimeout()
		}
		return marshalResult(map[string]near.TxExecutionStatus{"final_execution_status": near.TxNone})
	}
	if err := c.submit(e.submission(signed, hash, d, false)); err != nil {
		return nil, errInvalidTransaction(err)
	}
	if d.kind == FaultTimeout {
		return nil, errTimeout()
	}
	return e.await(ctx, hash, signed.Transaction.SignerID, signed, wait, false)
}

// txStatus answers `tx` and `EXPERIMENTAL_tx_status`: {tx_hash, sender_account_id} or
// {signed_tx_base64}, with wait_until (default EXECUTED_OPTIMISTIC), or the legacy
// [hash, sender] / [signed_tx_base64].
func (e *Endpoint) txStatus(ctx context.Context, params json.RawMessage, receipts bool, d decision) (json.RawMessage, *rpcError) {
	var p struct {
		TxHash          *near.Hash             `json:"tx_hash"`
		SenderAccountID *string                `json:"sender_account_id"`
		SignedTxBase64  *string                `json:"signed_tx_base64"`
		WaitUntil       near.TxExecutionStatus `json:"wait_until"`
	}
	var list []string
	if json.Unmarshal(params, &list) == nil {
		switch len(list) {
		case 1:
			p.SignedTxBase64 = &list[0]
		case 2:
			h, err := near.ParseHash(list[0])
			if err != nil {
				return nil, errParse("Failed parsing args: " + err.Error())
			}
			p.TxHash, p.SenderAccountID = &h, &list[1]
		default:
			return nil, errParse("Failed parsing args: expected [tx_hash, sender_account_id] or [signed_tx_base64]")
		}
	} else if err := json.Unmarshal(params, &p); err != nil {
		return nil, errParse("Failed parsing args: " + err.Error())
	}
	wait, rerr := parseWait(p.WaitUntil)
	if rerr != nil {
		return nil, rerr
	}
	var signed *near.SignedTransaction
	var hash near.Hash
	var sender string
	switch {
	case p.SignedTxBase64 != nil:
		if signed, hash, rerr = e.decodeTx(*p.SignedTxBase64); rerr != nil {
			return nil, rerr
		}
		sender = signed.Transaction.SignerID
	case p.TxHash != nil && p.SenderAccountID != nil:
		hash, sender = *p.TxHash, *p.SenderAccountID
	default:
		return nil, errParse("Failed parsing args: missing field `tx_hash` and `sender_account_id`, or `signed_tx_base64`")
	}
	if d.kind == FaultTimeout {
		return nil, errTimeout()
	}
	if d.kind == FaultLie {
		if signed != nil {
			if err := e.fake.chain.freshCheck(signed); err != nil {
				return nil, errInvalidTransaction(err)
			}
		}
		return nil, errUnknownTransaction(hash)
	}
	return e.await(ctx, hash, sender, signed, wait, receipts)
}

// await is nearcore's tx_status_fetch: until the poll timeout, answer the outcome once the
// transaction landed and reached wait; while the node does not know it, answer the refusal a
// check of the signed transaction (when given) finds, or UNKNOWN_TRANSACTION at once when
// wait is NONE, or keep waiting; TIMEOUT_ERROR when the time is up.
func (e *Endpoint) await(ctx context.Context, hash near.Hash, sender string, signed *near.SignedTransaction, wait near.TxExecutionStatus, receipts bool) (json.RawMessage, *rpcError) {
	c := e.fake.chain
	var out json.RawMessage
	var rerr *rpcError
	done := c.await(ctx, time.Now().Add(e.fake.cfg.PollTimeout), func() bool {
		if rec := c.records[hash]; rec != nil && rec.signed.Transaction.SignerID == sender {
			level := c.level(rec)
			if meets(wait, level) {
				out = rec.view(level, receipts)
				return true
			}
			return false
		}
		if signed != nil {
			if err := c.checkOnly(signed, hash); err != nil {
				rerr = errInvalidTransaction(err)
				return true
			}
		}
		if wait == near.TxNone {
			rerr = errUnknownTransaction(hash)
			return true
		}
		return false
	})
	if !done {
		return nil, errTimeout()
	}
	return out, rerr
}
