package near

import (
	"crypto/ed25519"
	"fmt"
	"strings"

	"github.com/mr-tron/base58"
)

// keyTypeED25519 is the borsh tag of ed25519 in nearcore's KeyType enum (secp256k1 is 1,
// ML-DSA-65 is 2); it prefixes public keys and signatures alike.
const keyTypeED25519 = 0

// ed25519Prefix starts the string form of ed25519 keys and signatures.
const ed25519Prefix = "ed25519:"

// PublicKey is an ed25519 public key. Its string form is "ed25519:<base58 of 32 bytes>"; its
// borsh form is the key type byte 0 followed by the 32 bytes.
type PublicKey [ed25519.PublicKeySize]byte

// ParsePublicKey parses "ed25519:<base58>". The curve prefix is required: a bare base58 key
// would be ambiguous once other curves are in use.
func ParsePublicKey(s string) (PublicKey, error) {
	var k PublicKey
	if err := decodeTagged(s, "public key", k[:]); err != nil {
		return PublicKey{}, err
	}
	return k, nil
}

// String returns "ed25519:<base58>".
func (k PublicKey) String() string { return ed25519Prefix + base58.Encode(k[:]) }

// MarshalText implements encoding.TextMarshaler.
func (k PublicKey) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (k *PublicKey) UnmarshalText(b []byte) error {
	p, err := ParsePublicKey(string(b))
	if err != nil {
		return err
	}
	*k = p
	return nil
}

// Verify reports whether sig is k's signature of msg.
func (k PublicKey) Verify(msg []byte, sig Signature) bool {
	return ed25519.Verify(ed25519.PublicKey(k[:]), msg, sig[:])
}

func (k PublicKey) encode(e *encoder) {
	e.u8(keyTypeED25519)
	e.fixed(k[:])
}

func decodePublicKey(d *decoder, what string) PublicKey {
	var k PublicKey
	if t := d.u8(what + " key type"); t != keyTypeED25519 && d.err == nil {
		d.fail("%s: key type %s is not supported (only ed25519)", what, keyTypeName(t))
		return k
	}
	d.fixed(k[:], what)
	return k
}

// keyTypeName names nearcore's key type tags for error messages.
func keyTypeName(t uint8) string {
	switch t {
	case 0:
		return "ed25519"
	case 1:
		return "secp256k1"
	case 2:
		return "ml-dsa-65"
	}
	return fmt.Sprintf("%d", t)
}

// Signature is an ed25519 signature. Its string form is "ed25519:<base58 of 64 bytes>"; its
// borsh form is the key type byte 0 followed by the 64 bytes.
type Signature [ed25519.SignatureSize]byte

// ParseSignature parses "ed25519:<base58>".
func ParseSignature(s string) (Signature, error) {
	var sig Signature
	if err := decodeTagged(s, "signature", sig[:]); err != nil {
		return Signature{}, err
	}
	return sig, nil
}

// String returns "ed25519:<base58>".
func (s Signature) String() string { return ed25519Prefix + base58.Encode(s[:]) }

// MarshalText implements encoding.TextMarshaler.
func (s Signature) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *Signature) UnmarshalText(b []byte) error {
	p, err := ParseSignature(string(b))
	if err != nil {
		return err
	}
	*s = p
	return nil
}

func (s Signature) encode(e *encoder) {
	e.u8(keyTypeED25519)
	e.fixed(s[:])
}

func decodeSignature(d *decoder, what string) Signature {
	var s Signature
	if t := d.u8(what + " key type"); t != keyTypeED25519 && d.err == nil {
		d.fail("%s: key type %s is not supported (only ed25519)", what, keyTypeName(t))
		return s
	}
	d.fixed(s[:], what)
	return s
}

// Hash is a 32-byte sha256 digest, nearcore's CryptoHash: block hashes, transaction hashes
// and delegate action hashes. Its string form is plain base58.
type Hash [32]byte

// ParseHash parses the base58 form of a 32-byte hash.
func ParseHash(s string) (Hash, error) {
	var h Hash
	if err := decodeBase58(s, "hash", h[:]); err != nil {
		return Hash{}, err
	}
	return h, nil
}

// String returns the base58 form.
func (h Hash) String() string { return base58.Encode(h[:]) }

// MarshalText implements encoding.TextMarshaler.
func (h Hash) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (h *Hash) UnmarshalText(b []byte) error {
	p, err := ParseHash(string(b))
	if err != nil {
		return err
	}
	*h = p
	return nil
}

// decodeTagged decodes "ed25519:<base58>" into dst, which fixes the expected length.
func decodeTagged(s, what string, dst []byte) error {
	curve, data, ok := strings.Cut(s, ":")
	if !ok {
		return fmt.Errorf("%s %s has no curve prefix (want ed25519:<base58>)", what, clip(s))
	}
	// nearcore and near-api-js read the curve name case-insensitively.
	if !strings.EqualFold(curve, "ed25519") {
		return fmt.Errorf("%s: curve %s is not supported (only ed25519)", what, clip(curve))
	}
	return decodeBase58(data, what, dst)
}

// decodeBase58 decodes s into dst, refusing any other length.
func decodeBase58(s, what string, dst []byte) error {
	if s == "" {
		return fmt.Errorf("%s is empty", what)
	}
	b, err := base58.Decode(s)
	if err != nil {
		return fmt.Errorf("%s %s is not base58: %w", what, clip(s), err)
	}
	if len(b) != len(dst) {
		return fmt.Errorf("%s %s decodes to %d bytes, want %d", what, clip(s), len(b), len(dst))
	}
	copy(dst, b)
	return nil
}

// clip quotes s for an error message, cut to a length that keeps messages readable when the
// input is a client's.
func clip(s string) string {
	const max = 100
	if len(s) > max {
		return fmt.Sprintf("%q…", s[:max])
	}
	return fmt.Sprintf("%q", s)
}
