package arweave

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
)

// Tag is a transaction tag (name and value as bytes).
type Tag struct {
	Name, Value []byte
}

// Tx is a format-2 Arweave transaction. Its JSON form (Encode, DecodeTx) is what POST /tx
// takes: binary fields in base64url without padding, numbers as decimal strings.
type Tx struct {
	LastTx    []byte // the anchor: a recent block hash (GET /tx_anchor)
	Owner     []byte // the signer's RSA modulus
	Target    []byte // recipient of Quantity winston, or empty
	Quantity  string // winston, decimal
	Reward    string // winston, decimal (GET /price/{bytes})
	Tags      []Tag
	Data      []byte // the data; DataSize and DataRoot describe it
	DataSize  int
	DataRoot  []byte
	Signature []byte
	ID        []byte // SHA-256 of Signature
}

// NewTx prepares a transaction carrying data with tags: its data size and root. Anchor,
// reward and signature come next (Sign).
func NewTx(data []byte, tags []Tag) *Tx {
	return &Tx{Data: data, DataSize: len(data), DataRoot: DataRoot(data), Tags: tags, Quantity: "0", Reward: "0"}
}

// SignatureData is the deep hash a format-2 transaction's signature covers.
func (t *Tx) SignatureData() []byte {
	tags := make([]any, len(t.Tags))
	for i, tag := range t.Tags {
		tags[i] = []any{tag.Name, tag.Value}
	}
	h := DeepHash([]any{
		[]byte("2"), t.Owner, t.Target, []byte(t.Quantity), []byte(t.Reward), t.LastTx, tags,
		[]byte(strconv.Itoa(t.DataSize)), t.DataRoot,
	})
	return h[:]
}

// Sign sets the owner, signs, and sets the signature and the id: known from here on, before
// the transaction is posted, so that it can be recorded first and posted again with the same
// bytes.
func (t *Tx) Sign(w *Wallet) error {
	t.Owner = w.Owner()
	sig, err := w.sign(t.SignatureData())
	if err != nil {
		return fmt.Errorf("sign transaction: %w", err)
	}
	id := sha256.Sum256(sig)
	t.Signature, t.ID = sig, id[:]
	return nil
}

// IDString is the transaction id as Arweave shows it (base64url).
func (t *Tx) IDString() string { return base64.RawURLEncoding.EncodeToString(t.ID) }

// Verify checks what a node checks of a transaction on its own: the signature over the
// signature data by the owner, the id, and, when the data is carried, its size and root.
func (t *Tx) Verify() error {
	if len(t.Owner) == 0 || len(t.Signature) == 0 {
		return errors.New("unsigned transaction")
	}
	if err := verify(t.Owner, t.SignatureData(), t.Signature); err != nil {
		return errors.New("invalid signature")
	}
	if id := sha256.Sum256(t.Signature); string(id[:]) != string(t.ID) {
		return errors.New("the id is not the hash of the signature")
	}
	if t.Data != nil {
		if len(t.Data) != t.DataSize {
			return fmt.Errorf("data of %d bytes, data_size %d", len(t.Data), t.DataSize)
		}
		if string(DataRoot(t.Data)) != string(t.DataRoot) {
			return errors.New("data_root does not match the data")
		}
	}
	return nil
}
