// Package arweave holds the Arweave protocol as shardkeeper uses it: format-2 transactions
// with tags, their SHA-384 deep hash, the data root over 256 KiB chunks, RSA-PSS signing with
// a JWK wallet, and ids known as soon as a transaction is signed. Checked against arweave-js
// (testdata/vectors.json).
package arweave

import (
	"crypto/sha512"
	"fmt"
	"strconv"
)

// DeepHash is Arweave's deep hash (SHA-384) of a blob ([]byte) or a list ([]any of blobs and
// lists), as transactions of format 2 are signed:
//
//	blob b:  H(H("blob" ‖ len(b)) ‖ H(b))
//	list l:  acc := H("list" ‖ len(l)); for each e: acc = H(acc ‖ deep(e))
//
// with lengths in decimal ASCII. It panics on other types (a programming error).
func DeepHash(v any) [48]byte {
	switch v := v.(type) {
	case []byte:
		tag := sha512.Sum384(append([]byte("blob"), strconv.Itoa(len(v))...))
		data := sha512.Sum384(v)
		return sha512.Sum384(append(tag[:], data[:]...))
	case []any:
		acc := sha512.Sum384(append([]byte("list"), strconv.Itoa(len(v))...))
		for _, e := range v {
			h := DeepHash(e)
			acc = sha512.Sum384(append(acc[:], h[:]...))
		}
		return acc
	default:
		panic(fmt.Sprintf("arweave: deep hash of %T", v))
	}
}
