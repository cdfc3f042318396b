package ans104

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"

	"github.com/shardkeeper/shardkeeper/arweave"
)

// SignatureType is the first field of a data item: it fixes the kind of key, and so the
// lengths of the signature and owner fields that follow.
type SignatureType uint16

// The signature types this package reads and writes (ANS-104 registers more, for other
// chains' keys; items of those are refused as unknown).
const (
	// SignatureArweave is RSA-PSS over SHA-256 with a 4096-bit Arweave wallet key.
	SignatureArweave SignatureType = 1
	// SignatureEd25519 is Ed25519 (RFC 8032) over the message itself.
	SignatureEd25519 SignatureType = 2
)

func (t SignatureType) String() string {
	if s, ok := schemes[t]; ok {
		return s.name
	}
	return fmt.Sprintf("signature type %d", uint16(t))
}

// scheme is what a signature type fixes.
type scheme struct {
	name             string
	sigLen, ownerLen int
	verify           func(owner, msg, sig []byte) error
}

var schemes = map[SignatureType]scheme{
	SignatureArweave: {name: "arweave", sigLen: 512, ownerLen: 512, verify: verifyArweave},
	SignatureEd25519: {name: "ed25519", sigLen: 64, ownerLen: 32, verify: verifyEd25519},
}

// arweaveExponent is the public exponent of every Arweave key: the owner field carries only the
// modulus.
const arweaveExponent = 65537

// arweaveSaltLength is the PSS salt of signatures made here: the hash's length, what arweave-js
// uses in browsers and what every verifier tries.
const arweaveSaltLength = 32

func verifyArweave(owner, msg, sig []byte) error {
	// A 4096-bit modulus fills its 512 bytes; anything else is not an Arweave key, and
	// refusing it here keeps odd moduli away from the RSA code.
	if owner[0] == 0 {
		return errors.New("the owner is not a 4096-bit modulus")
	}
	pub := &rsa.PublicKey{N: new(big.Int).SetBytes(owner), E: arweaveExponent}
	h := sha256.Sum256(msg)
	// Any salt length: arbundles on Node signs with the longest, browsers with 32.
	return rsa.VerifyPSS(pub, crypto.SHA256, h[:], sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthAuto})
}

func verifyEd25519(owner, msg, sig []byte) error {
	if !ed25519.Verify(ed25519.PublicKey(owner), msg, sig) {
		return errors.New("ed25519 verification failed")
	}
	return nil
}

// Signer signs data items: it names its signature type, gives the owner field (its public key)
// and signs a message, the 48-byte deep hash of the item. Keys held elsewhere (a hardware or
// remote signer) implement it too, or sign Unsigned.SignatureData and use WithSignature.
type Signer interface {
	SignatureType() SignatureType
	Owner() []byte
	Sign(message []byte) ([]byte, error)
}

// ArweaveSigner signs with an Arweave wallet (signature type 1).
type ArweaveSigner struct {
	key   *rsa.PrivateKey
	owner []byte
}

// NewArweaveSigner returns a signer for wallet w, which must hold a 4096-bit key with the
// exponent 65537 (the format has room for no other).
func NewArweaveSigner(w *arweave.Wallet) (*ArweaveSigner, error) {
	key, err := walletKey(w)
	if err != nil {
		return nil, fmt.Errorf("ans104: arweave signer: %w", err)
	}
	if key.N.BitLen() != 4096 || key.E != arweaveExponent {
		return nil, fmt.Errorf("ans104: arweave signer: a %d-bit key with exponent %d, want 4096 bits and %d", key.N.BitLen(), key.E, arweaveExponent)
	}
	return &ArweaveSigner{key: key, owner: key.N.FillBytes(make([]byte, 512))}, nil
}

// walletKey takes the RSA key out of a wallet through its JWK, the one form package arweave
// gives it in.
func walletKey(w *arweave.Wallet) (*rsa.PrivateKey, error) {
	var k struct {
		N, E, D, P, Q string
	}
	if err := json.Unmarshal(w.JWK(), &k); err != nil {
		return nil, errors.New("the wallet's key cannot be read")
	}
	ints := make([]*big.Int, 5)
	for i, s := range []string{k.N, k.E, k.D, k.P, k.Q} {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil || len(b) == 0 {
			return nil, errors.New("the wallet's key cannot be read")
		}
		ints[i] = new(big.Int).SetBytes(b)
	}
	if !ints[1].IsInt64() || ints[1].Int64() > 1<<31-1 {
		return nil, errors.New("the wallet's public exponent is out of range")
	}
	key := &rsa.PrivateKey{PublicKey: rsa.PublicKey{N: ints[0], E: int(ints[1].Int64())}, D: ints[2], Primes: []*big.Int{ints[3], ints[4]}}
	if err := key.Validate(); err != nil {
		return nil, errors.New("the wallet's key does not hold together")
	}
	key.Precompute()
	return key, nil
}

// SignatureType is SignatureArweave.
func (s *ArweaveSigner) SignatureType() SignatureType { return SignatureArweave }

// Owner is the key's modulus in 512 bytes, as the owner field holds it.
func (s *ArweaveSigner) Owner() []byte { return append([]byte(nil), s.owner...) }

// Sign signs message with RSA-PSS over SHA-256 and a 32-byte salt.
func (s *ArweaveSigner) Sign(message []byte) ([]byte, error) {
	h := sha256.Sum256(message)
	return rsa.SignPSS(rand.Reader, s.key, crypto.SHA256, h[:], &rsa.PSSOptions{SaltLength: arweaveSaltLength})
}

// Ed25519Signer signs with an Ed25519 key (signature type 2). Its signatures are deterministic:
// the same item signed twice has the same bytes and id.
type Ed25519Signer struct {
	key ed25519.PrivateKey
}

// NewEd25519Signer returns a signer for key (ed25519.NewKeyFromSeed makes one from a 32-byte
// seed).
func NewEd25519Signer(key ed25519.PrivateKey) (*Ed25519Signer, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("ans104: ed25519 signer: a key of %d bytes, want %d", len(key), ed25519.PrivateKeySize)
	}
	return &Ed25519Signer{key: append(ed25519.PrivateKey(nil), key...)}, nil
}

// SignatureType is SignatureEd25519.
func (s *Ed25519Signer) SignatureType() SignatureType { return SignatureEd25519 }

// Owner is the 32-byte public key.
func (s *Ed25519Signer) Owner() []byte {
	return append([]byte(nil), s.key.Public().(ed25519.PublicKey)...)
}

// Sign signs message with Ed25519.
func (s *Ed25519Signer) Sign(message []byte) ([]byte, error) {
	return ed25519.Sign(s.key, message), nil
}
