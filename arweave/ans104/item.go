package ans104

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/shardkeeper/shardkeeper/arweave"
)

// Options are the fields of a data item besides its owner, signature and data.
type Options struct {
	Target []byte // the address the item is meant for: 32 bytes, or empty for none
	Anchor []byte // a value against replay, chosen by the writer: 32 bytes, or empty for none
	Tags   []Tag
}

// DataItem is a well-formed data item, held as its bytes. Get one from Build, Unsigned.Sign or
// WithSignature, Parse or ParseBundle. Well formed is not valid: Verify checks the signature.
type DataItem struct {
	raw            []byte
	scheme         scheme
	sigType        SignatureType
	target, anchor []byte // nil when absent
	rawTags        []byte
	tags           []Tag
	dataAt         int
	id             [32]byte
}

// Parse reads a data item from b (which it copies). Its errors name the field at fault and wrap
// ErrMalformed or ErrTagLimits. It does not check the signature: see Verify.
func Parse(b []byte) (*DataItem, error) {
	d, err := parseItem(bytes.Clone(b))
	if err != nil {
		return nil, fmt.Errorf("ans104: data item: %w", err)
	}
	return d, nil
}

// cursor reads the fields of a data item in turn.
type cursor struct {
	b   []byte
	pos int
}

func (c *cursor) take(n int, what string) ([]byte, error) {
	if n > len(c.b)-c.pos {
		return nil, fmt.Errorf("%w: %s (%d bytes at offset %d) runs past the end of the item's %d bytes", ErrMalformed, what, n, c.pos, len(c.b))
	}
	v := c.b[c.pos : c.pos+n : c.pos+n]
	c.pos += n
	return v, nil
}

// optional reads a presence byte and, when it is 1, the 32 bytes of the field.
func (c *cursor) optional(what string) ([]byte, error) {
	at := c.pos
	p, err := c.take(1, what+" presence byte")
	if err != nil {
		return nil, err
	}
	switch p[0] {
	case 0:
		return nil, nil
	case 1:
		return c.take(32, what)
	default:
		return nil, fmt.Errorf("%w: %s presence byte at offset %d is %d, want 0 or 1", ErrMalformed, what, at, p[0])
	}
}

// parseItem reads a data item from b, which it keeps.
func parseItem(b []byte) (*DataItem, error) {
	c := &cursor{b: b}
	t, err := c.take(2, "signature type")
	if err != nil {
		return nil, err
	}
	d := &DataItem{raw: b, sigType: SignatureType(binary.LittleEndian.Uint16(t))}
	var ok bool
	if d.scheme, ok = schemes[d.sigType]; !ok {
		return nil, fmt.Errorf("%w: unknown signature type %d (this package reads 1, arweave, and 2, ed25519)", ErrMalformed, uint16(d.sigType))
	}
	if _, err := c.take(d.scheme.sigLen, "signature"); err != nil {
		return nil, err
	}
	if _, err := c.take(d.scheme.ownerLen, "owner"); err != nil {
		return nil, err
	}
	if d.target, err = c.optional("target"); err != nil {
		return nil, err
	}
	if d.anchor, err = c.optional("anchor"); err != nil {
		return nil, err
	}
	nb, err := c.take(8, "number of tags")
	if err != nil {
		return nil, err
	}
	// Compared as u64s: a count past the limit is refused before it is converted.
	n := binary.LittleEndian.Uint64(nb)
	if n > MaxTags {
		return nil, fmt.Errorf("%w: the header says %d tags, at most %d", ErrTagLimits, n, MaxTags)
	}
	sb, err := c.take(8, "number of tag bytes")
	if err != nil {
		return nil, err
	}
	size := binary.LittleEndian.Uint64(sb)
	if size > MaxTagBytes {
		return nil, fmt.Errorf("%w: %d tag bytes, arbundles reads at most %d", ErrTagLimits, size, MaxTagBytes)
	}
	if d.rawTags, err = c.take(int(size), "tags"); err != nil {
		return nil, err
	}
	if d.tags, err = decodeTags(d.rawTags); err != nil {
		return nil, err
	}
	if uint64(len(d.tags)) != n {
		return nil, fmt.Errorf("%w: the header says %d tags, the Avro array holds %d", ErrMalformed, n, len(d.tags))
	}
	d.dataAt = c.pos
	d.id = sha256.Sum256(d.Signature())
	return d, nil
}

// SignatureType is the item's signature type.
func (d *DataItem) SignatureType() SignatureType { return d.sigType }

// Signature is the signature field.
func (d *DataItem) Signature() []byte {
	return d.raw[2 : 2+d.scheme.sigLen : 2+d.scheme.sigLen]
}

// Owner is the signer's public key: an Arweave modulus (512 bytes) or an Ed25519 key (32).
func (d *DataItem) Owner() []byte {
	at := 2 + d.scheme.sigLen
	return d.raw[at : at+d.scheme.ownerLen : at+d.scheme.ownerLen]
}

// Target is the target field, nil when absent.
func (d *DataItem) Target() []byte { return d.target }

// Anchor is the anchor field, nil when absent.
func (d *DataItem) Anchor() []byte { return d.anchor }

// Tags are the item's tags, in order.
func (d *DataItem) Tags() []Tag { return slices.Clone(d.tags) }

// RawTags are the tags as the item holds them, in Avro, as they were signed.
func (d *DataItem) RawTags() []byte { return d.rawTags }

// Data is the item's data.
func (d *DataItem) Data() []byte { return d.raw[d.dataAt:] }

// Bytes is the whole item, as it goes into a bundle.
func (d *DataItem) Bytes() []byte { return d.raw }

// Size is the length of the item's bytes.
func (d *DataItem) Size() int { return len(d.raw) }

// ID is SHA-256 of the signature.
func (d *DataItem) ID() [32]byte { return d.id }

// IDString is the id as gateways show it (base64url without padding).
func (d *DataItem) IDString() string { return base64.RawURLEncoding.EncodeToString(d.id[:]) }

// SignatureData is the message the signature covers: the deep hash of the item's fields.
func (d *DataItem) SignatureData() []byte {
	h := arweave.DeepHash([]any{
		[]byte("dataitem"),
		[]byte("1"),
		[]byte(strconv.Itoa(int(d.sigType))),
		d.Owner(),
		d.target, // an absent field is hashed as the empty blob
		d.anchor,
		d.rawTags,
		d.Data(),
	})
	return h[:]
}

// Verify checks that the signature is the owner's over the item's fields, and that the id is
// the hash of the signature as it now is (the accessors' views of the bytes must not be
// written to; this catches it when they were).
func (d *DataItem) Verify() error {
	sig := d.Signature()
	if sha256.Sum256(sig) != d.id {
		return fmt.Errorf("ans104: data item %s: %w: the id is not the hash of the signature", d.IDString(), ErrSignature)
	}
	if err := d.scheme.verify(d.Owner(), d.SignatureData(), sig); err != nil {
		return fmt.Errorf("ans104: data item %s: %w: %v", d.IDString(), ErrSignature, err)
	}
	return nil
}

// Unsigned is a data item before its signature: all of its fields but that one, fixed.
type Unsigned struct {
	item *DataItem // with a signature of zeros
}

// NewUnsigned lays out a data item of signature type t by owner, carrying data, for its
// signature to be added by Sign or WithSignature. The fields are copied.
func NewUnsigned(t SignatureType, owner, data []byte, opts Options) (*Unsigned, error) {
	u, err := newUnsigned(t, owner, data, opts)
	if err != nil {
		return nil, fmt.Errorf("ans104: build data item: %w", err)
	}
	return u, nil
}

func newUnsigned(t SignatureType, owner, data []byte, opts Options) (*Unsigned, error) {
	s, ok := schemes[t]
	if !ok {
		return nil, fmt.Errorf("%w: unknown signature type %d", ErrMalformed, uint16(t))
	}
	if len(owner) != s.ownerLen {
		return nil, fmt.Errorf("%w: an owner of %d bytes, %s owners have %d", ErrMalformed, len(owner), s.name, s.ownerLen)
	}
	for _, f := range []struct {
		name string
		v    []byte
	}{{"target", opts.Target}, {"anchor", opts.Anchor}} {
		if len(f.v) != 0 && len(f.v) != 32 {
			return nil, fmt.Errorf("%w: the %s has %d bytes, want 32 or none", ErrMalformed, f.name, len(f.v))
		}
	}
	if err := checkTags(opts.Tags); err != nil {
		return nil, err
	}
	rawTags := encodeTags(opts.Tags)
	if len(rawTags) > MaxTagBytes {
		return nil, fmt.Errorf("%w: the tags take %d bytes in Avro, arbundles reads at most %d", ErrTagLimits, len(rawTags), MaxTagBytes)
	}

	size := 2 + s.sigLen + s.ownerLen + 1 + len(opts.Target) + 1 + len(opts.Anchor) + 16 + len(rawTags) + len(data)
	b := make([]byte, 0, size)
	b = binary.LittleEndian.AppendUint16(b, uint16(t))
	b = append(b, make([]byte, s.sigLen)...)
	b = append(b, owner...)
	for _, v := range [][]byte{opts.Target, opts.Anchor} {
		if len(v) == 0 {
			b = append(b, 0)
		} else {
			b = append(append(b, 1), v...)
		}
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(len(opts.Tags)))
	b = binary.LittleEndian.AppendUint64(b, uint64(len(rawTags)))
	b = append(b, rawTags...)
	b = append(b, data...)
	// The parser has the last word on what is well formed, for items built here too.
	d, err := parseItem(b)
	if err != nil {
		return nil, err
	}
	return &Unsigned{item: d}, nil
}

// SignatureType is the signature type the item will have.
func (u *Unsigned) SignatureType() SignatureType { return u.item.sigType }

// Owner is the owner field the item will have.
func (u *Unsigned) Owner() []byte { return bytes.Clone(u.item.Owner()) }

// SignatureData is the message to sign: the deep hash of the item's fields.
func (u *Unsigned) SignatureData() []byte { return u.item.SignatureData() }

// Sign signs the item with s, which must be its owner's signer.
func (u *Unsigned) Sign(s Signer) (*DataItem, error) {
	if s.SignatureType() != u.item.sigType {
		return nil, fmt.Errorf("ans104: sign data item: an %s signer for an item of %s", s.SignatureType(), u.item.sigType)
	}
	if !bytes.Equal(s.Owner(), u.item.Owner()) {
		return nil, errors.New("ans104: sign data item: the signer's key is not the item's owner")
	}
	sig, err := s.Sign(u.SignatureData())
	if err != nil {
		return nil, fmt.Errorf("ans104: sign data item: %w", err)
	}
	return u.WithSignature(sig)
}

// WithSignature returns the item with signature sig, made elsewhere over SignatureData. It
// checks the signature's length only: Verify checks the rest.
func (u *Unsigned) WithSignature(sig []byte) (*DataItem, error) {
	if len(sig) != u.item.scheme.sigLen {
		return nil, fmt.Errorf("ans104: data item: %w: a signature of %d bytes, %s signatures have %d", ErrMalformed, len(sig), u.item.scheme.name, u.item.scheme.sigLen)
	}
	b := bytes.Clone(u.item.raw)
	copy(b[2:], sig)
	d, err := parseItem(b)
	if err != nil {
		return nil, fmt.Errorf("ans104: data item: %w", err)
	}
	return d, nil
}

// Build lays out a data item carrying data and signs it with s.
func Build(s Signer, data []byte, opts Options) (*DataItem, error) {
	u, err := NewUnsigned(s.SignatureType(), s.Owner(), data, opts)
	if err != nil {
		return nil, err
	}
	return u.Sign(s)
}
