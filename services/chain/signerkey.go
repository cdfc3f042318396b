package chain

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/shardkeeper/shardkeeper/arweave/ans104"
)

// The signer key of bundle mode's data items (--chain-signer-key): an Ed25519 key, stored as
// one line "ed25519:<base64url of its 32-byte seed>". Ed25519 items (signature type 2) are
// signed deterministically and about 1 KB smaller than the wallet's RSA items (type 1).

const signerKeyPrefix = "ed25519:"

// NewSignerKey makes a signer key: the file's content, and the key's owner (its public key)
// and address (SHA-256 of the owner), both base64url, as Arweave names them.
func NewSignerKey() (file, owner, address string, err error) {
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		return "", "", "", err
	}
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	addr := sha256.Sum256(pub)
	return signerKeyPrefix + base64.RawURLEncoding.EncodeToString(seed) + "\n",
		base64.RawURLEncoding.EncodeToString(pub), base64.RawURLEncoding.EncodeToString(addr[:]), nil
}

// ParseSignerKey reads a signer key file's content. Its errors never repeat the content.
func ParseSignerKey(b []byte) (ans104.Signer, error) {
	s, ok := strings.CutPrefix(strings.TrimSpace(string(b)), signerKeyPrefix)
	if !ok {
		return nil, errors.New(`chain signer key: not "ed25519:<base64url seed>" (make one with shardkeeper chain signer-key)`)
	}
	seed, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("chain signer key: the seed is not %d bytes of base64url", ed25519.SeedSize)
	}
	return ans104.NewEd25519Signer(ed25519.NewKeyFromSeed(seed))
}
