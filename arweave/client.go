package arweave

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Errors of a gateway call. ErrUnknownOutcome is the one a caller must think about: the
// request may have been applied (a dropped connection after sending, 429, 5xx); posting the
// same signed bytes again is always safe (a node answers 208 for a transaction it has).
var (
	ErrUnknownOutcome = errors.New("arweave: outcome unknown")
	ErrNotFound       = errors.New("arweave: not found")
	ErrPending        = errors.New("arweave: pending, not mined yet")
	ErrRejected       = errors.New("arweave: rejected")
)

// Client talks to an Arweave node or gateway over HTTP.
type Client struct {
	base string
	hc   *http.Client
}

// NewClient returns a client of the gateway at base (http://host:port). hc nil: a client
// with a 30 s timeout.
func NewClient(base string, hc *http.Client) *Client {
	if hc == nil {
		// No redirects: a gateway checked to be https must not hand the chain on to plain http.
		hc = &http.Client{Timeout: 30 * time.Second, CheckRedirect: noRedirects}
	}
	return &Client{base: strings.TrimSuffix(base, "/"), hc: hc}
}

func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// Status is a transaction's state on the network.
type Status struct {
	// Pending: accepted in the mempool, not mined yet (202). Otherwise mined in BlockHeight,
	// Confirmations deep.
	Pending       bool
	BlockHeight   int64
	BlockHash     string
	Confirmations int64
}

// Anchor returns a recent block hash for a transaction's last_tx (GET /tx_anchor).
func (c *Client) Anchor(ctx context.Context) ([]byte, error) {
	b, err := c.get(ctx, "/tx_anchor")
	if err != nil {
		return nil, err
	}
	a, err := b64.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(a) == 0 {
		return nil, fmt.Errorf("arweave: GET /tx_anchor: not an anchor: %q", clip(b))
	}
	return a, nil
}

// PricedChunks is the number of whole chunks size bytes of data count as: the network prices data
// by MaxChunkSize chunks, so every size of one count has one price.
func PricedChunks(size int) int { return (size + MaxChunkSize - 1) / MaxChunkSize }

// Price returns the reward, in winston, of a transaction carrying size bytes (GET
// /price/{bytes}): a decimal integer, which may exceed 64 bits (the network holds more
// winston than that), so that a caller capping rewards sees a huge quote as too high, not as
// unreadable.
func (c *Client) Price(ctx context.Context, size int) (string, error) {
	b, err := c.get(ctx, "/price/"+strconv.Itoa(size))
	if err != nil {
		return "", err
	}
	s := strings.TrimSpace(string(b))
	if !decimal(s) {
		return "", fmt.Errorf("arweave: GET /price: not a price: %q", clip(b))
	}
	return s, nil
}

// decimal reports whether s is a decimal integer without sign or leading zero, of at most 64
// digits (a reward is a decimal string in the signed transaction).
func decimal(s string) bool {
	if s == "" || len(s) > 64 || (s[0] == '0' && len(s) > 1) {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// StatusOf returns the status of transaction id (GET /tx/{id}/status): ErrNotFound when the
// node does not know it (never posted, or dropped from the mempool).
func (c *Client) StatusOf(ctx context.Context, id string) (Status, error) {
	resp, body, err := c.do(ctx, http.MethodGet, "/tx/"+id+"/status", nil)
	if err != nil {
		return Status{}, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		var s struct {
			Height        int64  `json:"block_height"`
			Hash          string `json:"block_indep_hash"`
			Confirmations int64  `json:"number_of_confirmations"`
		}
		if err := json.Unmarshal(body, &s); err != nil {
			return Status{}, fmt.Errorf("arweave: GET /tx/%s/status: unreadable: %q", id, clip(body))
		}
		return Status{BlockHeight: s.Height, BlockHash: s.Hash, Confirmations: s.Confirmations}, nil
	case http.StatusAccepted:
		return Status{Pending: true}, nil
	case http.StatusNotFound:
		return Status{}, ErrNotFound
	}
	return Status{}, statusError("GET /tx/"+id+"/status", resp.StatusCode, body)
}

// Post posts a signed transaction: PostHeader, then PostChunks. Posting again after
// ErrUnknownOutcome is safe.
func (c *Client) Post(ctx context.Context, t *Tx) error {
	if err := c.PostHeader(ctx, t); err != nil {
		return err
	}
	return c.PostChunks(ctx, t)
}

// InBody reports whether t's data travels in the body of POST /tx (one chunk at most) rather
// than by POST /chunk.
func InBody(t *Tx) bool { return len(t.Data) <= MaxChunkSize }

// PostHeader posts a signed transaction (POST /tx): with its data in the body when InBody,
// else its header alone, the node then taking it as a transaction whose data is to come.
// 200 and 208 (already known) are both success. Posting again after ErrUnknownOutcome is
// safe.
func (c *Client) PostHeader(ctx context.Context, t *Tx) error {
	head := *t
	if !InBody(t) {
		head.Data = nil
	}
	js, err := json.Marshal(&head)
	if err != nil {
		return err
	}
	resp, body, err := c.do(ctx, http.MethodPost, "/tx", js)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAlreadyReported {
		return statusError("POST /tx", resp.StatusCode, body)
	}
	return nil
}

// PostChunks posts the data of a transaction the node took (PostHeader) chunk by chunk
// (POST /chunk), in order: nodes such as arlocal refuse a chunk ahead of the ones before it.
// Nothing when the data went in the body. A chunk the node has already is taken again, so
// posting the chunks again, after any failure, is safe.
func (c *Client) PostChunks(ctx context.Context, t *Tx) error {
	if InBody(t) {
		return nil
	}
	chunks, proofs := Chunks(t.Data), Proofs(t.Data)
	for i, p := range proofs {
		chunk, _ := json.Marshal(map[string]string{
			"data_root": b64.EncodeToString(t.DataRoot), "data_size": strconv.Itoa(t.DataSize),
			"data_path": b64.EncodeToString(p.Path), "offset": strconv.Itoa(p.Offset),
			"chunk": b64.EncodeToString(t.Data[chunks[i].Min:chunks[i].Max]),
		})
		resp, body, err := c.do(ctx, http.MethodPost, "/chunk", chunk)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAlreadyReported {
			return statusError(fmt.Sprintf("POST /chunk %d of %d", i+1, len(proofs)), resp.StatusCode, body)
		}
	}
	return nil
}

func (c *Client) get(ctx context.Context, path string) ([]byte, error) {
	resp, body, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, statusError("GET "+path, resp.StatusCode, body)
	}
	return body, nil
}

// do sends one request. A failure after the request may have been sent is ErrUnknownOutcome
// for a POST (a GET changes nothing: it is the same error either way).
func (c *Client) do(ctx context.Context, method, path string, body []byte) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err == nil {
		defer resp.Body.Close()
		var b []byte
		if b, err = io.ReadAll(io.LimitReader(resp.Body, 64<<20)); err == nil {
			return resp, b, nil
		}
	}
	if method == http.MethodPost {
		return nil, nil, fmt.Errorf("%w: %s %s: %v", ErrUnknownOutcome, method, path, err)
	}
	return nil, nil, fmt.Errorf("arweave: %s %s: %w", method, path, err)
}

// InvalidAnchor reports whether err is a node's refusal of a transaction's anchor (last_tx):
// the block it names is not among the recent blocks of the chain the node follows — too old,
// or dropped by a reorg — so that node will never mine the transaction as signed.
func InvalidAnchor(err error) bool {
	return errors.Is(err, ErrRejected) && strings.Contains(err.Error(), "Invalid anchor")
}

// statusError classifies an unexpected answer: 429 and 5xx leave the outcome unknown (the
// node may have taken it, or will on a retry); other 4xx are the node's refusal.
func statusError(what string, status int, body []byte) error {
	if status == http.StatusTooManyRequests || status >= 500 {
		return fmt.Errorf("%w: %s answered %d: %s", ErrUnknownOutcome, what, status, clip(body))
	}
	return fmt.Errorf("%w: %s answered %d: %s", ErrRejected, what, status, clip(body))
}

func clip(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// Tx returns a mined transaction's header (GET /tx/{id}): ErrNotFound when the node does not
// know it, ErrPending while it waits in the mempool.
func (c *Client) Tx(ctx context.Context, id string) (*Tx, error) {
	resp, body, err := c.do(ctx, http.MethodGet, "/tx/"+id, nil)
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		var t Tx
		if err := json.Unmarshal(body, &t); err != nil {
			return nil, fmt.Errorf("arweave: GET /tx/%s: %v", id, err)
		}
		return &t, nil
	case http.StatusAccepted:
		return nil, ErrPending
	case http.StatusNotFound:
		return nil, ErrNotFound
	}
	return nil, statusError("GET /tx/"+id, resp.StatusCode, body)
}

// Data returns a transaction's data (GET /{id}).
func (c *Client) Data(ctx context.Context, id string) ([]byte, error) {
	resp, body, err := c.do(ctx, http.MethodGet, "/"+id, nil)
	if err != nil {
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return body, nil
	case http.StatusNotFound:
		return nil, ErrNotFound
	}
	return nil, statusError("GET /"+id, resp.StatusCode, body)
}

// Height returns the node's current block height (GET /info).
func (c *Client) Height(ctx context.Context) (int64, error) {
	b, err := c.get(ctx, "/info")
	if err != nil {
		return 0, err
	}
	var info struct {
		Height int64 `json:"height"`
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return 0, fmt.Errorf("arweave: GET /info: unreadable: %q", clip(b))
	}
	return info.Height, nil
}
