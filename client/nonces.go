package client

import (
	"context"
	"net/http"
	"sync"
)

// Nonce is an oracle nonce: the answer of IssueNonce (UsedAt nil) and of GetNonce.
type Nonce struct {
	Nonce     string `json:"nonce"`
	OrgID     string `json:"org_id"`
	IssuedAt  int64  `json:"issued_at"`  // Unix ms
	ExpiresAt int64  `json:"expires_at"` // Unix ms
	UsedAt    *int64 `json:"used_at"`    // Unix ms; nil while unused
}

// ConsumeRequest is the body of POST /v1/nonces/{nonce}/consume.
type ConsumeRequest struct {
	OrgID string `json:"org_id"`
	// RequestID makes the consume idempotent: the server answers 200 again to a consume of
	// the same nonce with the same request id. ConsumeNonce fills it when empty.
	RequestID string `json:"request_id,omitempty"`
}

// Consumed is the answer of a successful consume.
type Consumed struct {
	Nonce  string `json:"nonce"`
	UsedAt int64  `json:"used_at"` // Unix ms
}

// IssueNonce issues a nonce for an organisation. Not idempotent: a transport error other
// than a failed dial is returned, not retried (the lost nonce, if any, simply expires).
func (c *Client) IssueNonce(ctx context.Context, orgID string) (*Nonce, error) {
	var out Nonce
	body := struct {
		OrgID string `json:"org_id"`
	}{orgID}
	var node string
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/nonces", body: body, answered: &node, anyLeader: true}, &out); err != nil {
		return nil, err
	}
	if len(c.bases) > 1 {
		c.issuers.remember(out.Nonce, node)
	}
	return &out, nil
}

// issuers remembers which node issued each recent nonce. A node issues from a shard of the
// oracle it leads, so that node is where consuming the nonce needs no forwarding; the
// consume goes there first (and, should it fail, on to the others in turn). Bounded: the
// oldest are forgotten.
type issuers struct {
	mu   sync.Mutex
	by   map[string]string // nonce → base URL
	ring []string          // the nonces remembered, oldest first from next
	next int
}

// maxIssuers bounds the nonces remembered.
const maxIssuers = 1 << 14

func (h *issuers) remember(nonce, base string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.by == nil {
		h.by, h.ring = map[string]string{}, make([]string, 0, maxIssuers)
	}
	if len(h.ring) < maxIssuers {
		h.ring = append(h.ring, nonce)
	} else {
		delete(h.by, h.ring[h.next])
		h.ring[h.next] = nonce
		h.next = (h.next + 1) % maxIssuers
	}
	h.by[nonce] = base
}

// issuer returns the node that issued nonce ("" when unknown).
func (h *issuers) issuer(nonce string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.by[nonce]
}

// ConsumeNonce consumes a nonce: a nonce is accepted at most once. It goes first to the node
// that issued the nonce, when this client issued it (no forwarding). When req.RequestID is
// empty a random one is generated; it is the same on every attempt of this call, so a
// retry after a lost answer gets 200 instead of 409 nonce_used. Pass your own request id
// to make retries across calls (or processes) idempotent too.
func (c *Client) ConsumeNonce(ctx context.Context, nonce string, req ConsumeRequest) (*Consumed, error) {
	if req.RequestID == "" {
		req.RequestID = c.requestID()
	}
	var out Consumed
	cl := call{method: http.MethodPost, path: "/v1/nonces/" + seg(nonce) + "/consume", body: req, idempotent: true, prefer: c.issuers.issuer(nonce), actor: nonceActor(nonce)}
	if _, err := c.do(ctx, cl, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetNonce reads a nonce.
func (c *Client) GetNonce(ctx context.Context, nonce string) (*Nonce, error) {
	var out Nonce
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/nonces/" + seg(nonce), idempotent: true, actor: nonceActor(nonce)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
