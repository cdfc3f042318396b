package fakenear

import (
	"encoding/json"
	"time"

	"github.com/shardkeeper/shardkeeper/near"
)

// LedgerKind says what happened to a transaction.
type LedgerKind string

// The kinds of ledger entries.
const (
	// Landed: included in block Height; Status is its final execution status (it may be a
	// Failure: landed, and its execution failed).
	Landed LedgerKind = "landed"
	// Refused: refused when received (validation failed); Reason says why. With wait_until
	// NONE nobody was told. A re-send of a transaction that landed may be refused too (with
	// NONE, or once its block hash expired): the hash then has both entries.
	Refused LedgerKind = "refused"
	// Dropped: accepted into the pool (or the forwarding queue of a late endpoint), then found
	// invalid when a block was built (or when it was delivered) and dropped; Reason says why.
	Dropped LedgerKind = "dropped"
	// Lost: accepted, then silently lost by the "lose" fault; it never reached the pool.
	Lost LedgerKind = "lost"
)

// LedgerEntry is one event in a transaction's life. Entries are in the order they happened
// (Seq); one transaction may have several (refused re-sends, then landed...).
type LedgerEntry struct {
	Seq       uint64          `json:"seq"`
	Kind      LedgerKind      `json:"kind"`
	Height    uint64          `json:"height"` // the including block, or the head when it happened
	BlockHash string          `json:"block_hash,omitempty"`
	Hash      string          `json:"hash"`
	Signer    string          `json:"signer_id"`
	PublicKey string          `json:"public_key"`
	Nonce     uint64          `json:"nonce"`
	Receiver  string          `json:"receiver_id"`
	Actions   json.RawMessage `json:"actions"`
	// Status is the final execution status of a landed transaction ({"SuccessValue":""} or
	// {"Failure":…}); Receipts the status of each of its receipts (a delegate action's inner
	// receipt may fail while Status says SuccessValue).
	Status   json.RawMessage `json:"status,omitempty"`
	Receipts []LedgerReceipt `json:"receipts,omitempty"`
	// Reason is the InvalidTxError of a refused or dropped transaction, as NEAR's JSON, and
	// ReasonName its variant ("InvalidNonce", "Expired", ...); "lost" for a lost one.
	Reason     json.RawMessage `json:"reason,omitempty"`
	ReasonName string          `json:"reason_name,omitempty"`
	Endpoint   string          `json:"endpoint,omitempty"`
	// Foreign marks a transaction of another sender of the key (BumpNonce, foreign_nonce).
	Foreign bool      `json:"foreign,omitempty"`
	At      time.Time `json:"at"`
}

// LedgerReceipt is one receipt of a landed transaction.
type LedgerReceipt struct {
	ID          string          `json:"id"`
	Predecessor string          `json:"predecessor_id"`
	Receiver    string          `json:"receiver_id"`
	Status      json.RawMessage `json:"status"`
}

// Outcome classifies a landed entry's Status like near.TxOutcome.Kind.
func (e LedgerEntry) Outcome() near.OutcomeKind {
	o := near.TxOutcome{Status: e.Status}
	return o.Kind()
}

// record appends an entry for tx; c.mu is held.
func (c *chain) record(kind LedgerKind, signed *near.SignedTransaction, hash near.Hash, endpoint string, fill func(*LedgerEntry)) {
	tx := signed.Transaction
	actions := tx.Actions
	if actions == nil {
		actions = []near.Action{}
	}
	raw, err := json.Marshal(actions)
	if err != nil {
		raw = json.RawMessage(`null`) // cannot happen for decoded actions; keep the entry anyway
	}
	c.seq++
	e := LedgerEntry{
		Seq: c.seq, Kind: kind, Height: c.head().height, Hash: hash.String(),
		Signer: tx.SignerID, PublicKey: tx.PublicKey.String(), Nonce: tx.Nonce, Receiver: tx.ReceiverID,
		Actions: raw, Endpoint: endpoint, At: time.Now().UTC(),
	}
	if fill != nil {
		fill(&e)
	}
	c.ledger = append(c.ledger, e)
	c.log.Debug("fakenear: ledger", "kind", kind, "hash", e.Hash, "signer", e.Signer, "nonce", e.Nonce,
		"height", e.Height, "reason", e.ReasonName, "endpoint", endpoint)
}

// recordRefusal records a refused or dropped transaction; height is the head when it was
// refused, or the block that dropped it.
func (c *chain) recordRefusal(kind LedgerKind, signed *near.SignedTransaction, hash near.Hash, endpoint string, why *txError, height uint64) {
	c.record(kind, signed, hash, endpoint, func(e *LedgerEntry) {
		e.Reason, e.ReasonName, e.Height = why.raw, why.name, height
	})
}

func (c *chain) recordLanded(rec *txRecord, endpoint string) {
	c.record(Landed, rec.signed, rec.hash, endpoint, func(e *LedgerEntry) {
		e.Height, e.BlockHash, e.Status, e.Foreign = rec.height, rec.blockHash.String(), rec.status(), rec.foreign
		for _, r := range rec.receipts {
			e.Receipts = append(e.Receipts, LedgerReceipt{ID: r.id.String(), Predecessor: r.predecessor, Receiver: r.receiver, Status: r.status})
		}
	})
}
