package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"
)

// LogStore is a Raft group's log in the node's Pebble DB, under the group's first partition
// p. Writes are synced: an entry StoreLogs has returned for survives a crash. Concurrent
// StoreLogs calls of different groups share fsyncs through Pebble's group commit.
type LogStore struct {
	s *Store
	p uint32
}

var _ raft.LogStore = (*LogStore)(nil)

// LogStore returns the Raft log store of the group whose first partition is p.
func (s *Store) LogStore(p uint32) *LogStore { return &LogStore{s: s, p: p} }

func (l *LogStore) bound(last bool) (uint64, error) {
	lo := append(partitionPrefix(l.p, sectionRaft), raftLog)
	it, err := l.s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: PrefixEnd(lo)})
	if err != nil {
		return 0, fmt.Errorf("log bounds: %w", err)
	}
	ok := it.First()
	if last {
		ok = it.Last()
	}
	var idx uint64
	if ok {
		idx = binary.BigEndian.Uint64(it.Key()[len(lo):])
	}
	return idx, errors.Join(it.Error(), it.Close())
}

// FirstIndex returns the first index written, or 0 for an empty log.
func (l *LogStore) FirstIndex() (uint64, error) { return l.bound(false) }

// LastIndex returns the last index written, or 0 for an empty log.
func (l *LogStore) LastIndex() (uint64, error) { return l.bound(true) }

// GetLog reads the entry at index into log.
func (l *LogStore) GetLog(index uint64, log *raft.Log) error {
	v, closer, err := l.s.db.Get(logKey(l.p, index))
	if errors.Is(err, pebble.ErrNotFound) {
		return raft.ErrLogNotFound
	}
	if err != nil {
		return fmt.Errorf("get log %d: %w", index, err)
	}
	defer closer.Close()
	if err := decodeLog(v, log); err != nil {
		return fmt.Errorf("decode log %d of the group at partition %d: %w", index, l.p, err)
	}
	log.Index = index
	return nil
}

// StoreLog stores one entry.
func (l *LogStore) StoreLog(log *raft.Log) error { return l.StoreLogs([]*raft.Log{log}) }

// StoreLogs stores entries in one synced batch.
func (l *LogStore) StoreLogs(logs []*raft.Log) error {
	b := l.s.db.NewBatch()
	defer b.Close()
	var buf []byte
	for _, log := range logs {
		buf = encodeLog(buf[:0], log)
		if err := b.Set(logKey(l.p, log.Index), buf, nil); err != nil {
			return fmt.Errorf("store log %d: %w", log.Index, err)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("commit logs of the group at partition %d: %w", l.p, err)
	}
	return nil
}

// DeleteRange deletes entries min..max inclusive.
func (l *LogStore) DeleteRange(min, max uint64) error {
	end := logKey(l.p, max+1)
	if max == math.MaxUint64 {
		end = PrefixEnd(append(partitionPrefix(l.p, sectionRaft), raftLog))
	}
	if err := l.s.db.DeleteRange(logKey(l.p, min), end, pebble.Sync); err != nil {
		return fmt.Errorf("delete logs %d..%d of the group at partition %d: %w", min, max, l.p, err)
	}
	return nil
}

// encodeLog lays an entry out as term, type, appended-at (uvarints) then data and extensions
// as length-prefixed byte strings. The index is the key.
func encodeLog(dst []byte, log *raft.Log) []byte {
	dst = slices.Grow(dst, 5*binary.MaxVarintLen64+len(log.Data)+len(log.Extensions))
	dst = binary.AppendUvarint(dst, log.Term)
	dst = binary.AppendUvarint(dst, uint64(log.Type))
	var at int64
	if !log.AppendedAt.IsZero() {
		at = log.AppendedAt.UnixNano()
	}
	dst = binary.AppendVarint(dst, at)
	dst = AppendComponent(dst, log.Data)
	return AppendComponent(dst, log.Extensions)
}

var errShortLog = errors.New("truncated log entry")

func decodeLog(b []byte, log *raft.Log) error {
	var n int
	if log.Term, n = binary.Uvarint(b); n <= 0 {
		return errShortLog
	}
	b = b[n:]
	t, n := binary.Uvarint(b)
	if n <= 0 {
		return errShortLog
	}
	log.Type = raft.LogType(t)
	b = b[n:]
	at, n := binary.Varint(b)
	if n <= 0 {
		return errShortLog
	}
	log.AppendedAt = time.Time{}
	if at != 0 {
		log.AppendedAt = time.Unix(0, at)
	}
	data, b, err := ReadComponent(b[n:])
	if err != nil {
		return err
	}
	ext, _, err := ReadComponent(b)
	if err != nil {
		return err
	}
	log.Data = append([]byte(nil), data...)
	log.Extensions = nil
	if len(ext) > 0 {
		log.Extensions = append([]byte(nil), ext...)
	}
	return nil
}
