package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
)

// Event statuses: queued → signed → posted → confirmed, or failed before signing.
const (
	EventQueued    = "queued"    // accepted, not signed yet
	EventSigned    = "signed"    // its seq and transaction are assigned
	EventPosted    = "posted"    // the gateway took its transaction
	EventConfirmed = "confirmed" // mined deep enough
	EventFailed    = "failed"    // retries exhausted before signing: not in the chain (RetryChain)
)

// ChainEvent is the body of AppendEvent: one version of an entity.
type ChainEvent struct {
	EntityID string `json:"entity_id"` // ^[A-Za-z0-9._:@-]{1,200}$
	Ver      int64  `json:"ver"`       // ≥ 1
	Op       string `json:"op"`        // ^[a-z_]{1,32}$
	Vis      string `json:"vis"`       // ^[a-z_]{1,32}$
	TS       int64  `json:"ts,omitempty"`
	// CID, when set, must be the manifest's CIDv1 (the server computes it either way).
	CID      string          `json:"cid,omitempty"`
	Manifest json.RawMessage `json:"manifest"` // a JSON object
}

// Appended is the answer of AppendEvent.
type Appended struct {
	Chain     string `json:"chain"`
	EntityID  string `json:"entity_id"`
	Ver       int64  `json:"ver"`
	CID       string `json:"cid"`
	Status    string `json:"status"`
	CreatedAt int64  `json:"created_at"` // Unix ms
}

// ChainHead is the answer of ChainHead: the last signed event and the counters.
type ChainHead struct {
	Chain        string  `json:"chain"`
	Seq          int64   `json:"seq"`
	TxID         *string `json:"tx_id"` // nil before the first event
	CID          *string `json:"cid"`
	ConfirmedSeq int64   `json:"confirmed_seq"`
	BundleTx     *string `json:"bundle_tx,omitempty"` // bundle mode: the last bundle's wrapper
	Queued       int     `json:"queued"`
	Failed       int     `json:"failed"`
	UpdatedAt    int64   `json:"updated_at"`
}

// SignedEvent is the answer of GetEvent: an event of the chain.
type SignedEvent struct {
	Seq      int64   `json:"seq"`
	EntityID string  `json:"entity_id"`
	Ver      int64   `json:"ver"`
	CID      string  `json:"cid"`
	Op       string  `json:"op"`
	Vis      string  `json:"vis"`
	TS       int64   `json:"ts"`
	TxID     string  `json:"tx_id"`
	PrevTx   *string `json:"prev_tx"` // nil for seq 1
	PrevCID  *string `json:"prev_cid"`
	Status   string  `json:"status"`
}

// AnchoredEntity is the answer of GetEntity: the latest anchored version of an entity.
type AnchoredEntity struct {
	EntityID string `json:"entity_id"`
	Ver      int64  `json:"ver"`
	CID      string `json:"cid"`
	TxID     string `json:"tx_id"`
	Seq      int64  `json:"seq"`
	TS       int64  `json:"ts"`
}

// EntityVersion is the answer of GetVersion: one accepted version, anchored or not.
type EntityVersion struct {
	EntityID string  `json:"entity_id"`
	Ver      int64   `json:"ver"`
	CID      string  `json:"cid"`
	Status   string  `json:"status"`
	TxID     *string `json:"tx_id"`
	Seq      int64   `json:"seq"` // 0 until signed
	TS       int64   `json:"ts"`
	Error    *string `json:"error"` // why a failed version failed
}

// Proof is the answer of InclusionProof and ConsistencyProof: RFC 6962 hashes, base64.
type Proof struct {
	Seq    int64    `json:"seq,omitempty"`
	Size   int64    `json:"size,omitempty"`
	From   int64    `json:"from,omitempty"`
	To     int64    `json:"to,omitempty"`
	Hashes []string `json:"hashes"`
}

// WithChainToken sets the bearer token sent on chain writes (the server's --chain-token).
func WithChainToken(token string) Option { return func(c *Client) { c.chainToken = token } }

// chainPath is the escaped path /v1/chains/{chain}/rest.
func chainPath(chain, rest string) (string, error) {
	if chain == "" || chain == "." || chain == ".." {
		return "", fmt.Errorf("client: %q cannot be a chain name", chain)
	}
	return "/v1/chains/" + seg(chain) + "/" + rest, nil
}

// AppendEvent appends a version of an entity to chain. created is true for a new event
// (201), false for an identical repeat (200) — also when this call's own first attempt
// created it and its answer was lost. It is idempotent by (entity_id, ver), so every failure
// is retried like a read's; the same version with other content is 409 event_conflict.
func (c *Client) AppendEvent(ctx context.Context, chain string, e ChainEvent) (out *Appended, created bool, err error) {
	path, err := chainPath(chain, "events")
	if err != nil {
		return nil, false, err
	}
	out = &Appended{}
	status, err := c.do(ctx, call{actor: &actor{kindChain, chain}, method: http.MethodPost, path: path, body: e, chain: true, idempotent: true}, out)
	if err != nil {
		return nil, false, err
	}
	return out, status == http.StatusCreated, nil
}

// ChainHead reads chain's head (seq 0 for a chain never written).
func (c *Client) ChainHead(ctx context.Context, chain string) (*ChainHead, error) {
	return chainGet[ChainHead](ctx, c, chain, "head")
}

// GetEvent reads event seq of chain (404 unknown_event).
func (c *Client) GetEvent(ctx context.Context, chain string, seq int64) (*SignedEvent, error) {
	return chainGet[SignedEvent](ctx, c, chain, "events/"+strconv.FormatInt(seq, 10))
}

// GetEntity reads the latest anchored version of entityID in chain (404 unknown_entity).
func (c *Client) GetEntity(ctx context.Context, chain, entityID string) (*AnchoredEntity, error) {
	return chainGet[AnchoredEntity](ctx, c, chain, "entities/"+seg(entityID))
}

// GetVersion reads version ver of entityID in chain (404 unknown_version).
func (c *Client) GetVersion(ctx context.Context, chain, entityID string, ver int64) (*EntityVersion, error) {
	return chainGet[EntityVersion](ctx, c, chain, "entities/"+seg(entityID)+"/versions/"+strconv.FormatInt(ver, 10))
}

// Checkpoint reads chain's latest checkpoint: a C2SP tlog-checkpoint signed note (404
// chain_log_disabled without a log key on the server).
func (c *Client) Checkpoint(ctx context.Context, chain string) ([]byte, error) {
	path, err := chainPath(chain, "checkpoint")
	if err != nil {
		return nil, err
	}
	var out []byte
	if _, err := c.do(ctx, call{actor: &actor{kindChain, chain}, method: http.MethodGet, path: path, idempotent: true}, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// InclusionProof proves event seq in the tree of the first size events.
func (c *Client) InclusionProof(ctx context.Context, chain string, seq, size int64) (*Proof, error) {
	return chainGet[Proof](ctx, c, chain, fmt.Sprintf("proof/inclusion?seq=%d&size=%d", seq, size))
}

// ConsistencyProof proves the tree of the first from events a prefix of that of the first to.
func (c *Client) ConsistencyProof(ctx context.Context, chain string, from, to int64) (*Proof, error) {
	return chainGet[Proof](ctx, c, chain, fmt.Sprintf("proof/consistency?from=%d&to=%d", from, to))
}

// RetryChain puts chain's failed events back at the end of its queue (admin token), at most
// 10,000 a call; it returns how many (0 when a retry after a lost answer finds them requeued
// already).
func (c *Client) RetryChain(ctx context.Context, chain string) (int, error) {
	path, err := chainPath(chain, "retry")
	if err != nil {
		return 0, err
	}
	var out struct {
		Requeued int `json:"requeued"`
	}
	if _, err := c.do(ctx, call{actor: &actor{kindChain, chain}, method: http.MethodPost, path: path, admin: true, idempotent: true}, &out); err != nil {
		return 0, err
	}
	return out.Requeued, nil
}

// chainGet reads rest of chain into a T.
func chainGet[T any](ctx context.Context, c *Client, chain, rest string) (*T, error) {
	path, err := chainPath(chain, rest)
	if err != nil {
		return nil, err
	}
	var out T
	if _, err := c.do(ctx, call{actor: &actor{kindChain, chain}, method: http.MethodGet, path: path, idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
