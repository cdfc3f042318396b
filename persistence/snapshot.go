package persistence

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/hashicorp/raft"
)

// Snapshot stream format: a magic string, then for each key of the partition's 'm' and 's'
// sections (in order) the key relative to the partition prefix and the value, each
// length-prefixed; a zero-length key ends the stream and is followed by the CRC-32C of all
// preceding bytes (big-endian). Relative keys keep a snapshot valid for the same partition on
// any node.
const snapshotMagic = "shardkeeper-snap-v1\n"

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Snapshot captures the partition's state at the current applied index. It first syncs the
// WAL, because raft compacts its log once the snapshot is persisted and the unsynced state
// batches must be durable before the log entries that could replay them are gone.
//
// The capture is an eventually-file-only snapshot of the partition's range, not a plain Pebble
// snapshot: raft persists it concurrently with later FSM operations, which include Restore,
// and a plain snapshot's iterators see an excise made after it was taken (Persist would then
// write the restored state, or nothing, under this snapshot's index).
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	if err := f.s.db.LogData(nil, pebble.Sync); err != nil {
		return nil, fmt.Errorf("sync before snapshot of partition %d: %w", f.p, err)
	}
	lo, hi := snapshotBounds(f.p)
	return &fsmSnapshot{snap: f.s.db.NewEventuallyFileOnlySnapshot([]pebble.KeyRange{{Start: lo, End: hi}}), p: f.p}, nil
}

type fsmSnapshot struct {
	snap *pebble.EventuallyFileOnlySnapshot
	p    uint32
}

// Persist streams the captured key range to sink.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.write(sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persist snapshot of partition %d: %w", s.p, err)
	}
	return sink.Close()
}

func (s *fsmSnapshot) write(w io.Writer) error {
	lo, hi := snapshotBounds(s.p)
	it, err := s.snap.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	crc := crc32.New(crcTable)
	bw := bufio.NewWriterSize(io.MultiWriter(w, crc), 1<<16)
	strip := len(lo) - 1 // keep the section byte
	_, _ = bw.WriteString(snapshotMagic)
	var frame []byte
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return err
		}
		frame = AppendComponent(frame[:0], it.Key()[strip:])
		frame = AppendComponent(frame, v)
		if _, err := bw.Write(frame); err != nil {
			it.Close()
			return err
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return err
	}
	_ = bw.WriteByte(0)
	if err := bw.Flush(); err != nil {
		return err
	}
	_, err = w.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32()))
	return err
}

// Release frees the Pebble snapshot.
func (s *fsmSnapshot) Release() { _ = s.snap.Close() }

// Restore replaces the partition's state with the snapshot in rc, atomically, in bounded
// memory. The keys (which the stream carries in order) are written to an sstable beside the
// database; only once the stream's checksum has been verified is the sstable ingested with an
// excise of the partition's range: one atomic, durable step (a synced WAL record or a
// manifest edit) that drops the old state and adds the new. A crash leaves either the old
// state or the new, never a mix; a partition of any size restores without holding it in
// memory.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	start := time.Now()
	keys, err := f.restore(rc)
	if err != nil {
		return fmt.Errorf("restore partition %d: %w", f.p, err)
	}
	if err := f.load(); err != nil {
		return err
	}
	f.s.logger.Info("partition restored from a snapshot", "partition", f.p, "applied_index", f.AppliedIndex(),
		"keys", keys, "duration", time.Since(start).Round(time.Millisecond))
	return nil
}

// restore writes the snapshot in r over the partition's state and returns its key count.
func (f *FSM) restore(r io.Reader) (int, error) {
	lo, hi := snapshotBounds(f.p)
	fs := f.s.opts.FS
	if err := fs.MkdirAll(restoreDir(f.s.dir), 0o755); err != nil {
		return 0, err
	}
	path := filepath.Join(restoreDir(f.s.dir), fmt.Sprintf("p%04d.sst", f.p))
	file, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return 0, err
	}
	// A successful ingestion moves the file into the database, except an empty one, which it
	// skips; on failure the file stays. Either way nothing may be left behind.
	defer func() { _ = fs.Remove(path) }()
	w := sstable.NewWriter(objstorageprovider.NewFileWritable(file), f.s.opts.MakeWriterOptions(numLevels-1, f.s.db.TableFormat()))
	prefix := lo[:len(lo)-1]
	keys := 0
	var key []byte
	err = readSnapshot(r, func(k, v []byte) error {
		if len(k) == 0 || (k[0] != sectionMeta && k[0] != sectionState) {
			return fmt.Errorf("snapshot key %x outside the partition's state", k)
		}
		keys++
		key = append(append(key[:0], prefix...), k...)
		return w.Set(key, v)
	})
	if err = errors.Join(err, w.Close()); err != nil { // Close syncs the file
		return 0, err
	}
	// An empty snapshot ingests nothing but still excises: the partition is emptied.
	if _, err := f.s.db.IngestAndExcise(context.Background(), []string{path}, nil, nil, pebble.KeyRange{Start: lo, End: hi}); err != nil {
		return 0, fmt.Errorf("ingest: %w", err)
	}
	return keys, nil
}

// restoreDir holds the sstables of restores in progress: beside the database, on the same
// file system, as ingestion requires.
func restoreDir(dbDir string) string { return filepath.Clean(dbDir) + ".restore" }

// numLevels is Pebble's LSM depth; a restored partition is written for the lowest level.
const numLevels = len(pebble.Options{}.Levels)

// readSnapshot parses a snapshot stream, calling fn per key, and verifies its checksum.
func readSnapshot(r io.Reader, fn func(k, v []byte) error) error {
	cr := &crcReader{r: bufio.NewReaderSize(r, 1<<16), crc: crc32.New(crcTable)}
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(cr, magic); err != nil || string(magic) != snapshotMagic {
		return fmt.Errorf("not a shardkeeper snapshot")
	}
	readPart := func() ([]byte, error) {
		n, err := binary.ReadUvarint(cr)
		if err != nil {
			return nil, err
		}
		if n > 1<<30 {
			return nil, fmt.Errorf("snapshot frame of %d bytes", n)
		}
		buf := make([]byte, n)
		_, err = io.ReadFull(cr, buf)
		return buf, err
	}
	for {
		k, err := readPart()
		if err != nil {
			return fmt.Errorf("read key: %w", err)
		}
		if len(k) == 0 {
			break
		}
		v, err := readPart()
		if err != nil {
			return fmt.Errorf("read value: %w", err)
		}
		if err := fn(k, v); err != nil {
			return err
		}
	}
	want := cr.crc.Sum32()
	var trailer [4]byte
	if _, err := io.ReadFull(cr.r, trailer[:]); err != nil {
		return fmt.Errorf("read checksum: %w", err)
	}
	if binary.BigEndian.Uint32(trailer[:]) != want {
		return fmt.Errorf("snapshot checksum mismatch")
	}
	return nil
}

// crcReader checksums exactly the bytes consumed through it.
type crcReader struct {
	r   *bufio.Reader
	crc hash.Hash32
}

func (c *crcReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	_, _ = c.crc.Write(p[:n])
	return n, err
}

func (c *crcReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		_, _ = c.crc.Write([]byte{b})
	}
	return b, err
}
