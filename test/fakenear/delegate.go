package fakenear

import (
	"encoding/json"

	"github.com/shardkeeper/shardkeeper/near"
)

// delegate runs a NEP-366 Delegate action of receipt r (the relayer's transaction to the
// delegate's sender), in nearcore's order of checks: the sender's signature over the NEP-461
// hash, expiry, that the transaction went to the sender, the sender's key, its nonce and upper
// bound, the key's permission. It then sets the key's nonce and creates the receipt of the
// inner actions, run as the sender (predecessor = sender, signer = the relayer).
//
// Like nearcore, the Delegate action itself succeeds once the checks pass: the relayer's
// receipt returns SuccessValue and the inner receipt's failure, if any, shows only in its own
// outcome (receipts_outcome), never in the transaction's final status. A failed inner receipt
// refunds its deposit to the sender, not to the relayer that paid it.
func (x *executor) delegate(st *state, r receipt, sd near.SignedDelegateAction, spawned *[]receipt) json.RawMessage {
	d := sd.DelegateAction
	if _, err := sd.Verify(); err != nil {
		return variant("DelegateActionInvalidSignature", nil)
	}
	if x.height > d.MaxBlockHeight {
		return variant("DelegateActionExpired", nil)
	}
	if d.SenderID != r.receiver {
		return variant("DelegateActionSenderDoesNotMatchTxReceiver", struct {
			SenderID   string `json:"sender_id"`
			ReceiverID string `json:"receiver_id"`
		}{d.SenderID, r.receiver})
	}
	key := st.key(d.SenderID, d.PublicKey)
	if key == nil {
		return variant("DelegateActionAccessKeyError", akNotFound(d.SenderID, d.PublicKey))
	}
	if d.Nonce <= key.nonce {
		return variant("DelegateActionInvalidNonce", struct {
			DelegateNonce uint64 `json:"delegate_nonce"`
			AkNonce       uint64 `json:"ak_nonce"`
		}{d.Nonce, key.nonce})
	}
	if bound := x.height * nonceMultiplier; d.Nonce >= bound {
		return variant("DelegateActionNonceTooLarge", struct {
			DelegateNonce uint64 `json:"delegate_nonce"`
			UpperBound    uint64 `json:"upper_bound"`
		}{d.Nonce, bound})
	}
	if fc := key.perm.FunctionCall; fc != nil {
		if kind := functionCallPermits(fc, d.ReceiverID, d.Actions); kind != nil {
			return variant("DelegateActionAccessKeyError", kind)
		}
	}
	key.nonce = d.Nonce
	*spawned = append(*spawned, receipt{
		id:          x.nextID(),
		parent:      r.id,
		predecessor: d.SenderID,
		receiver:    d.ReceiverID,
		signer:      r.signer,
		signerKey:   r.signerKey,
		actions:     d.Actions,
		deposit:     deposits(d.Actions),
	})
	return nil
}
