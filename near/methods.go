package near

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// Finality selects the block a read is answered at.
type Finality string

// The finalities nearcore accepts.
const (
	FinalityFinal      Finality = "final"      // the last final block: it will not be reverted
	FinalityOptimistic Finality = "optimistic" // the head, which a fork may still replace
)

func (f Finality) check() error {
	if f != FinalityFinal && f != FinalityOptimistic {
		return fmt.Errorf("finality %q is not %q or %q", string(f), FinalityFinal, FinalityOptimistic)
	}
	return nil
}

// BlockRef names a block.
type BlockRef struct {
	Height uint64
	Hash   Hash
}

// Block returns the height and hash of the latest block of finality f (the `block` method):
// the block hash a transaction is signed against.
func (c *Client) Block(ctx context.Context, f Finality) (BlockRef, error) {
	if err := f.check(); err != nil {
		return BlockRef{}, fmt.Errorf("near rpc block: %w", err)
	}
	var res blockResult
	if err := c.call(ctx, "block", map[string]any{"finality": f}, &res); err != nil {
		return BlockRef{}, err
	}
	return BlockRef{Height: *res.Header.Height, Hash: *res.Header.Hash}, nil
}

type blockResult struct {
	Header *struct {
		Height *uint64 `json:"height"`
		Hash   *Hash   `json:"hash"`
	} `json:"header"`
}

func (r *blockResult) validate() error {
	if r.Header == nil || r.Header.Height == nil || r.Header.Hash == nil {
		return errors.New("no header height and hash")
	}
	return nil
}

// AccessKeyView is an access key as the chain holds it at BlockHeight/BlockHash. Nonce is the
// nonce of the last transaction the key signed that landed (or its starting nonce): the next
// transaction must use a larger one.
type AccessKeyView struct {
	Nonce       uint64
	Permission  AccessKeyPermission
	BlockHeight uint64
	BlockHash   Hash
}

// ViewAccessKey returns the access key publicKey of accountID (`query` with request_type
// view_access_key). A key the account does not have is an *UnknownAccessKeyError, an account
// that does not exist an *UnknownAccountError (both reachable with errors.As).
func (c *Client) ViewAccessKey(ctx context.Context, accountID string, publicKey PublicKey, f Finality) (AccessKeyView, error) {
	if err := f.check(); err != nil {
		return AccessKeyView{}, fmt.Errorf("near rpc query: %w", err)
	}
	params := map[string]any{
		"request_type": "view_access_key",
		"finality":     f,
		"account_id":   accountID,
		"public_key":   publicKey,
	}
	var res accessKeyResult
	if err := c.call(ctx, "query", params, &res); err != nil {
		return AccessKeyView{}, err
	}
	if res.Error != nil {
		e := &RPCError{Method: "query", Message: *res.Error}
		if strings.Contains(*res.Error, "does not exist while viewing") {
			e.typed = &UnknownAccessKeyError{PublicKey: publicKey.String(), BlockHeight: res.BlockHeight, BlockHash: res.BlockHash.String()}
		}
		return AccessKeyView{}, e
	}
	return AccessKeyView{Nonce: *res.Nonce, Permission: *res.Permission, BlockHeight: res.BlockHeight, BlockHash: res.BlockHash}, nil
}

type accessKeyResult struct {
	Nonce       *uint64              `json:"nonce"`
	Permission  *AccessKeyPermission `json:"permission"`
	BlockHeight uint64               `json:"block_height"`
	BlockHash   Hash                 `json:"block_hash"`
	// nearcore answers a missing key with a *result* holding an error message, a form kept
	// for old clients: {"error":"access key … does not exist while viewing",…}.
	Error *string `json:"error"`
}

func (r *accessKeyResult) validate() error {
	if r.Error == nil && (r.Nonce == nil || r.Permission == nil) {
		return errors.New("no nonce and permission")
	}
	return nil
}

// SendTx sends the borsh bytes of a signed transaction (`send_tx`) and waits until it reaches
// wait. With TxNone the node answers at once without checking the transaction (no refusal can
// come back, and NEAR may still drop it); with any other level it checks it first, so a
// refusal comes back as an InvalidTx error, and then waits up to its polling timeout, after
// which it answers a *TimeoutError (outcome unknown).
func (c *Client) SendTx(ctx context.Context, signedTx []byte, wait TxExecutionStatus) (*TxOutcome, error) {
	params, err := sendTxParams(signedTx, wait)
	if err != nil {
		return nil, err
	}
	return c.txCall(ctx, "send_tx", params)
}

// sendTxParams are the params of a send_tx of signedTx waiting until wait.
func sendTxParams(signedTx []byte, wait TxExecutionStatus) (map[string]any, error) {
	if err := wait.check(); err != nil {
		return nil, fmt.Errorf("near rpc send_tx: %w", err)
	}
	return map[string]any{
		"signed_tx_base64": base64.StdEncoding.EncodeToString(signedTx),
		"wait_until":       wait,
	}, nil
}

// TxQuery asks for a transaction's status: by Hash and SenderID, or by the signed transaction
// itself (SignedTx, borsh bytes), in which case a node that does not know the transaction
// checks it and answers the refusal it would give (Expired, InvalidNonce, ...), if any.
type TxQuery struct {
	Hash     Hash
	SenderID string
	SignedTx []byte
	// WaitUntil is the status to wait for; empty lets the node choose (EXECUTED_OPTIMISTIC).
	// TxNone answers at once: an *UnknownTransactionError when the node does not know it.
	WaitUntil TxExecutionStatus
	// Receipts asks EXPERIMENTAL_tx_status instead of tx: the same status, with the receipts.
	Receipts bool
}

// TxStatus returns a transaction's status (`tx`, or `EXPERIMENTAL_tx_status`).
func (c *Client) TxStatus(ctx context.Context, q TxQuery) (*TxOutcome, error) {
	method := "tx"
	if q.Receipts {
		method = "EXPERIMENTAL_tx_status"
	}
	params := map[string]any{}
	if q.SignedTx != nil {
		params["signed_tx_base64"] = base64.StdEncoding.EncodeToString(q.SignedTx)
	} else {
		if q.SenderID == "" {
			return nil, fmt.Errorf("near rpc %s: the sender account id is missing", method)
		}
		params["tx_hash"] = q.Hash
		params["sender_account_id"] = q.SenderID
	}
	if q.WaitUntil != "" {
		if err := q.WaitUntil.check(); err != nil {
			return nil, fmt.Errorf("near rpc %s: %w", method, err)
		}
		params["wait_until"] = q.WaitUntil
	}
	return c.txCall(ctx, method, params)
}

func (c *Client) txCall(ctx context.Context, method string, params map[string]any) (*TxOutcome, error) {
	var o TxOutcome
	if err := c.call(ctx, method, params, &o); err != nil {
		return nil, err
	}
	return &o, nil
}
