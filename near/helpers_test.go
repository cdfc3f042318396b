package near

import (
	"crypto/sha256"
	"testing"

	"github.com/mr-tron/base58"
)

func mustBase58(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base58.Decode(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func encodeBase58(b []byte) string { return base58.Encode(b) }

func sha(b []byte) []byte {
	h := sha256.Sum256(b)
	return h[:]
}
