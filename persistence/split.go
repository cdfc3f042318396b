package persistence

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"
)

// A split is a command in a group's own log: applied at index N, it cuts the group's range
// [First, End) at At. The group keeps [First, At); a new group, the child, takes [At, End)
// on the same replicas, with its partitions' state already on their disks (CockroachDB's
// range splits are the model). Every replica applies it in one Pebble batch:
//
//   - the parent's range end becomes At (meta "end", so a restart and a snapshot carry it);
//   - the child's metadata is written under At's prefix: its id, range, applied index 1,
//     the parent's command time, and its birth record — the configuration it starts with;
//   - any Raft state left under At's prefix is deleted (the child's log lives there);
//   - the node records the child among its groups.
//
// The child's Raft state is then its birth: a snapshot at index 1, term 1, holding the
// birth configuration and the child's state as the split left it, written by the host
// before it starts the child's Raft (cluster.Host). Every replica that applied the split
// writes the same birth, so the child's replicas agree on its log from the start; a replica
// added later receives a snapshot, never the log from index 1.
//
// Between the split and the child's start nothing writes the child's partitions: the
// parent refuses commands that name them (confine), and the child does not run yet.

// SplitID is the id of a group born by a split at partition first, its incarnation-th
// (1, 2, …: a partition may start several groups over a cluster's life, one at a time).
// The ids of split-born groups have the top bit set, so they never collide with the groups
// of a layout (0..G-1).
func SplitID(first uint32, incarnation uint32) uint32 {
	return 1<<31 | (incarnation&0x7fff)<<16 | first&0xffff
}

// Split is a split command's content.
type Split struct {
	At      uint32 // first partition of the child
	Child   uint32 // the child's id (SplitID(At, n))
	Servers []raft.Server
}

const commandSplit = 3

// ErrSplitRefused reports a split that does not fit the group's range as it is; nothing of
// it is applied, on any replica.
var ErrSplitRefused = errors.New("split refused")

// EncodeSplit appends the log entry of split s at time t: version byte (3), time (varint),
// At, Child (uvarints), the server count (uvarint), then per server its suffrage byte, id
// and address as length-prefixed strings.
func EncodeSplit(dst []byte, t int64, s Split) []byte {
	dst = append(dst, commandSplit)
	dst = binary.AppendVarint(dst, t)
	dst = binary.AppendUvarint(dst, uint64(s.At))
	dst = binary.AppendUvarint(dst, uint64(s.Child))
	return appendServers(dst, s.Servers)
}

func appendServers(dst []byte, servers []raft.Server) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(servers)))
	for _, sv := range servers {
		dst = append(dst, byte(sv.Suffrage))
		dst = AppendComponent(dst, []byte(sv.ID))
		dst = AppendComponent(dst, []byte(sv.Address))
	}
	return dst
}

func readServers(b []byte) ([]raft.Server, []byte, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w)/3 { // every server takes at least three bytes
		return nil, nil, fmt.Errorf("%w: bad server count", ErrBadCommand)
	}
	b = b[w:]
	servers := make([]raft.Server, 0, n)
	for i := uint64(0); i < n; i++ {
		if len(b) == 0 || raft.ServerSuffrage(b[0]) > raft.Staging {
			return nil, nil, fmt.Errorf("%w: server %d has a bad suffrage", ErrBadCommand, i)
		}
		sv := raft.Server{Suffrage: raft.ServerSuffrage(b[0])}
		var id, addr []byte
		var err error
		if id, b, err = ReadComponent(b[1:]); err != nil {
			return nil, nil, fmt.Errorf("%w: server %d id: %v", ErrBadCommand, i, err)
		}
		if addr, b, err = ReadComponent(b); err != nil {
			return nil, nil, fmt.Errorf("%w: server %d address: %v", ErrBadCommand, i, err)
		}
		sv.ID, sv.Address = raft.ServerID(id), raft.ServerAddress(addr)
		servers = append(servers, sv)
	}
	return servers, b, nil
}

// decodeSplit parses the body of a version 3 entry (after the version byte).
func decodeSplit(b []byte) (t int64, s Split, err error) {
	t, n := binary.Varint(b)
	if n <= 0 {
		return 0, s, fmt.Errorf("%w: bad time", ErrBadCommand)
	}
	b = b[n:]
	for _, dst := range []*uint32{&s.At, &s.Child} {
		v, n := binary.Uvarint(b)
		if n <= 0 || v > math.MaxUint32 {
			return 0, s, fmt.Errorf("%w: bad split", ErrBadCommand)
		}
		*dst, b = uint32(v), b[n:]
	}
	if s.Servers, b, err = readServers(b); err != nil {
		return 0, s, err
	}
	if len(b) != 0 {
		return 0, s, fmt.Errorf("%w: %d trailing bytes", ErrBadCommand, len(b))
	}
	return t, s, nil
}

// applySplit adds split s, applied at the group's entry index with the command time last,
// to batch b, given the group's range g before it. It returns the child; a split that does
// not fit g is refused and adds nothing.
func (f *FSM) applySplit(b *pebble.Batch, g Group, s Split, last int64) (Group, error) {
	if s.At <= g.First || s.At >= g.End {
		return Group{}, fmt.Errorf("%w: partition %d is not inside the group's [%d, %d)", ErrSplitRefused, s.At, g.First, g.End)
	}
	if s.Child>>31 == 0 || s.Child&0xffff != s.At&0xffff || s.Child == g.ID {
		return Group{}, fmt.Errorf("%w: %#x is not an id of a group starting at %d", ErrSplitRefused, s.Child, s.At)
	}
	// Both halves take a generation above the parent's: where a node still knows the
	// parent's old range beside the child's, the child's wins (Holders).
	child := Group{ID: s.Child, First: s.At, End: g.End, Gen: g.Gen + 1}
	u32 := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	u64 := func(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
	_ = b.Set(metaKey(g.First, metaEnd), u32(s.At), nil)
	_ = b.Set(metaKey(g.First, metaGen), u32(child.Gen), nil)
	// A replica that lagged behind the split may hold the child already (its leader sent
	// it a snapshot): the child's state here is newer than the split's, and stays.
	if _, closer, err := f.s.db.Get(groupRecordKey(s.Child)); err == nil {
		closer.Close()
		return child, nil
	} else if !errors.Is(err, pebble.ErrNotFound) {
		panic(fmt.Sprintf("group %d: read group record: %v", g.ID, err))
	}
	// Whatever Raft state or metadata the child's first partition held (a group that
	// started there once) is not the child's.
	for _, sec := range []byte{sectionRaft, sectionMeta} {
		lo := partitionPrefix(s.At, sec)
		_ = b.DeleteRange(lo, PrefixEnd(lo), nil)
	}
	_ = b.Set(metaKey(s.At, metaGroup), u32(s.Child), nil)
	_ = b.Set(metaKey(s.At, metaEnd), u32(child.End), nil)
	_ = b.Set(metaKey(s.At, metaApplied), u64(birthIndex), nil)
	_ = b.Set(metaKey(s.At, metaTime), u64(uint64(last)), nil)
	_ = b.Set(metaKey(s.At, metaBirth), appendServers(nil, s.Servers), nil)
	_ = b.Set(metaKey(s.At, metaConfig), configRecord(birthIndex, s.Servers), nil)
	_ = b.Set(metaKey(s.At, metaGen), u32(child.Gen), nil)
	_ = b.Set(groupRecordKey(s.Child), groupRecord(child), nil)
	return child, nil
}

// birthIndex is the index (and term) of a split-born group's first snapshot: its log
// starts after it.
const birthIndex = 1

// BirthIndex is the index and term of a split-born group's birth snapshot.
const BirthIndex = birthIndex

// Birth returns the configuration group g was born with by a split, as its birth record
// holds it; ok is false for a group that was not born by a split on this node (one of the
// layout, or one this node received by snapshot).
func (s *Store) Birth(g Group) (servers []raft.Server, ok bool, err error) {
	if id, found, err := s.metaU32(g.First, metaGroup); err != nil || !found || id != g.ID {
		return nil, false, err
	}
	v, closer, err := s.db.Get(metaKey(g.First, metaBirth))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer closer.Close()
	servers, err = decodeServers(v)
	if err != nil {
		return nil, false, fmt.Errorf("birth record of group %#x: %w", g.ID, err)
	}
	return servers, true, nil
}

// decodeServers reads a record that holds servers and nothing else.
func decodeServers(v []byte) ([]raft.Server, error) {
	servers, rest, err := readServers(v)
	if err == nil {
		err = noTrailing(rest)
	}
	return servers, err
}

// NextSplitID is the id a split at partition p would give its child here: the next
// incarnation after the group that last started at p, as this node's state records it.
func (s *Store) NextSplitID(p uint32) (uint32, error) {
	id, ok, err := s.metaU32(p, metaGroup)
	if err != nil || !ok {
		return SplitID(p, 1), err
	}
	return SplitID(p, (id>>16)&0x7fff+1), nil
}

// metaU64 reads an 8-byte metadata record of the group whose first partition is p; 0 when
// absent.
func (s *Store) metaU64(p uint32, name []byte) (uint64, error) {
	v, closer, err := s.db.Get(metaKey(p, name))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read %s of partition %d: %w", name, p, err)
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, fmt.Errorf("corrupt %s of partition %d: %x", name, p, v)
	}
	return binary.BigEndian.Uint64(v), nil
}

// metaU32 reads a 4-byte metadata record of the group whose first partition is p.
func (s *Store) metaU32(p uint32, name []byte) (uint32, bool, error) {
	v, closer, err := s.db.Get(metaKey(p, name))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read %s of partition %d: %w", name, p, err)
	}
	defer closer.Close()
	if len(v) != 4 {
		return 0, false, fmt.Errorf("corrupt %s of partition %d: %x", name, p, v)
	}
	return binary.BigEndian.Uint32(v), true, nil
}

// Groups returns the groups this node holds: the layout's, each with the range and
// generation its state records (a split shrinks it, a merge extends it), and the groups
// recorded here since (born by a split, or added with RecordGroup), first partition first.
// Groups merged into another here are not among them (Gone).
func (s *Store) Groups(l Layout) ([]Group, error) {
	var out []Group
	for id := range uint32(l.Count()) {
		g := l.Group(id)
		if gone, err := s.Gone(id); err != nil {
			return nil, err
		} else if gone {
			continue
		}
		if g, err := s.recorded(g); err != nil {
			return nil, err
		} else {
			out = append(out, g)
		}
	}
	lo := nodeKey(nodeGroup)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: PrefixEnd(lo)})
	if err != nil {
		return nil, err
	}
	for ok := it.First(); ok; ok = it.Next() {
		k, v := it.Key()[len(lo):], it.Value()
		if len(k) != 4 || (len(v) != 8 && len(v) != 12) {
			it.Close()
			return nil, fmt.Errorf("corrupt group record %x = %x", it.Key(), v)
		}
		g := Group{ID: binary.BigEndian.Uint32(k), First: binary.BigEndian.Uint32(v), End: binary.BigEndian.Uint32(v[4:])}
		if len(v) == 12 {
			g.Gen = binary.BigEndian.Uint32(v[8:])
		}
		// The group's own metadata, once it has any, is the newer word on its range.
		if g, err = s.recorded(g); err != nil {
			it.Close()
			return nil, err
		}
		out = append(out, g)
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	sortGroups(out)
	return out, nil
}

// recorded returns g with the range end and generation its own metadata records, where it
// records them.
func (s *Store) recorded(g Group) (Group, error) {
	end, ok, err := s.recordedEnd(g)
	if err != nil || !ok {
		return g, err
	}
	g.End = end
	gen, ok, err := s.metaU32(g.First, metaGen)
	if ok {
		g.Gen = gen
	}
	return g, err
}

// recordedEnd returns the range end group g's own metadata records (a split shrank it, or
// the group was born by one): for a split-born group only once the metadata under its first
// partition is its own (an older group may have started there).
func (s *Store) recordedEnd(g Group) (uint32, bool, error) {
	if g.ID>>31 != 0 {
		if id, ok, err := s.metaU32(g.First, metaGroup); err != nil || !ok || id != g.ID {
			return 0, false, err
		}
	}
	return s.metaU32(g.First, metaEnd)
}

// RecordGroup records that this node holds an instance of g, a group born by a split
// elsewhere, so that it is opened again after a restart; its state arrives by snapshot. A
// group recorded already (born here by the split) stays as it is.
func (s *Store) RecordGroup(g Group) error {
	if g.ID>>31 == 0 || g.End <= g.First {
		return fmt.Errorf("record group %#x [%d, %d): not a split-born group", g.ID, g.First, g.End)
	}
	s.groupsMu.Lock()
	defer s.groupsMu.Unlock()
	if _, closer, err := s.db.Get(groupRecordKey(g.ID)); err == nil {
		return closer.Close()
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return err
	}
	if gone, err := s.Gone(g.ID); err != nil || gone {
		return errors.Join(err, fmt.Errorf("record group %#x: %w", g.ID, ErrGone))
	}
	return s.db.Set(groupRecordKey(g.ID), groupRecord(g), pebble.Sync)
}

// ErrGone reports a group merged into another on this node: it never opens here again.
var ErrGone = errors.New("the group was merged into another")

// groupRecord is the value of g's node record: first, end and generation (u32s; records
// written before generations have no generation).
func groupRecord(g Group) []byte {
	v := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, g.First), g.End)
	return binary.BigEndian.AppendUint32(v, g.Gen)
}

func groupRecordKey(id uint32) []byte {
	return binary.BigEndian.AppendUint32(nodeKey(nodeGroup), id)
}

func sortGroups(gs []Group) {
	slices.SortFunc(gs, func(a, b Group) int { return cmp.Compare(a.First, b.First) })
}
