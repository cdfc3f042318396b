package relayer

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/shardkeeper/shardkeeper/near"
)

// Assign picks the key of an account that a new intent goes to: the highest rendezvous score
// sha256(idempotency key ‖ public key) among the account's keys. Every node computes the same
// key from the same configuration, and adding or removing a key moves only the intents whose
// best key it becomes or was. (A repeated idempotency key does not rely on this: its first
// assignment is recorded and found again whatever the keys are now.)
func Assign(idempotencyKey string, keys []near.PublicKey) (near.PublicKey, bool) {
	var best near.PublicKey
	var bestScore uint64
	found := false
	for _, k := range keys {
		h := sha256.New()
		h.Write([]byte(idempotencyKey))
		h.Write([]byte{0})
		h.Write(k[:])
		s := binary.BigEndian.Uint64(h.Sum(nil))
		if !found || s > bestScore || (s == bestScore && string(k[:]) < string(best[:])) {
			best, bestScore, found = k, s, true
		}
	}
	return best, found
}
