package persistence

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"

	"github.com/cockroachdb/pebble/v2"
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
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	if err := f.s.db.LogData(nil, pebble.Sync); err != nil {
		return nil, fmt.Errorf("sync before snapshot of partition %d: %w", f.p, err)
	}
	return &fsmSnapshot{snap: f.s.db.NewSnapshot(), p: f.p}, nil
}

type fsmSnapshot struct {
	snap *pebble.Snapshot
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

// Restore replaces the partition's state with the snapshot in rc, atomically: the old range
// is deleted and the new keys written in one synced batch, so a crash leaves either the old
// state or the new, never a mix.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	lo, hi := snapshotBounds(f.p)
	b := f.s.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange(lo, hi, nil); err != nil {
		return err
	}
	prefix := lo[:len(lo)-1]
	err := readSnapshot(rc, func(k, v []byte) error {
		if len(k) == 0 || (k[0] != sectionMeta && k[0] != sectionState) {
			return fmt.Errorf("snapshot key %x outside the partition's state", k)
		}
		return b.Set(append(append([]byte(nil), prefix...), k...), v, nil)
	})
	if err != nil {
		return fmt.Errorf("restore partition %d: %w", f.p, err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("restore partition %d: commit: %w", f.p, err)
	}
	return f.load()
}

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
