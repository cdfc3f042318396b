package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"
)

// StableStore is a Raft group's stable store (current term, vote) in the node's Pebble DB,
// under the group's first partition p. Writes are synced.
type StableStore struct {
	s *Store
	p uint32
}

var _ raft.StableStore = (*StableStore)(nil)

// StableStore returns the Raft stable store of the group whose first partition is p.
func (s *Store) StableStore(p uint32) *StableStore { return &StableStore{s: s, p: p} }

// errNotFound carries the exact text hashicorp/raft compares against for a missing key.
var errNotFound = errors.New("not found")

// IsNotFound reports whether err is a stable store's "not found".
func IsNotFound(err error) bool { return errors.Is(err, errNotFound) }

// Set stores a value.
func (st *StableStore) Set(key, val []byte) error {
	if err := st.s.db.Set(stableKey(st.p, key), val, pebble.Sync); err != nil {
		return fmt.Errorf("stable set %q: %w", key, err)
	}
	return nil
}

// Get returns the value of key, or an error reading "not found" (raft's convention).
func (st *StableStore) Get(key []byte) ([]byte, error) {
	v, closer, err := st.s.db.Get(stableKey(st.p, key))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, errNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("stable get %q: %w", key, err)
	}
	defer closer.Close()
	return append([]byte(nil), v...), nil
}

// SetUint64 stores an integer.
func (st *StableStore) SetUint64(key []byte, val uint64) error {
	return st.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 returns the integer under key, or 0 and "not found".
func (st *StableStore) GetUint64(key []byte) (uint64, error) {
	v, err := st.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("stable key %q holds %d bytes, want 8", key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}
