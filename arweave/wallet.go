package arweave

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
)

// Wallet is an Arweave RSA key, as a JWK file holds it.
type Wallet struct {
	key *rsa.PrivateKey
}

// jwk is the JSON Web Key of an Arweave wallet (RSA, base64url without padding).
type jwk struct {
	Kty string `json:"kty"`
	N   string `json:"n"`
	E   string `json:"e"`
	D   string `json:"d"`
	P   string `json:"p"`
	Q   string `json:"q"`
	Dp  string `json:"dp"`
	Dq  string `json:"dq"`
	Qi  string `json:"qi"`
}

// ParseWallet reads a JWK wallet. Its errors never quote the key.
func ParseWallet(b []byte) (*Wallet, error) {
	var k jwk
	if err := json.Unmarshal(b, &k); err != nil {
		return nil, errors.New("arweave wallet: not a JSON Web Key")
	}
	if k.Kty != "" && k.Kty != "RSA" {
		return nil, fmt.Errorf("arweave wallet: key type %q, want RSA", k.Kty)
	}
	ints := map[string]*big.Int{}
	for name, s := range map[string]string{"n": k.N, "e": k.E, "d": k.D, "p": k.P, "q": k.Q} {
		v, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil || len(v) == 0 {
			return nil, fmt.Errorf("arweave wallet: field %q missing or not base64url", name)
		}
		ints[name] = new(big.Int).SetBytes(v)
	}
	if !ints["e"].IsInt64() || ints["e"].Int64() > 1<<31-1 {
		return nil, errors.New("arweave wallet: public exponent out of range")
	}
	key := &rsa.PrivateKey{PublicKey: rsa.PublicKey{N: ints["n"], E: int(ints["e"].Int64())}, D: ints["d"],
		Primes: []*big.Int{ints["p"], ints["q"]}}
	if err := key.Validate(); err != nil {
		return nil, errors.New("arweave wallet: the key does not hold together")
	}
	key.Precompute()
	return &Wallet{key: key}, nil
}

// NewWallet makes a wallet with a new 4096-bit key, as Arweave's (tests and fakes).
func NewWallet() (*Wallet, error) { return GenerateWallet(4096) }

// GenerateWallet makes a wallet with a new key of bits bits (a 2048-bit key signs about four
// times faster: long test chains).
func GenerateWallet(bits int) (*Wallet, error) {
	key, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		return nil, err
	}
	return &Wallet{key: key}, nil
}

// JWK returns the wallet as a JWK file's content.
func (w *Wallet) JWK() []byte {
	enc := func(i *big.Int) string { return base64.RawURLEncoding.EncodeToString(i.Bytes()) }
	k := w.key
	b, _ := json.Marshal(jwk{Kty: "RSA", N: enc(k.N), E: enc(big.NewInt(int64(k.E))), D: enc(k.D), P: enc(k.Primes[0]),
		Q: enc(k.Primes[1]), Dp: enc(k.Precomputed.Dp), Dq: enc(k.Precomputed.Dq), Qi: enc(k.Precomputed.Qinv)})
	return b
}

// Owner is the wallet's public modulus, as a transaction's owner field holds it.
func (w *Wallet) Owner() []byte { return w.key.N.Bytes() }

// Address is the wallet's address: base64url(SHA-256(owner)).
func (w *Wallet) Address() string { return AddressOf(w.Owner()) }

// AddressOf is the address of an owner (public modulus).
func AddressOf(owner []byte) string {
	h := sha256.Sum256(owner)
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// sign signs msg with RSA-PSS over SHA-256, with the longest salt the key allows (what
// arweave-js, through Node's crypto, does).
func (w *Wallet) sign(msg []byte) ([]byte, error) {
	h := sha256.Sum256(msg)
	return rsa.SignPSS(rand.Reader, w.key, crypto.SHA256, h[:], &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthAuto})
}

// verify checks an RSA-PSS signature by owner over msg (any salt length, as Arweave nodes
// accept).
func verify(owner, msg, sig []byte) error {
	pub := &rsa.PublicKey{N: new(big.Int).SetBytes(owner), E: 65537}
	h := sha256.Sum256(msg)
	return rsa.VerifyPSS(pub, crypto.SHA256, h[:], sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthAuto})
}

// Bits is the size of the wallet's key.
func (w *Wallet) Bits() int { return w.key.N.BitLen() }
