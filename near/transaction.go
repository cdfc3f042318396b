package near

import (
	"crypto/sha256"
	"fmt"
)

// Transaction is nearcore's TransactionV0, the form near-api-js builds: SignerID spends
// from its access key PublicKey, whose nonce must become Nonce, to run Actions on ReceiverID.
// BlockHash names a recent block; NEAR refuses the transaction (Expired) once that block is
// more than the validity period (86400 blocks on mainnet) behind the chain head.
//
// Borsh: signer_id, public_key, nonce u64, receiver_id, block_hash [32]u8, actions.
type Transaction struct {
	SignerID   string
	PublicKey  PublicKey
	Nonce      uint64
	ReceiverID string
	BlockHash  Hash
	Actions    []Action
}

// Encode returns the borsh bytes of t: what is hashed and signed.
func (t *Transaction) Encode() ([]byte, error) {
	e := &encoder{}
	if err := t.encode(e); err != nil {
		return nil, err
	}
	return e.buf, nil
}

func (t *Transaction) encode(e *encoder) error {
	if err := checkStr("signer_id", t.SignerID); err != nil {
		return fmt.Errorf("encode transaction: %w", err)
	}
	if err := checkStr("receiver_id", t.ReceiverID); err != nil {
		return fmt.Errorf("encode transaction: %w", err)
	}
	e.str(t.SignerID)
	t.PublicKey.encode(e)
	e.u64(t.Nonce)
	e.str(t.ReceiverID)
	e.fixed(t.BlockHash[:])
	if err := encodeActions(e, t.Actions, false); err != nil {
		return fmt.Errorf("encode transaction: %w", err)
	}
	return nil
}

// Hash returns the transaction's hash, sha256 of its borsh bytes: the id NEAR reports it by
// and the message its signature covers.
func (t *Transaction) Hash() (Hash, error) {
	b, err := t.Encode()
	if err != nil {
		return Hash{}, err
	}
	return sha256.Sum256(b), nil
}

// DecodeTransaction decodes the borsh bytes of a TransactionV0. A TransactionV1 (tag byte 1,
// with a priority fee) is refused: near-api-js never builds one and this package has no use
// for it.
func DecodeTransaction(b []byte) (*Transaction, error) {
	d := &decoder{b: b}
	t := decodeTransaction(d)
	if err := d.finish("transaction"); err != nil {
		return nil, err
	}
	return t, nil
}

func decodeTransaction(d *decoder) *Transaction {
	// A V0 transaction starts with the u32 length of its signer id, at most 64, so its second
	// byte is 0; nearcore marks V1 with a leading 1 followed by a non-zero byte.
	if len(d.b)-d.off >= 2 && d.b[d.off] == 1 && d.b[d.off+1] != 0 {
		d.fail("transaction version 1 is not supported")
		return nil
	}
	t := &Transaction{}
	t.SignerID = d.str("signer_id")
	t.PublicKey = decodePublicKey(d, "public_key")
	t.Nonce = d.u64("nonce")
	t.ReceiverID = d.str("receiver_id")
	d.fixed(t.BlockHash[:], "block_hash")
	t.Actions = decodeActions(d, false)
	return t
}

// SignedTransaction is a transaction with its signer's signature over its hash: the bytes
// that send_tx carries (base64 of its borsh encoding).
type SignedTransaction struct {
	Transaction Transaction
	Signature   Signature
}

// Encode returns the borsh bytes of s: the transaction's, then the signature's.
func (s *SignedTransaction) Encode() ([]byte, error) {
	e := &encoder{}
	if err := s.Transaction.encode(e); err != nil {
		return nil, err
	}
	s.Signature.encode(e)
	return e.buf, nil
}

// Hash returns the hash of the transaction; the signature is not part of it.
func (s *SignedTransaction) Hash() (Hash, error) { return s.Transaction.Hash() }

// DecodeSignedTransaction decodes the borsh bytes of a signed TransactionV0.
func DecodeSignedTransaction(b []byte) (*SignedTransaction, error) {
	d := &decoder{b: b}
	t := decodeTransaction(d)
	sig := decodeSignature(d, "signature")
	if err := d.finish("signed transaction"); err != nil {
		return nil, err
	}
	return &SignedTransaction{Transaction: *t, Signature: sig}, nil
}
