package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Intent statuses: queued → submitted → succeeded, failed or rejected (the last three are
// terminal).
const (
	IntentQueued    = "queued"    // accepted, not signed yet
	IntentSubmitted = "submitted" // signed; its transaction may land
	IntentSucceeded = "succeeded" // landed and its execution succeeded
	IntentFailed    = "failed"    // landed and its execution failed; Outcome holds NEAR's status
	IntentRejected  = "rejected"  // refused by NEAR, never lands; Error says why
)

// Intent is a relayer intent record: the answer of SubmitIntent and GetIntent.
type Intent struct {
	IdempotencyKey string `json:"idempotency_key"`
	AccountID      string `json:"account_id"`
	PublicKey      string `json:"public_key"` // the access key the intent is assigned to
	Status         string `json:"status"`     // one of the Intent* constants
	// Nonce and TxHash (base58) are those of the latest signed transaction; nil before the
	// intent is first signed. Once the intent is terminal TxHash never changes.
	Nonce    *uint64 `json:"nonce"`
	TxHash   *string `json:"tx_hash"`
	Attempts int     `json:"attempts"`
	// Outcome is NEAR's execution status for succeeded and failed intents; empty (or the JSON
	// null) otherwise.
	Outcome   json.RawMessage `json:"outcome"`
	Error     *IntentError    `json:"error"`      // set for rejected intents
	CreatedAt int64           `json:"created_at"` // Unix ms
	UpdatedAt int64           `json:"updated_at"` // Unix ms
}

// Terminal reports whether the intent is succeeded, failed or rejected: it will not change
// any more.
func (i *Intent) Terminal() bool {
	return i.Status == IntentSucceeded || i.Status == IntentFailed || i.Status == IntentRejected
}

// IntentError is why NEAR refused a rejected intent's transaction: NEAR's error name as Code.
type IntentError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// SubmitIntent is the body of POST /v1/relayers/{account_id}/intents: either ReceiverID and
// Actions, or SignedDelegate.
type SubmitIntent struct {
	// IdempotencyKey names the intent (^[A-Za-z0-9._:@+=-]{1,256}$). Choose it, and keep it,
	// before submitting: a repeat of the same key with the same body reaches the same intent,
	// so an answer that was lost is recovered by submitting again or by GetIntent. It may be
	// empty only with SignedDelegate: the server then derives it from the delegate action
	// ("delegate:<base58 hash>").
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	ReceiverID     string `json:"receiver_id,omitempty"`
	// Actions is a JSON array of 1 to 100 actions in NEAR's own JSON form, e.g.
	// [{"Transfer":{"deposit":"1000000000000000000000000"}}].
	Actions json.RawMessage `json:"actions,omitempty"`
	// SignedDelegate is a base64 borsh SignedDelegateAction (NEP-366); the relayer wraps it
	// in a transaction to its sender_id.
	SignedDelegate string `json:"signed_delegate,omitempty"`
}

// Relayer is the answer of GET /v1/relayers/{account_id}: the account's access keys.
type Relayer struct {
	AccountID string       `json:"account_id"`
	Keys      []RelayerKey `json:"keys"`
	// Policy is what the account's intents may do, as in force on the node.
	Policy RelayerPolicy `json:"policy"`
	// BudgetUsed is the deposit (yocto) the intents accepted in the current window attach,
	// with a deposit budget; "" without one.
	BudgetUsed string `json:"budget_used,omitempty"`
}

// RelayerPolicy is a relayer account's policy; a nil field allows anything.
type RelayerPolicy struct {
	Receivers     []string       `json:"receivers"`
	Actions       []string       `json:"actions"`
	Methods       []string       `json:"methods"`
	MaxDeposit    *string        `json:"max_deposit"`
	DepositBudget *DepositBudget `json:"deposit_budget"`
}

// DepositBudget bounds the deposits of the intents accepted in any rolling Window.
type DepositBudget struct {
	Amount string `json:"amount"` // yocto
	Window string `json:"window"` // a Go duration
}

// RelayerKey is one access key of a relayer account.
type RelayerKey struct {
	PublicKey string `json:"public_key"`
	// NextNonce is the nonce the key's next transaction will use; nil before it is known.
	NextNonce *uint64   `json:"next_nonce"`
	Queued    int       `json:"queued"`    // accepted, unsigned intents
	InFlight  int       `json:"in_flight"` // signed, non-terminal intents
	LastError *KeyError `json:"last_error"`
}

// KeyError is the last error a relayer key met.
type KeyError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	At      int64  `json:"at"` // Unix ms
}

// relayerPath is the escaped path /v1/relayers/{accountID} followed by the escaped segments
// of rest. A segment that is empty, "." or ".." is refused: the server's router would clean
// it away and redirect to another resource.
func relayerPath(accountID string, rest ...string) (string, error) {
	p := "/v1/relayers/"
	for i, s := range append([]string{accountID}, rest...) {
		if s == "" || s == "." || s == ".." {
			return "", fmt.Errorf("client: %q cannot be a relayer path segment", s)
		}
		if i > 0 {
			p += "/"
		}
		p += seg(s)
	}
	return p, nil
}

// SubmitIntent submits an intent for the relayer account accountID: shardkeeper signs it with
// one of the account's access keys and submits it to NEAR. created is true for a new intent
// (201), false for a repeat of an identical one (200). It is idempotent by the idempotency
// key, so every failure is retried like a read's; a retry after a lost answer reports created
// false for the intent its first attempt created. The same key with a different body is
// 409 idempotency_conflict; 429 queue_full is retried after its Retry-After while the
// context allows.
func (c *Client) SubmitIntent(ctx context.Context, accountID string, req SubmitIntent) (intent *Intent, created bool, err error) {
	path, err := relayerPath(accountID, "intents")
	if err != nil {
		return nil, false, err
	}
	var out Intent
	status, err := c.do(ctx, call{method: http.MethodPost, path: path, body: req, relayer: true, idempotent: true}, &out)
	if err != nil {
		return nil, false, err
	}
	return &out, status == http.StatusCreated, nil
}

// GetIntent reads an intent. With wait > 0 the server holds the answer until the intent is
// terminal or the wait ends (it cuts waits to 30 s), then answers with the record as it is:
// a long poll. Only ctx bounds the call then, not the HTTP client's Timeout; give ctx a
// deadline beyond wait.
func (c *Client) GetIntent(ctx context.Context, accountID, idempotencyKey string, wait time.Duration) (*Intent, error) {
	path, err := relayerPath(accountID, "intents", idempotencyKey)
	if err != nil {
		return nil, err
	}
	cl := call{method: http.MethodGet, path: path, relayer: true, idempotent: true}
	if wait > 0 {
		cl.path += "?wait=" + url.QueryEscape(wait.String())
		cl.poll = true
	}
	var out Intent
	if _, err := c.do(ctx, cl, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Relayer reads the state of a relayer account's access keys.
func (c *Client) Relayer(ctx context.Context, accountID string) (*Relayer, error) {
	path, err := relayerPath(accountID)
	if err != nil {
		return nil, err
	}
	var out Relayer
	if _, err := c.do(ctx, call{method: http.MethodGet, path: path, relayer: true, idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
