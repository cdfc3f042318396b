package persistence

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"sync"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Store is the node's single Pebble database. It holds the Raft logs, stable stores and
// replicated state of every partition this node hosts, under per-partition key prefixes, so
// that synced writes of concurrent Raft groups share group-committed fsyncs.
//
// A Store is safe for concurrent use.
type Store struct {
	db     *pebble.DB
	lock   *pebble.Lock    // the directory's lock, taken before Open so that its failure is known
	opts   *pebble.Options // as opened (defaults filled in): sstables for ingestion match them
	dir    string
	logger *slog.Logger
	// groupsMu orders the records of split-born groups: a split's apply decides whether
	// this node holds its child already and commits under it, and RecordGroup writes under
	// it, so a group is either born by the split here or recorded before it, never both.
	groupsMu sync.Mutex
}

// Open opens (creating if needed) the Pebble database in dir. With a guard, an ENOSPC of
// Pebble frees the guard's ballast before Pebble's one retry (see DiskGuard).
func Open(dir string, logger *slog.Logger, guard *DiskGuard) (*Store, error) {
	if logger == nil {
		logger = slog.Default()
	}
	cache := pebble.NewCache(128 << 20)
	defer cache.Unref() // the DB holds its own reference
	opts := &pebble.Options{
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             pebbleLogger{logger},
		Cache:              cache,
		// 16 MiB rather than 64: inserts into a smaller skiplist miss the cache less, and
		// past the first seconds that outweighs the more frequent, smaller flushes (three
		// nodes: 3–30 % more pairs/s in interleaved runs; docs/performance.md).
		MemTableSize: 16 << 20,
		// A snapshot restore's ingestion flushes the memtable it overlaps. With Pebble's
		// default of 2, a second flush queued behind it would stall every partition's
		// writes; 4 (up to 64 MiB of memtables) leaves room.
		MemTableStopWritesThreshold: 4,
	}
	if guard != nil {
		opts.FS = guard.FS(vfs.Default)
	}
	// Bloom filters on every level: point reads of absent keys (a fresh nonce, an unknown
	// device) are common and must not read data blocks.
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	opts.EnsureDefaults()
	lock, err := lockDir(dir, opts)
	if err != nil {
		return nil, err
	}
	opts.Lock = lock
	db, err := pebble.Open(dir, opts)
	if err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("open pebble at %s: %w", dir, err)
	}
	// A restore interrupted by a crash leaves its half-written sstable behind; it was never
	// ingested, so it is garbage. Removed only once Pebble holds the directory's lock, so a
	// second process on the same data directory cannot delete a running restore's file.
	if err := opts.FS.RemoveAll(restoreDir(dir)); err != nil {
		_ = db.Close()
		_ = lock.Close()
		return nil, fmt.Errorf("remove %s: %w", restoreDir(dir), err)
	}
	return &Store{db: db, lock: lock, opts: opts, dir: dir, logger: logger}, nil
}

// ErrDirInUse is wrapped by Open's error when another process (or another Store in this
// process) has the data directory open.
var ErrDirInUse = errors.New("in use by another process")

// lockDir takes the Pebble directory lock of dir (creating dir if needed) ahead of Open, so
// that a lock held by someone else is told apart from every other reason Open can fail.
func lockDir(dir string, opts *pebble.Options) (*pebble.Lock, error) {
	if err := opts.FS.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	lock, err := pebble.LockDirectory(dir, opts.FS)
	if err == nil {
		return lock, nil
	}
	if lockHeld(err) {
		return nil, fmt.Errorf("data directory %s is %w", dir, ErrDirInUse)
	}
	return nil, fmt.Errorf("lock %s: %w", dir, err)
}

// lockHeld reports whether a LockDirectory error means that the lock is taken. Pebble's
// lock is a POSIX record lock (fcntl F_SETLK), which fails with EAGAIN or EACCES when
// another process holds it; creating the LOCK file fails with a *PathError instead, which
// is a different problem (permissions, a read-only disk). Pebble refuses a second lock in
// its own process with a plain error that only its text identifies.
func lockHeld(err error) bool {
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		return false
	}
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK) ||
		errors.Is(err, syscall.EACCES) || strings.Contains(err.Error(), "lock held by current process")
}

// Close closes the database and releases its directory. Nothing may use the Store afterwards.
func (s *Store) Close() error { return errors.Join(s.db.Close(), s.lock.Close()) }

// Get returns a copy of the value of relative state key k in partition p.
func (s *Store) Get(p uint32, k []byte) (value []byte, ok bool, err error) {
	v, closer, err := s.db.Get(StateKey(p, k))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("get: %w", err)
	}
	defer closer.Close()
	return append([]byte(nil), v...), true, nil
}

// Scan calls fn for the state keys of partition p in [lower, upper) (relative keys; a nil
// upper means the end of the partition), in ascending order or descending when reverse,
// until fn returns false. The slices passed to fn are valid only during the call.
func (s *Store) Scan(p uint32, lower, upper []byte, reverse bool, fn func(k, v []byte) bool) error {
	lo := StateKey(p, lower)
	hi := partitionPrefix(p, sectionState+1)
	if upper != nil {
		hi = StateKey(p, upper)
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("scan: %w", err)
	}
	strip := len(partitionPrefix(p, sectionState))
	valid := it.First
	next := it.Next
	if reverse {
		valid, next = it.Last, it.Prev
	}
	for ok := valid(); ok; ok = next() {
		if !fn(it.Key()[strip:], it.Value()) {
			break
		}
	}
	return errors.Join(it.Error(), it.Close())
}

// KeyCount counts the state keys of partition p with the given relative prefix.
func (s *Store) KeyCount(p uint32, prefix []byte) (int, error) {
	n := 0
	err := s.Scan(p, prefix, PrefixEnd(prefix), false, func(_, _ []byte) bool { n++; return true })
	return n, err
}

// pebbleLogger routes Pebble's log lines to slog.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}
func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}
func (p pebbleLogger) Fatalf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
	panic(fmt.Sprintf(format, args...))
}

// ServerID returns this data directory's Raft server id, "<nodeID>@<incarnation>". The
// incarnation is random, created with the directory and kept in it: a node whose disk was
// wiped gets a new server id, so Raft treats it as a new replica that must catch up before it
// votes, never as the voter whose log it lost.
func (s *Store) ServerID(nodeID string) (string, error) {
	key := nodeKey(nodeIncarnation)
	v, closer, err := s.db.Get(key)
	switch {
	case err == nil:
		defer closer.Close()
		return nodeID + "@" + string(v), nil
	case !errors.Is(err, pebble.ErrNotFound):
		return "", fmt.Errorf("read incarnation: %w", err)
	}
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	inc := hex.EncodeToString(b[:])
	if err := s.db.Set(key, []byte(inc), pebble.Sync); err != nil {
		return "", fmt.Errorf("record incarnation: %w", err)
	}
	return nodeID + "@" + inc, nil
}

// NodeOfServer returns the node id part of a server id made by ServerID.
func NodeOfServer(serverID string) string {
	if i := strings.LastIndexByte(serverID, '@'); i >= 0 {
		return serverID[:i]
	}
	return serverID
}
