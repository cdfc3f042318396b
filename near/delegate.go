package near

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// DelegateAction is a NEP-366 meta transaction body: SenderID signs Actions for ReceiverID
// with its access key PublicKey and Nonce, valid up to block MaxBlockHeight; a relayer wraps
// the signed form in a transaction of its own to SenderID, paying the gas.
//
// Borsh: sender_id, receiver_id, actions (none of them Delegate), nonce u64,
// max_block_height u64, public_key.
type DelegateAction struct {
	SenderID       string
	ReceiverID     string
	Actions        []Action
	Nonce          uint64
	MaxBlockHeight uint64
	PublicKey      PublicKey
}

// delegateActionPrefix is the NEP-461 tag of delegate actions: 2^30 (on-chain messages) plus
// the NEP number 366. Signing sha256(prefix || borsh) instead of sha256(borsh) ensures a
// delegate action's signature can never be replayed as a transaction's, and vice versa.
const delegateActionPrefix uint32 = 1<<30 + 366

// Encode returns the borsh bytes of d, without the NEP-461 prefix.
func (d *DelegateAction) Encode() ([]byte, error) {
	e := &encoder{}
	if err := d.encode(e); err != nil {
		return nil, err
	}
	return e.buf, nil
}

func (d *DelegateAction) encode(e *encoder) error {
	if err := checkStr("delegate sender_id", d.SenderID); err != nil {
		return fmt.Errorf("encode delegate action: %w", err)
	}
	if err := checkStr("delegate receiver_id", d.ReceiverID); err != nil {
		return fmt.Errorf("encode delegate action: %w", err)
	}
	e.str(d.SenderID)
	e.str(d.ReceiverID)
	if err := encodeActions(e, d.Actions, true); err != nil {
		return fmt.Errorf("encode delegate action: %w", err)
	}
	e.u64(d.Nonce)
	e.u64(d.MaxBlockHeight)
	d.PublicKey.encode(e)
	return nil
}

// Hash returns the hash NEAR verifies the sender's signature against:
// sha256(u32 LE 2^30+366 || borsh(d)), as nearcore's get_nep461_hash and near-api-js's
// signDelegateAction compute it.
func (d *DelegateAction) Hash() (Hash, error) {
	body, err := d.Encode()
	if err != nil {
		return Hash{}, err
	}
	msg := binary.LittleEndian.AppendUint32(make([]byte, 0, 4+len(body)), delegateActionPrefix)
	return sha256.Sum256(append(msg, body...)), nil
}

func decodeDelegateAction(d *decoder) DelegateAction {
	var a DelegateAction
	a.SenderID = d.str("delegate sender_id")
	a.ReceiverID = d.str("delegate receiver_id")
	a.Actions = decodeActions(d, true)
	a.Nonce = d.u64("delegate nonce")
	a.MaxBlockHeight = d.u64("delegate max_block_height")
	a.PublicKey = decodePublicKey(d, "delegate public_key")
	return a
}

// SignedDelegateAction is a delegate action with its sender's signature; as an action of the
// relayer's transaction it is the Delegate action (discriminant 8).
//
// Borsh: delegate_action, signature.
type SignedDelegateAction struct {
	DelegateAction DelegateAction
	Signature      Signature
}

// Kind implements Action.
func (SignedDelegateAction) Kind() ActionKind { return KindDelegate }

func (s SignedDelegateAction) encodeBody(e *encoder) error {
	if err := s.DelegateAction.encode(e); err != nil {
		return err
	}
	s.Signature.encode(e)
	return nil
}

// Encode returns the borsh bytes of s, the form clients hand to a relayer (in base64).
func (s *SignedDelegateAction) Encode() ([]byte, error) {
	e := &encoder{}
	if err := s.encodeBody(e); err != nil {
		return nil, err
	}
	return e.buf, nil
}

// DecodeSignedDelegateAction decodes the borsh bytes of a SignedDelegateAction. It checks the
// encoding only; Verify checks the signature.
func DecodeSignedDelegateAction(b []byte) (*SignedDelegateAction, error) {
	d := &decoder{b: b}
	s := decodeSignedDelegate(d)
	if err := d.finish("signed delegate action"); err != nil {
		return nil, err
	}
	return &s, nil
}

func decodeSignedDelegate(d *decoder) SignedDelegateAction {
	a := decodeDelegateAction(d)
	return SignedDelegateAction{DelegateAction: a, Signature: decodeSignature(d, "delegate signature")}
}
