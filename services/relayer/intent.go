package relayer

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/mr-tron/base58"
	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/ident"
	"github.com/shardkeeper/shardkeeper/near"
)

// Intent statuses.
const (
	StatusQueued    = "queued"    // accepted, not signed (or being signed again)
	StatusSubmitted = "submitted" // signed; its transaction may land
	StatusSucceeded = "succeeded" // landed, succeeded (terminal)
	StatusFailed    = "failed"    // landed, its execution failed (terminal)
	StatusRejected  = "rejected"  // refused by NEAR, never lands (terminal)
)

// IntentError is a rejected intent's error: NEAR's error name and its message.
type IntentError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Intent is an intent record as the API shows it.
type Intent struct {
	IdempotencyKey string          `json:"idempotency_key"`
	AccountID      string          `json:"account_id"`
	PublicKey      string          `json:"public_key"`
	Status         string          `json:"status"`
	Nonce          *uint64         `json:"nonce"`
	TxHash         *string         `json:"tx_hash"`
	Attempts       int             `json:"attempts"`
	Outcome        json.RawMessage `json:"outcome"`
	Error          *IntentError    `json:"error"`
	CreatedAt      int64           `json:"created_at"`
	UpdatedAt      int64           `json:"updated_at"`
}

// record is the stored intent, i/<idempotency key>: the API's fields and what the actor
// needs to sign and drive it.
type record struct {
	Intent
	ReceiverID     string          `json:"receiver_id,omitempty"`
	Actions        json.RawMessage `json:"actions,omitempty"`         // NEAR's JSON form
	SignedDelegate []byte          `json:"signed_delegate,omitempty"` // borsh SignedDelegateAction
	RequestHash    []byte          `json:"request_hash"`              // of the canonical request
	Seq            uint64          `json:"seq"`                       // its place in the queue
	// The latest signed transaction: its bytes, the height of its block hash, whether a send
	// was refused for its nonce or block hash, when it was last sent (Unix ms).
	Signed      []byte `json:"signed,omitempty"`
	BlockHeight uint64 `json:"block_height,omitempty"`
	Stale       bool   `json:"stale,omitempty"`
	Landed      bool   `json:"landed,omitempty"` // in a block, not final yet
	SentAt      int64  `json:"sent_at,omitempty"`
	RemoveAt    int64  `json:"remove_at,omitempty"` // terminal: when retention removes it
}

func (r *record) terminal() bool {
	return r.Status == StatusSucceeded || r.Status == StatusFailed || r.Status == StatusRejected
}

func (r *record) flight() Flight {
	return Flight{Nonce: *r.Nonce, BlockHeight: r.BlockHeight, Stale: r.Stale}
}

// meta is the key's state, key m.
type meta struct {
	// NextNonce is the nonce of the next transaction, nil until learned from the chain.
	NextNonce *uint64 `json:"next_nonce"`
	// LastUsed is the greatest nonce this key signed with (0: none).
	LastUsed  uint64       `json:"last_used"`
	NextSeq   uint64       `json:"next_seq"`
	LastError *KeyError    `json:"last_error"`
	Block     *blockRecord `json:"block,omitempty"` // the latest block seen
}

// blockRecord is a block the key signs against and measures the validity window by.
type blockRecord struct {
	Height uint64    `json:"height"`
	Hash   near.Hash `json:"hash"`
	SeenAt int64     `json:"seen_at"`
}

// KeyError is the key's last error.
type KeyError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	At      int64  `json:"at"`
}

// Storage keys (user keys of one key actor):
//
//	i/<idempotency key>   record (JSON)
//	q/<u64 seq>           idempotency key of a queued (unsigned) intent, FIFO by seq
//	f/<u64 nonce>         idempotency key of a signed, non-terminal intent
//	r/<u64 remove_at><idempotency key>   empty; the retention index (an actors.TimeIndex)
//	m                     meta (JSON)
//	c/queued              the number of q/ entries (an actors.Counter)
//	c/flights             the number of f/ entries
//	c/landed              the number of f/ entries whose transaction is known to be in a block
var (
	keyMeta      = []byte("m")
	prefixIntent = []byte("i/")
	prefixQueue  = []byte("q/")
	prefixFlight = []byte("f/")
	retention    = actors.TimeIndex{Prefix: []byte("r/")}
	queuedCount  = actors.Counter{Key: []byte("c/queued")}
	flightCount  = actors.Counter{Key: []byte("c/flights")}
	landedCount  = actors.Counter{Key: []byte("c/landed")}
)

func intentKey(idem string) []byte { return append(bytes.Clone(prefixIntent), idem...) }
func queueKey(seq uint64) []byte   { return binary.BigEndian.AppendUint64(bytes.Clone(prefixQueue), seq) }
func flightKey(n uint64) []byte    { return binary.BigEndian.AppendUint64(bytes.Clone(prefixFlight), n) }

// keyNumber is the u64 that ends a q/ or f/ key.
func keyNumber(k []byte) uint64 {
	if len(k) < 8 {
		return 0
	}
	return binary.BigEndian.Uint64(k[len(k)-8:])
}

func getJSON(ctx *actors.Context, key []byte, v any) (bool, error) {
	b, ok, err := ctx.Get(key)
	if err != nil || !ok {
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, fmt.Errorf("%s %s: decode %q: %w", ctx.Kind(), ctx.ID(), key, err)
	}
	return true, nil
}

func putJSON(ctx *actors.Context, key []byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%s %s: encode %q: %w", ctx.Kind(), ctx.ID(), key, err)
	}
	ctx.Put(key, b)
	return nil
}

func loadMeta(ctx *actors.Context) (meta, error) {
	var m meta
	_, err := getJSON(ctx, keyMeta, &m)
	return m, err
}

func loadRecord(ctx *actors.Context, idem string) (*record, bool, error) {
	var r record
	ok, err := getJSON(ctx, intentKey(idem), &r)
	if err != nil || !ok {
		return nil, false, err
	}
	return &r, true, nil
}

// SubmitRequest is the body of MethodSubmit: receiver_id and actions, or signed_delegate.
type SubmitRequest struct {
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	ReceiverID     string          `json:"receiver_id,omitempty"`
	Actions        json.RawMessage `json:"actions,omitempty"`
	SignedDelegate string          `json:"signed_delegate,omitempty"` // base64 borsh
}

// Submitted is the reply of MethodSubmit: the record, and whether it existed before (a
// repeat of an identical request).
type Submitted struct {
	Intent  Intent `json:"intent"`
	Existed bool   `json:"existed"`
}

var idemPattern = regexp.MustCompile(`^[A-Za-z0-9._:@+=-]{1,256}$`)

// maxActions bounds the actions of one intent.
const maxActions = 100

// checked is a validated SubmitRequest.
type checked struct {
	idem        string
	receiverID  string
	actions     json.RawMessage
	delegate    []byte
	maxBlock    uint64 // of the delegate action
	requestHash []byte
	view        intentView // what its account's policy judges
}

// Check validates the request as the contract says, and fills in the idempotency key of a
// delegate that has none. Its errors are the outcomes invalid_request, invalid_id,
// unsupported_action and invalid_delegate.
func (s SubmitRequest) check() (checked, error) {
	var c checked
	switch {
	case s.SignedDelegate != "" && (s.ReceiverID != "" || len(s.Actions) > 0):
		return c, actors.Errorf("invalid_request", "give receiver_id and actions, or signed_delegate, not both")
	case s.SignedDelegate != "":
		raw, err := base64.StdEncoding.DecodeString(s.SignedDelegate)
		if err != nil {
			return c, actors.Errorf("invalid_delegate", "signed_delegate is not base64")
		}
		sda, err := near.DecodeSignedDelegateAction(raw)
		if err != nil {
			return c, actors.Errorf("invalid_delegate", "signed_delegate: %s", ident.Clip(err.Error()))
		}
		h, err := sda.Verify()
		if err != nil {
			return c, actors.Errorf("invalid_delegate", "signed_delegate: %s", ident.Clip(err.Error()))
		}
		// The policy judges the delegate's receiver: it must be an account id, as NEAR will
		// refuse it otherwise, and a wildcard must not match a malformed one.
		for _, id := range []string{sda.DelegateAction.SenderID, sda.DelegateAction.ReceiverID} {
			if err := near.ValidateAccountID(id); err != nil {
				return c, actors.Errorf("invalid_delegate", "signed_delegate: %s", ident.Clip(err.Error()))
			}
		}
		c.delegate, c.maxBlock = raw, sda.DelegateAction.MaxBlockHeight
		c.view = intentView{delegate: true, receiver: sda.DelegateAction.ReceiverID, actions: sda.DelegateAction.Actions}
		if s.IdempotencyKey == "" {
			s.IdempotencyKey = "delegate:" + base58.Encode(h[:])
		}
	default:
		if err := near.ValidateAccountID(s.ReceiverID); err != nil {
			return c, actors.Errorf("invalid_request", "receiver_id: %s", ident.Clip(err.Error()))
		}
		actions, err := near.ParseActions(s.Actions)
		if errors.Is(err, near.ErrUnsupportedAction) {
			return c, actors.Errorf("unsupported_action", "%s", ident.Clip(err.Error()))
		}
		if err != nil {
			return c, actors.Errorf("invalid_request", "%s", ident.Clip(err.Error()))
		}
		if len(actions) == 0 || len(actions) > maxActions {
			return c, actors.Errorf("invalid_request", "an intent has 1 to %d actions, not %d", maxActions, len(actions))
		}
		c.receiverID = s.ReceiverID
		c.view = intentView{receiver: s.ReceiverID, actions: actions}
		if c.actions, err = canonical(s.Actions); err != nil {
			return c, actors.Errorf("invalid_request", "actions: %s", ident.Clip(err.Error()))
		}
	}
	if !idemPattern.MatchString(s.IdempotencyKey) {
		return c, actors.Errorf("invalid_id", "idempotency_key does not match %s", idemPattern)
	}
	c.idem = s.IdempotencyKey
	body, err := json.Marshal(struct {
		Idem     string          `json:"idempotency_key"`
		Receiver string          `json:"receiver_id"`
		Actions  json.RawMessage `json:"actions"`
		Delegate []byte          `json:"signed_delegate"`
	}{c.idem, c.receiverID, c.actions, c.delegate})
	if err != nil {
		return c, fmt.Errorf("encode request: %w", err)
	}
	sum := sha256.Sum256(body)
	c.requestHash = sum[:]
	return c, nil
}

// canonical re-encodes JSON with sorted object keys and no spacing, so that requests equal as
// JSON compare equal as bytes.
func canonical(raw json.RawMessage) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}
