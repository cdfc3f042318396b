package chain

import (
	"encoding/json"
	"fmt"

	"github.com/shardkeeper/shardkeeper/actors"
)

// Storage of a chain actor:
//
//	m                       meta: counters, the head, confirmed_seq
//	q/<acc %016x>           the queue: accepted events not signed yet, in acceptance order
//	v/<entity_id>\0<ver>    every version accepted (the (entity_id, ver) index)
//	e/<seq %016x>           every signed event; while not confirmed it holds its signed
//	                        transaction, posted again with the same bytes until mined
//	l/<entity_id>           the latest signed version of each entity
//	f/<version key>         the failed versions (never signed; retry requeues them)
//	b/<first seq %016x>     bundle mode: the bundles (bundle.go)

// Event statuses.
const (
	StatusQueued    = "queued"
	StatusSigned    = "signed"
	StatusPosted    = "posted"
	StatusConfirmed = "confirmed"
	StatusFailed    = "failed"
)

// meta is the chain's head and counters.
type meta struct {
	Accepted     uint64 `json:"accepted"` // acceptance counter: the next q/ key
	Seq          int64  `json:"seq"`      // the last signed event
	TxID         string `json:"tx_id,omitempty"`
	CID          string `json:"cid,omitempty"`
	ConfirmedSeq int64  `json:"confirmed_seq"`
	Queued       int    `json:"queued"`
	Failed       int    `json:"failed"`
	UpdatedAt    int64  `json:"updated_at"`
	// Attempts counts the "prepare" failures in a row (see HandleEffect).
	Attempts int `json:"attempts,omitempty"`
	// ResignFrom, when set, is the lowest event whose transaction expired unmined: it and
	// every later event not mined are signed again, in batches (resign.go).
	ResignFrom int64 `json:"resign_from,omitempty"`
	// Bundle mode (bundle.go): the last event in a bundle, that bundle's wrapper, and the
	// first event of the lowest bundle whose wrapper expired unmined (it and every later
	// wrapper not mined are signed again).
	BundledSeq int64  `json:"bundled_seq,omitempty"`
	BundleTx   string `json:"bundle_tx,omitempty"`
	RewrapFrom int64  `json:"rewrap_from,omitempty"`
	// Bundle mode: the last event whose bundle is final (its wrapper ReorgDepth deep: its
	// bytes dropped), and the first event of the lowest confirmed bundle a reorg dropped,
	// until it is confirmed again.
	FinalSeq  int64 `json:"final_seq,omitempty"`
	ReorgFrom int64 `json:"reorg_from,omitempty"`
	// WatchFrom is the first event of the lowest bundle whose replaced wrappers are still
	// asked about (bundle mode; 0: none).
	WatchFrom int64 `json:"watch_from,omitempty"`
	// Mode is ModeBundle once the chain signed a data item: from then on it stays in bundles
	// whatever the --chain-mode of the node leading it (the L1 mode could not go on from an
	// item, nor bundle the items signed).
	Mode string `json:"mode,omitempty"`
	// ItemSigner is the address of the key that signs the chain's items (bundle mode): a
	// chain has one, and a node with another signs none of its events.
	ItemSigner string `json:"item_signer,omitempty"`
}

// version is one accepted (entity_id, ver).
type version struct {
	Event
	Status    string `json:"status"`
	Seq       int64  `json:"seq,omitempty"`
	TxID      string `json:"tx_id,omitempty"`
	Error     string `json:"error,omitempty"`
	CreatedAt int64  `json:"created_at"`
	Queue     uint64 `json:"queue,omitempty"` // its q/ key while queued
}

// record is a signed event: what MethodEvent shows of it, and what only the actor needs.
type record struct {
	eventView
	Tx json.RawMessage `json:"tx,omitempty"` // the signed transaction, until confirmed
	// Item is the signed data item in bundle mode, until its bundle is confirmed.
	Item []byte `json:"item,omitempty"`
	// AnchorHeight is (at least) the height of the transaction's anchor; Mined is set once
	// the node showed it in a block; Replaced lists the transactions this event had before,
	// which expired unmined (never on the chain, and never to be).
	AnchorHeight int64 `json:"anchor_height,omitempty"`
	// ExpiredAt is the height at which a poll saw the transaction unmined past its anchor's
	// validity: it can never be mined (resign.go).
	ExpiredAt int64    `json:"expired_at,omitempty"`
	Accepted  int64    `json:"accepted,omitempty"` // the version's CreatedAt (for metrics)
	Mined     bool     `json:"mined,omitempty"`
	Replaced  []string `json:"replaced,omitempty"`
}

var metaKey = []byte("m")

func queueKey(acc uint64) []byte         { return fmt.Appendf(nil, "q/%016x", acc) }
func eventKey(seq int64) []byte          { return fmt.Appendf(nil, "e/%016x", seq) }
func latestKey(entity string) []byte     { return append([]byte("l/"), entity...) }
func failedKey(versionKey []byte) []byte { return append([]byte("f/"), versionKey...) }
func versionKey(entity string, ver int64) []byte {
	return fmt.Appendf(append(append([]byte("v/"), entity...), 0), "%016x", ver)
}

func load[T any](ctx *actors.Context, key []byte) (T, bool, error) {
	var v T
	b, found, err := ctx.Get(key)
	if err != nil || !found {
		return v, found, err
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, false, fmt.Errorf("chain %s: %s: %w", ctx.ID(), key, err)
	}
	return v, true, nil
}

func store(ctx *actors.Context, key []byte, v any) {
	b, _ := json.Marshal(v)
	ctx.Put(key, b)
}
