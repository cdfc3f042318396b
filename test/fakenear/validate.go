package fakenear

import (
	"encoding/json"
	"math/big"

	"github.com/shardkeeper/shardkeeper/near"
)

// nearcore's limits that validate_actions applies (parameters of the runtime config).
const (
	maxActionsPerReceipt = 100
	maxMethodNameLength  = 256
	maxTotalPrepaidGas   = 300_000_000_000_000 // 300 Tgas
)

// checkPeriod is nearcore's check_transaction_validity_period against the block prevHeight the
// transaction would build on (the head when received, the parent when included): the block
// named by the transaction must be known and at most ValidityPeriod blocks behind. A hash the
// chain does not know is Expired, as nearcore answers when it cannot find the block header.
func (c *chain) checkPeriod(tx *near.Transaction, prevHeight uint64) *txError {
	base, ok := c.byHash[tx.BlockHash]
	if !ok || prevHeight > base.height+c.cfg.ValidityPeriod {
		return errExpired()
	}
	return nil
}

// checkStateless is nearcore's validate_transaction: what can be checked without state, in its
// order — the actions, then the signature over sha256(borsh(tx)).
func (c *chain) checkStateless(st *near.SignedTransaction) *txError {
	tx := &st.Transaction
	if c.cfg.LegacyAccountIDCheck {
		// Nodes that decoded any string as an account id refused invalid ones here.
		if near.ValidateAccountID(tx.SignerID) != nil {
			return errInvalidSignerID(tx.SignerID)
		}
		if near.ValidateAccountID(tx.ReceiverID) != nil {
			return errInvalidReceiverID(tx.ReceiverID)
		}
	}
	if err := validateActions(tx.Actions); err != nil {
		return err
	}
	if _, err := st.Verify(); err != nil {
		return errInvalidSignature()
	}
	return nil
}

// validateActions checks the limits of nearcore's validate_actions the fake knows.
func validateActions(actions []near.Action) *txError {
	if len(actions) > maxActionsPerReceipt {
		return errActionsValidation(variant("TotalNumberOfActionsExceeded", struct {
			Total uint64 `json:"total_number_of_actions"`
			Limit uint64 `json:"limit"`
		}{uint64(len(actions)), maxActionsPerReceipt}))
	}
	var gas uint64
	for _, a := range actions {
		switch a := a.(type) {
		case near.SignedDelegateAction:
			if len(actions) != 1 {
				return errActionsValidation(variant("DelegateActionMustBeOnlyOne", nil))
			}
			if err := validateActions(a.DelegateAction.Actions); err != nil {
				return err
			}
		case near.FunctionCall:
			if len(a.MethodName) > maxMethodNameLength {
				return errActionsValidation(variant("FunctionCallMethodNameLengthExceeded", struct {
					Length uint64 `json:"length"`
					Limit  uint64 `json:"limit"`
				}{uint64(len(a.MethodName)), maxMethodNameLength}))
			}
			if a.Gas == 0 {
				return errActionsValidation(variant("FunctionCallZeroAttachedGas", nil))
			}
			gas += a.Gas
		}
	}
	if gas > maxTotalPrepaidGas {
		return errActionsValidation(variant("TotalPrepaidGasExceeded", struct {
			Total uint64 `json:"total_prepaid_gas"`
			Limit uint64 `json:"limit"`
		}{gas, maxTotalPrepaidGas}))
	}
	return nil
}

// deposits sums the yoctoNEAR the actions attach, delegate actions' inner ones included: the
// relayer pays for what its users' delegate actions attach.
func deposits(actions []near.Action) *big.Int {
	sum := new(big.Int)
	for _, a := range actions {
		switch a := a.(type) {
		case near.Transfer:
			sum.Add(sum, a.Deposit.Big())
		case near.FunctionCall:
			sum.Add(sum, a.Deposit.Big())
		case near.SignedDelegateAction:
			sum.Add(sum, deposits(a.DelegateAction.Actions))
		}
	}
	return sum
}

// checkState is nearcore's verify_and_charge_transaction against st, in its order: the signer
// and its key, the nonce, the nonce's upper bound (only when upperHeight > 0: nearcore knows the
// including block's height only when it builds a chunk), the balance, a function-call key's
// allowance and then its permission. It returns the cost to charge.
func (c *chain) checkState(st *state, tx *near.Transaction, upperHeight uint64) (*big.Int, *txError) {
	acct := st.accounts[tx.SignerID]
	if acct == nil {
		return nil, errSignerDoesNotExist(tx.SignerID)
	}
	key := acct.keys[tx.PublicKey]
	if key == nil {
		return nil, errAccessKey(akNotFound(tx.SignerID, tx.PublicKey))
	}
	if tx.Nonce <= key.nonce {
		return nil, errInvalidNonce(tx.Nonce, key.nonce)
	}
	if upperHeight > 0 {
		if bound := upperHeight * nonceMultiplier; tx.Nonce >= bound {
			return nil, errNonceTooLarge(tx.Nonce, bound)
		}
	}
	cost := deposits(tx.Actions)
	cost.Add(cost, c.cfg.TxFee.Big())
	if acct.balance.Cmp(cost) < 0 {
		return nil, errNotEnoughBalance(tx.SignerID, u128(acct.balance), u128(cost))
	}
	if fc := key.perm.FunctionCall; fc != nil {
		if fc.Allowance != nil && fc.Allowance.Big().Cmp(cost) < 0 {
			return nil, errAccessKey(akNotEnoughAllowance(tx.SignerID, tx.PublicKey, *fc.Allowance, u128(cost)))
		}
		if kind := functionCallPermits(fc, tx.ReceiverID, tx.Actions); kind != nil {
			return nil, errAccessKey(kind)
		}
	}
	return cost, nil
}

// functionCallPermits checks actions for receiver against a function-call key's permission and
// returns the InvalidAccessKeyError variant that refuses them, or nil.
func functionCallPermits(fc *near.FunctionCallPermission, receiver string, actions []near.Action) json.RawMessage {
	if len(actions) != 1 {
		return akRequiresFullAccess()
	}
	call, ok := actions[0].(near.FunctionCall)
	if !ok {
		return akRequiresFullAccess()
	}
	if !call.Deposit.IsZero() {
		return akDepositWithFunctionCall()
	}
	if receiver != fc.ReceiverID {
		return akReceiverMismatch(receiver, fc.ReceiverID)
	}
	if len(fc.MethodNames) > 0 {
		found := false
		for _, m := range fc.MethodNames {
			found = found || m == call.MethodName
		}
		if !found {
			return akMethodNameMismatch(call.MethodName)
		}
	}
	return nil
}

// charge applies a transaction that passed checkState: the key takes its nonce, the signer pays
// the cost and a function-call key's allowance shrinks by it.
func charge(st *state, tx *near.Transaction, cost *big.Int) {
	acct := st.accounts[tx.SignerID]
	key := acct.keys[tx.PublicKey]
	key.nonce = tx.Nonce
	acct.balance.Sub(acct.balance, cost)
	if fc := key.perm.FunctionCall; fc != nil && fc.Allowance != nil {
		left := u128(new(big.Int).Sub(fc.Allowance.Big(), cost))
		fc.Allowance = &left
	}
}
