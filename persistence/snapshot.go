package persistence

import (
	"bufio"
	"bytes"
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

// Snapshot stream format: a magic string, then for each key of the group's range (its first
// partition's 'm' section to its last partition's 's' section, in order) the key without its
// leading 'p' (so: partition, section, rest) and the value, each length-prefixed; a
// zero-length key ends the stream and is followed by the CRC-32C of all preceding bytes
// (big-endian). Version 1 streams carry keys relative to the partition (section, rest): a
// group of one partition writes them, which nodes that predate groups read too, so that a
// cluster of such groups (G = P) upgrades one node at a time; they are read as the group's
// first partition's.
const (
	snapshotMagic   = "shardkeeper-snap-v2\n"
	snapshotMagicV1 = "shardkeeper-snap-v1\n"
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Snapshot captures the group's state at the current applied index. It first syncs the
// WAL, because raft compacts its log once the snapshot is persisted and the unsynced state
// batches must be durable before the log entries that could replay them are gone.
//
// The capture is an eventually-file-only snapshot of the group's range, not a plain Pebble
// snapshot: raft persists it concurrently with later FSM operations, which include Restore,
// and a plain snapshot's iterators see an excise made after it was taken (Persist would then
// write the restored state, or nothing, under this snapshot's index).
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	g := f.Group()
	// A group lagging behind a split, whose child this node already holds, would capture
	// the child's newer state as its own: it snapshots once it has applied the split.
	if !f.HoldsRange() {
		return nil, fmt.Errorf("snapshot of group %d: partitions of its range are held here by a group a later split made; it snapshots once it has applied the split", g.ID)
	}
	if err := f.s.db.LogData(nil, pebble.Sync); err != nil {
		return nil, fmt.Errorf("sync before snapshot of group %d: %w", g.ID, err)
	}
	lo, hi := snapshotBounds(g)
	return &fsmSnapshot{snap: f.s.db.NewEventuallyFileOnlySnapshot([]pebble.KeyRange{{Start: lo, End: hi}}), g: g}, nil
}

type fsmSnapshot struct {
	snap *pebble.EventuallyFileOnlySnapshot
	g    Group
}

// Persist streams the captured key range to sink.
func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.write(sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("persist snapshot of group %d: %w", s.g.ID, err)
	}
	return sink.Close()
}

func (s *fsmSnapshot) write(w io.Writer) error {
	lo, hi := snapshotBounds(s.g)
	it, err := s.snap.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	crc := crc32.New(crcTable)
	bw := bufio.NewWriterSize(io.MultiWriter(w, crc), 1<<16)
	magic, strip := snapshotMagic, 1 // the 'p' every key of the range starts with
	if s.g.End-s.g.First == 1 {
		magic, strip = snapshotMagicV1, len(lo)-1 // and the partition
	}
	_, _ = bw.WriteString(magic)
	var frame []byte
	for ok := it.First(); ok; ok = it.Next() {
		if !inGroupState(it.Key(), s.g) {
			continue // a Raft section inside the range: local to this replica
		}
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

// Restore replaces the group's state with the snapshot in rc, atomically, in bounded
// memory. A snapshot taken after a split carries the group's smaller range (its "end"
// record, which the stream holds before any state): the group takes that range, and only it
// is replaced, so the partitions the split gave away are left to the group that holds them.
// One taken after a merge carries a larger range: the groups held here inside it are
// dropped first (OnAbsorb), and the whole range is replaced. The keys (which the stream carries in order) are written to an sstable beside the
// database; only once the stream's checksum has been verified is the sstable ingested with an
// excise of the group's range: one atomic, durable step (a synced WAL record or a
// manifest edit) that drops the old state and adds the new. A crash leaves either the old
// state or the new, never a mix; a group of any size restores without holding it in
// memory.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	start := time.Now()
	keys, end, err := f.restore(rc)
	if err != nil {
		return fmt.Errorf("restore group %d: %w", f.id, err)
	}
	f.end.Store(end)
	if err := f.load(); err != nil {
		return err
	}
	if f.onRestore != nil {
		f.onRestore(f.Group())
	}
	f.s.logger.Info("raft group restored from a snapshot", "group", f.id, "applied_index", f.AppliedIndex(),
		"keys", keys, "partitions", fmt.Sprintf("[%d, %d)", f.first, end), "duration", time.Since(start).Round(time.Millisecond))
	return nil
}

// restore writes the snapshot in r over the group's state and returns its key count and
// the range end it carries.
func (f *FSM) restore(r io.Reader) (int, uint32, error) {
	g := f.Group()
	lo := partitionPrefix(g.First, sectionMeta)
	fs := f.s.opts.FS
	if err := fs.MkdirAll(restoreDir(f.s.dir), 0o755); err != nil {
		return 0, 0, err
	}
	path := filepath.Join(restoreDir(f.s.dir), fmt.Sprintf("p%04d.sst", g.First))
	file, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return 0, 0, err
	}
	// A successful ingestion moves the file into the database, except an empty one, which it
	// skips; on failure the file stays. Either way nothing may be left behind.
	defer func() { _ = fs.Remove(path) }()
	w := sstable.NewWriter(objstorageprovider.NewFileWritable(file), f.s.opts.MakeWriterOptions(numLevels-1, f.s.db.TableFormat()))
	keys := 0
	endKey, genKey := metaKey(g.First, metaEnd), metaKey(g.First, metaGen)
	// The snapshot's range end and generation are in its first partition's metadata, whose
	// keys sort first. At the first key past them the range is settled (settle): groups held
	// here inside it that are older than the snapshot are dropped (OnAbsorb), and held is the
	// first partition that a newer group holds here (SetOwner), whose state the snapshot must
	// leave alone.
	end, gen := g.End, uint32(0)
	var held uint32
	var absorbed func() error
	known := false
	settle := func() error {
		known = true
		if f.onAbsorb != nil {
			var err error
			if absorbed, err = f.onAbsorb(g.First, end, gen); err != nil {
				return err
			}
		} else if end > g.End {
			return fmt.Errorf("snapshot of the group's range up to %d, past its [%d, %d)", end, g.First, g.End)
		}
		g.End = end
		var err error
		held, err = f.heldFrom(g)
		return err
	}
	meta := partitionPrefix(g.First, sectionMeta)
	err = readSnapshot(r, lo[:len(lo)-1], func(key, v []byte) error {
		switch {
		case bytes.Equal(key, endKey):
			if len(v) != 4 || binary.BigEndian.Uint32(v) <= g.First {
				return fmt.Errorf("snapshot of the group's range up to %x, which starts at %d", v, g.First)
			}
			end = binary.BigEndian.Uint32(v)
		case bytes.Equal(key, genKey) && len(v) == 4:
			gen = binary.BigEndian.Uint32(v)
		case !known && !bytes.HasPrefix(key, meta):
			if err := settle(); err != nil {
				return err
			}
		}
		if !inGroupState(key, Group{First: g.First, End: max(end, g.End)}) {
			return fmt.Errorf("snapshot key %x outside the group's state", key)
		}
		if known && binary.BigEndian.Uint32(key[1:5]) >= held {
			return nil // held here by a newer group (a later split's): its state is newer
		}
		keys++
		return w.Set(key, v)
	})
	if err == nil && !known {
		err = settle()
	}
	if err = errors.Join(err, w.Close()); err != nil { // Close syncs the file
		return 0, 0, err
	}
	// An empty snapshot ingests nothing but still excises: the partition is emptied. The
	// excise also removes the Raft state and metadata of the groups absorbed, which start
	// inside the range, in the same atomic step.
	lo, hi := snapshotBounds(Group{ID: g.ID, First: g.First, End: held})
	if _, err := f.s.db.IngestAndExcise(context.Background(), []string{path}, nil, nil, pebble.KeyRange{Start: lo, End: hi}); err != nil {
		return 0, 0, fmt.Errorf("ingest: %w", err)
	}
	if absorbed != nil {
		// Their tombstones: after the ingest, so that a crash before it leaves them whole
		// (they open again, and a merge replayed here still finds them). A crash between the
		// two leaves groups covered by a newer one, which the node drops when it starts.
		if err := absorbed(); err != nil {
			return 0, 0, err
		}
	}
	return keys, g.End, nil
}

// HoldsRange reports whether this group holds every partition of its range on this node
// (SetOwner): false while a group a later split made holds some of them here.
func (f *FSM) HoldsRange() bool {
	g := f.Group()
	held, err := f.heldFrom(g)
	return err == nil && held == g.End
}

// heldFrom returns the first partition of g's range that another group holds on this node
// (g.End when none does). The partitions from there to g.End must all be held by others:
// the groups a split makes take the end of their parent's range, so a snapshot taken before
// the splits covers them whole. A range where this group holds partitions past one another
// group holds (a later split's child here, an earlier one's not) cannot be restored without
// overwriting one or leaving the other stale; it is refused, and Raft retries.
func (f *FSM) heldFrom(g Group) (uint32, error) {
	if f.owns == nil {
		return g.End, nil
	}
	held := g.End
	for p := g.First; p < g.End; p++ {
		switch {
		case !f.owns(p) && held == g.End:
			held = p
		case f.owns(p) && held != g.End:
			return 0, fmt.Errorf("snapshot of [%d, %d) would overwrite partition %d of another group held here, and leave partition %d stale", g.First, g.End, held, p)
		}
	}
	if held == g.First {
		return 0, fmt.Errorf("snapshot of [%d, %d): its first partition is held here by another group", g.First, g.End)
	}
	return held, nil
}

// inGroupState reports whether key is in the 'm' or 's' section of one of g's partitions.
func inGroupState(key []byte, g Group) bool {
	if len(key) < 6 || key[0] != prefixPartition || (key[5] != sectionMeta && key[5] != sectionState) {
		return false
	}
	return g.Contains(binary.BigEndian.Uint32(key[1:5]))
}

// restoreDir holds the sstables of restores in progress: beside the database, on the same
// file system, as ingestion requires.
func restoreDir(dbDir string) string { return filepath.Clean(dbDir) + ".restore" }

// numLevels is Pebble's LSM depth; a restored partition is written for the lowest level.
const numLevels = len(pebble.Options{}.Levels)

// readSnapshot parses a snapshot stream, calling fn per key (a full Pebble key: v1Prefix
// before a version 1 stream's keys, 'p' before the others), and verifies its checksum.
func readSnapshot(r io.Reader, v1Prefix []byte, fn func(key, v []byte) error) error {
	cr := &crcReader{r: bufio.NewReaderSize(r, 1<<16), crc: crc32.New(crcTable)}
	magic := make([]byte, len(snapshotMagic))
	prefix := []byte{prefixPartition}
	if _, err := io.ReadFull(cr, magic); err != nil {
		return fmt.Errorf("not a shardkeeper snapshot")
	}
	switch string(magic) {
	case snapshotMagic:
	case snapshotMagicV1:
		prefix = v1Prefix
	default:
		return fmt.Errorf("not a shardkeeper snapshot")
	}
	var key []byte
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
		key = append(append(key[:0], prefix...), k...)
		if err := fn(key, v); err != nil {
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
