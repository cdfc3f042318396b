package chain

import (
	"errors"
	"fmt"
	"math/big"

	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/arweave"
)

// The reward cap. The reward is whatever the gateway quotes, and the wallet pays it: a wrong
// or hostile gateway could otherwise spend the wallet on one transaction. signCapped is the
// chain's only way to sign, for new events and events signed again alike, so no transaction
// above the cap is ever signed, whichever path the quote took (read by the prepare, or
// renewed in the background).

// codeFeeTooHigh is the error code of a quote above the cap: a failed prepare, shown in the
// failed version's error.
const codeFeeTooHigh = "fee_too_high"

// signCapped signs tx with w unless its reward is above max winston (or is not a number of
// winston: what cannot be compared is not signed either).
func signCapped(tx *arweave.Tx, w *arweave.Wallet, max uint64) error {
	r, ok := new(big.Int).SetString(tx.Reward, 10)
	if !ok || r.Sign() < 0 {
		return fmt.Errorf("chain: the quoted reward %q is not a number of winston", clipQuote(tx.Reward))
	}
	if r.Cmp(new(big.Int).SetUint64(max)) > 0 {
		return actors.Errorf(codeFeeTooHigh, "the quoted reward, %s winston, is above --chain-max-reward (%d winston): not signed",
			clipQuote(tx.Reward), max)
	}
	return tx.Sign(w)
}

// isFeeTooHigh reports whether err is a quote refused by the cap.
func isFeeTooHigh(err error) bool {
	var ae *actors.Error
	return errors.As(err, &ae) && ae.Code == codeFeeTooHigh
}

// clipQuote bounds a quote repeated in an error (the gateway chose its length).
func clipQuote(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
