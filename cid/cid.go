// Package cid holds content identifiers as the attestation chain uses them: RFC 8785 canonical
// JSON (JCS), and CIDv1 (codec raw 0x55, multihash sha2-256) in base32 lower case ("b…") over
// it. Checked against the npm packages canonicalize and multiformats (testdata/vectors.json).
package cid

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"errors"
	"strings"
)

// Codec and hash codes of the CIDs made here.
const (
	codecRaw   = 0x55
	hashSHA256 = 0x12
)

var base32Lower = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// Of returns the CIDv1 of data: 'b' + base32(varint 1 ‖ varint 0x55 ‖ 0x12 0x20 ‖ SHA-256).
func Of(data []byte) string {
	h := sha256.Sum256(data)
	b := binary.AppendUvarint(nil, 1)
	b = binary.AppendUvarint(b, codecRaw)
	b = append(b, hashSHA256, 32)
	return "b" + base32Lower.EncodeToString(append(b, h[:]...))
}

// OfJSON returns the canonical form of a JSON document and its CID.
func OfJSON(doc []byte) (canonical []byte, id string, err error) {
	canonical, err = Canonical(doc)
	if err != nil {
		return nil, "", err
	}
	return canonical, Of(canonical), nil
}

// Valid reports whether s is a CID as Of makes them (the chain accepts no other kind).
func Valid(s string) bool {
	rest, ok := strings.CutPrefix(s, "b")
	if !ok {
		return false
	}
	b, err := base32Lower.DecodeString(rest)
	return err == nil && len(b) == 36 && b[0] == 1 && b[1] == codecRaw && b[2] == hashSHA256 && b[3] == 32
}

// ErrNotJSON is returned for a document that is not one JSON value.
var ErrNotJSON = errors.New("not a JSON document")
