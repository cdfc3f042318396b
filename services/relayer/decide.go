package relayer

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/shardkeeper/shardkeeper/near"
)

// The key actor's decisions, apart from their effects: given what the actor knows of one
// signed transaction and an answer about it (a send's, a status query's), what comes next.
// Pure functions, so that every rule is a case of TestDecideSend or TestDecideStatus.
//
// The rules keep the contract's guarantee that an intent lands at most once: a transaction
// is signed again (Replace) only when it is provably dead — NEAR refused it for its nonce or
// block hash and a status query does not know it, or its block hash is past the
// validity window and the hash is still unknown. Every other doubt is resolved by asking for
// the transaction's status and sending the identical bytes again (Resend), which NEAR applies
// at most once.

// Verdict is what a decision asks for.
type Verdict int

// The verdicts.
const (
	Wait      Verdict = iota // nothing now; the next poll asks again
	Query                    // ask for the transaction's status (by its signed bytes)
	Resend                   // send the identical signed bytes again
	Replace                  // provably dead: sign the intent again with a new nonce
	Succeeded                // landed, its execution succeeded (terminal)
	Failed                   // landed, its execution failed (terminal)
	Rejected                 // refused for a reason a new signature would not change (terminal)
)

func (v Verdict) String() string {
	return [...]string{"wait", "query", "resend", "replace", "succeeded", "failed", "rejected"}[v]
}

// Flight is what a decision needs of one signed, non-terminal transaction.
type Flight struct {
	Nonce       uint64
	BlockHeight uint64 // height of the block whose hash the transaction carries
	// Stale: a send of these bytes was refused for their nonce or block hash. The bytes can
	// then never land unless they landed already, which a status query tells.
	Stale bool
	// Recent: sent less than a few blocks ago. A node does not know a transaction that waits
	// in its pool for the next block, so an unknown answer then says nothing yet.
	Recent bool
	// Held: the node is not known to have taken it since it was last (re-)sent (see gate), and
	// the key's later sends wait for it. Unknown to the node, it is sent again at once,
	// however recent.
	Held bool
}

// Decision is a verdict with what goes with it.
type Decision struct {
	Verdict Verdict
	// Code and Message describe a rejection (Code is NEAR's error name).
	Code, Message string
	// Stale marks the flight as refused for its nonce or block hash (persisted with it).
	Stale bool
	// AkNonce, when set, is the access key's nonce an InvalidNonce reported: the key's next
	// nonce becomes at least AkNonce+1.
	AkNonce *uint64
	// NonceUnknown: the key's nonce must be learned again (an InvalidNonce without its
	// numbers).
	NonceUnknown bool
	// BlockStale: the block hash the key signs with is too old (Expired, or past the window);
	// a new one is needed before signing again.
	BlockStale bool
	// Landed: the transaction is in a block, not final yet. Its nonce is spent on chain, so it
	// no longer counts against the key's pipeline (MaxInFlight).
	Landed bool
}

// Outcome is the part of a send_tx or tx answer the decisions read.
type Outcome struct {
	Level  near.TxExecutionStatus `json:"level"`
	Kind   near.OutcomeKind       `json:"kind"`
	Status []byte                 `json:"status,omitempty"` // NEAR's FinalExecutionStatus JSON, for the intent's outcome
}

// OutcomeOf is the Outcome of a send_tx or tx answer, nil for none. A receipt's failure
// under a succeeded status (the inner actions of a Delegate action, see
// near.TxOutcome.ReceiptsFailure) fails the outcome, and its Status becomes that failure, so
// that the intent records why it failed rather than the status that hid it.
func OutcomeOf(o *near.TxOutcome) *Outcome {
	if o == nil {
		return nil
	}
	out := &Outcome{Level: o.FinalExecutionStatus, Kind: o.KindWithReceipts(), Status: o.Status}
	if out.Kind == near.OutcomeFailed && o.Failure() == nil {
		if st, err := json.Marshal(map[string]json.RawMessage{"Failure": o.ReceiptsFailure()}); err == nil {
			out.Status = st
		}
	}
	return out
}

// final reports whether an answer at level is final enough to end an intent: its status can
// no longer change (FINAL: every receipt's block is final; EXECUTED: included final with its
// receipts executed).
func final(level near.TxExecutionStatus) bool {
	return level == near.TxFinal || level == near.TxExecuted
}

// terminal decides an answer carrying an outcome.
func terminal(o *Outcome) (Decision, bool) {
	if o == nil || !final(o.Level) {
		return Decision{}, false
	}
	switch o.Kind {
	case near.OutcomeSucceeded:
		return Decision{Verdict: Succeeded}, true
	case near.OutcomeFailed:
		return Decision{Verdict: Failed}, true
	}
	return Decision{}, false
}

// DecideSend decides the answer to a send of f's bytes.
func DecideSend(f Flight, o *Outcome, err error) Decision {
	if err == nil {
		if d, ok := terminal(o); ok {
			return d
		}
		return Decision{Verdict: Query} // accepted: learn its outcome
	}
	if near.IsOutcomeUnknown(err) {
		// The node may have taken it: ask for the hash (and resend if unknown), never sign.
		return Decision{Verdict: Query}
	}
	if d, ok := refusal(err); ok {
		if d.Stale {
			// A copy sent earlier may have landed: NEAR refuses a re-send of a landed
			// transaction for its nonce, or as Expired once its block hash is old, since it
			// checks expiry before it looks for the transaction. Only a status answer that does
			// not know the transaction lets DecideStatus replace it.
			d.Verdict = Query
		}
		return d
	}
	// No answer about the transaction (the request was refused, the call was cut short):
	// the next poll asks for the hash.
	return Decision{Verdict: Wait}
}

// refusal decides a refusal: stale (for the nonce or block hash, with what it tells of the
// key's nonce) or a rejection with NEAR's error name. It reports false for anything else,
// including a refusal that an unknown outcome of the same call leaves open.
func refusal(err error) (Decision, bool) {
	var it near.InvalidTx
	if !near.IsRefused(err) || !errors.As(err, &it) {
		return Decision{}, false
	}
	if !near.IsStale(err) {
		return Decision{Verdict: Rejected, Code: it.InvalidTxName(), Message: it.Error()}, true
	}
	d := Decision{Stale: true}
	var inv *near.InvalidNonceError
	switch {
	case errors.As(err, &inv):
		ak := inv.AkNonce
		d.AkNonce = &ak
	case it.InvalidTxName() == "InvalidNonce":
		d.NonceUnknown = true
	case it.InvalidTxName() == "Expired" || it.InvalidTxName() == "InvalidChain":
		d.BlockStale = true
	}
	return d, true
}

// DecideStatus decides the answer to a status query of f by its signed bytes, head being the
// height of the latest block seen and window the block hash validity period in blocks. A
// refusal in that answer comes from a node that does not know the transaction and checked
// the bytes: a stale one proves it dead, another rejects the intent.
func DecideStatus(f Flight, head, window uint64, o *Outcome, err error) Decision {
	if err == nil {
		if d, ok := terminal(o); ok {
			return d
		}
		// Known, not final yet.
		return Decision{Verdict: Wait, Landed: o != nil && o.Level != near.TxNone && o.Level != ""}
	}
	if d, ok := refusal(err); ok {
		if d.Stale {
			d.Verdict = Replace
		}
		return d
	}
	var unknown *near.UnknownTransactionError
	if !errors.As(err, &unknown) || near.IsOutcomeUnknown(err) {
		return Decision{Verdict: Wait} // no answer: ask again at the next poll
	}
	if f.Stale {
		return Decision{Verdict: Replace} // refused for its nonce or block hash, and not landed
	}
	if head > f.BlockHeight && head-f.BlockHeight > window {
		return Decision{Verdict: Replace, BlockStale: true} // its block hash expired, and it never landed
	}
	if f.Recent && !f.Held {
		return Decision{Verdict: Wait} // likely on its way to a block: ask again at the next poll
	}
	return Decision{Verdict: Resend}
}

// Witness is one endpoint's answer to a status question about a transaction another answer
// declared dead, decided by DecideStatus, with the outcome it showed.
type Witness struct {
	Decision Decision `json:"decision"`
	Outcome  *Outcome `json:"outcome,omitempty"`
}

// ConfirmDeath combines the answers of every endpoint about a transaction one endpoint
// declared dead: signing its intent again is safe only if it can never land, and one node's
// word — a hostile or broken one, or one behind — is not enough. An endpoint that shows the
// transaction landed is believed (terminal, or landed and not final); one that knows it keeps
// it alive; it is dead (Replace) only when at least two endpoints say so and none knows it.
// Otherwise the poll asks again. It returns the outcome of the answer it followed, if any.
func ConfirmDeath(ws []Witness) (Decision, *Outcome) {
	dead := 0
	var d Decision
	alive := false
	for _, w := range ws {
		switch w.Decision.Verdict {
		case Succeeded, Failed:
			return w.Decision, w.Outcome
		case Replace:
			dead++
			d.BlockStale = d.BlockStale || w.Decision.BlockStale
		case Wait:
			// A Wait from an answer that knows the transaction (no error) keeps it alive; a
			// Wait for want of an answer says nothing.
			alive = alive || w.Outcome != nil
			d.Landed = d.Landed || w.Decision.Landed
		}
	}
	if dead >= 2 && !alive {
		return Decision{Verdict: Replace, BlockStale: d.BlockStale}, nil
	}
	return Decision{Verdict: Wait, Landed: d.Landed}, nil
}

// NextNonce is the nonce of the key's next transaction once the chain reported the access
// key's nonce chain: above both the chain's and every nonce this key used (lastUsed, 0 when
// none), so that no transaction of its own is ever refused for its nonce.
func NextNonce(lastUsed, chain uint64) uint64 { return max(lastUsed, chain) + 1 }

// Signable is how many queued intents may be signed now: none until the key's nonce and a
// recent block hash are known, then as many as keep at most maxInFlight signed and not
// known to have landed (inFlight).
func Signable(nonceKnown, blockKnown bool, queued, inFlight, maxInFlight int) int {
	if !nonceKnown || !blockKnown || inFlight >= maxInFlight {
		return 0
	}
	return min(queued, maxInFlight-inFlight)
}

func (d Decision) String() string {
	s := d.Verdict.String()
	if d.Code != "" {
		s += " " + d.Code
	}
	if d.Stale {
		s += " stale"
	}
	if d.AkNonce != nil {
		s += fmt.Sprintf(" ak_nonce=%d", *d.AkNonce)
	}
	if d.NonceUnknown {
		s += " nonce-unknown"
	}
	if d.BlockStale {
		s += " block-stale"
	}
	if d.Landed {
		s += " landed"
	}
	return s
}
