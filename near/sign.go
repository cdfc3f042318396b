package near

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"strings"

	"github.com/mr-tron/base58"
)

// ErrBadSignature is wrapped when a signature does not verify.
var ErrBadSignature = errors.New("signature does not verify")

// Signer signs messages with one ed25519 key. KeyPair is the in-memory implementation; the
// interface lets the key live elsewhere (an HSM, a test double).
type Signer interface {
	PublicKey() PublicKey
	Sign(msg []byte) Signature
}

// KeyPair is an ed25519 key pair held in memory. Its secret never leaves it: String, GoString
// and errors about it show the public key only, and it has no exported way to read the secret.
type KeyPair struct {
	private ed25519.PrivateKey
	public  PublicKey
}

// ParseKeyPair parses NEAR's secret key form, "ed25519:<base58 of 64 bytes>": the 32-byte
// seed followed by the 32-byte public key, as near-cli and near-api-js write key files. The
// public half must be the one the seed derives, or the string is corrupt. Error messages never
// contain the input.
func ParseKeyPair(s string) (*KeyPair, error) {
	curve, data, ok := strings.Cut(s, ":")
	if !ok || !strings.EqualFold(curve, "ed25519") {
		return nil, errors.New("secret key: want the form ed25519:<base58>")
	}
	raw, err := base58.Decode(data)
	defer clear(raw)
	if err != nil || len(raw) != ed25519.PrivateKeySize {
		// Neither the decoder's message nor the length can reveal the secret's content.
		return nil, fmt.Errorf("secret key: want base58 of %d bytes", ed25519.PrivateKeySize)
	}
	kp := NewKeyPairFromSeed(raw[:ed25519.SeedSize])
	if !bytes.Equal(raw[ed25519.SeedSize:], kp.public[:]) {
		return nil, fmt.Errorf("secret key: its public half is not the one its seed derives (want %s)", kp.public)
	}
	return kp, nil
}

// NewKeyPairFromSeed derives the key pair of a 32-byte ed25519 seed. It panics if the seed is
// not 32 bytes, as ed25519.NewKeyFromSeed does.
func NewKeyPairFromSeed(seed []byte) *KeyPair {
	priv := ed25519.NewKeyFromSeed(seed)
	kp := &KeyPair{private: priv}
	copy(kp.public[:], priv[ed25519.SeedSize:])
	return kp
}

// PublicKey implements Signer.
func (k *KeyPair) PublicKey() PublicKey { return k.public }

// Sign implements Signer. ed25519 signatures are deterministic: the same key and message
// always give the same signature (which the golden vectors rely on).
func (k *KeyPair) Sign(msg []byte) Signature {
	var s Signature
	copy(s[:], ed25519.Sign(k.private, msg))
	return s
}

// String shows the public key only. Value receivers, so that a KeyPair printed by value
// (not through its pointer) does not show its fields either.
func (k KeyPair) String() string { return "KeyPair(" + k.public.String() + ")" }

// GoString keeps %#v from printing the secret.
func (k KeyPair) GoString() string { return k.String() }

// SignTransaction signs t with s: the signature covers t's hash, sha256 of its borsh bytes.
// t.PublicKey must be s's key, or NEAR would refuse the signature. It returns the signed
// transaction and its hash, the id to query its status by.
func SignTransaction(t Transaction, s Signer) (*SignedTransaction, Hash, error) {
	if t.PublicKey != s.PublicKey() {
		return nil, Hash{}, fmt.Errorf("sign transaction: its public key %s is not the signer's %s", t.PublicKey, s.PublicKey())
	}
	h, err := t.Hash()
	if err != nil {
		return nil, Hash{}, fmt.Errorf("sign transaction: %w", err)
	}
	return &SignedTransaction{Transaction: t, Signature: s.Sign(h[:])}, h, nil
}

// SignDelegateAction signs d with s over its NEP-461 hash and returns the signed action and
// that hash.
func SignDelegateAction(d DelegateAction, s Signer) (*SignedDelegateAction, Hash, error) {
	if d.PublicKey != s.PublicKey() {
		return nil, Hash{}, fmt.Errorf("sign delegate action: its public key %s is not the signer's %s", d.PublicKey, s.PublicKey())
	}
	h, err := d.Hash()
	if err != nil {
		return nil, Hash{}, fmt.Errorf("sign delegate action: %w", err)
	}
	return &SignedDelegateAction{DelegateAction: d, Signature: s.Sign(h[:])}, h, nil
}

// Verify checks the signature against the transaction's hash and public key, as a node does
// before anything else. It returns the hash.
func (s *SignedTransaction) Verify() (Hash, error) {
	h, err := s.Transaction.Hash()
	if err != nil {
		return Hash{}, err
	}
	if !s.Transaction.PublicKey.Verify(h[:], s.Signature) {
		return Hash{}, fmt.Errorf("transaction %s by %s: %w", h, s.Transaction.PublicKey, ErrBadSignature)
	}
	return h, nil
}

// Verify checks the sender's signature against the delegate action's NEP-461 hash and
// public key. It returns the hash. Whether the key belongs to the sender, with a matching
// nonce, is for the chain to say.
func (s *SignedDelegateAction) Verify() (Hash, error) {
	h, err := s.DelegateAction.Hash()
	if err != nil {
		return Hash{}, err
	}
	if !s.DelegateAction.PublicKey.Verify(h[:], s.Signature) {
		return Hash{}, fmt.Errorf("delegate action %s by %s: %w", h, s.DelegateAction.PublicKey, ErrBadSignature)
	}
	return h, nil
}
