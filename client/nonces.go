package client

import (
	"context"
	"net/http"
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
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/nonces", body: body}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ConsumeNonce consumes a nonce: a nonce is accepted at most once. When req.RequestID is
// empty a random one is generated; it is the same on every attempt of this call, so a
// retry after a lost answer gets 200 instead of 409 nonce_used. Pass your own request id
// to make retries across calls (or processes) idempotent too.
func (c *Client) ConsumeNonce(ctx context.Context, nonce string, req ConsumeRequest) (*Consumed, error) {
	if req.RequestID == "" {
		req.RequestID = c.requestID()
	}
	var out Consumed
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/nonces/" + seg(nonce) + "/consume", body: req, idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetNonce reads a nonce.
func (c *Client) GetNonce(ctx context.Context, nonce string) (*Nonce, error) {
	var out Nonce
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/nonces/" + seg(nonce), idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
