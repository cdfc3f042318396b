package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/raft"
)

// A merge joins two adjacent groups on the same replicas: L = [a, b) takes in R = [b, c)
// (CockroachDB's range merges are the model). Every partition's state already lives under
// its own key prefix on every replica of both, so a merge moves no state; it changes which
// log writes it. It takes three entries:
//
//  1. Freeze, in R's log at index F. From F on, R applies no op and no split: its state is
//     final. It is refused unless R's configuration, as R's log records it (the FSM keeps
//     it from the configuration entries it applies), holds exactly the voters it names.
//  2. The coordinator — the node leading both — waits until every one of those voters
//     holds R's log up to F (its match index), so that every replica can bring its R to F
//     from its own disk whatever R's leader does afterwards.
//  3. Merge, in L's log, naming R, its range and generation, F and the voters. Every replica
//     of L checks, deterministically, that L's range ends where R's starts and that L's
//     configuration holds exactly those voters; then (OnMerge) stops its R after applying
//     R's log up to F, and in one synced batch extends L's range to c, raises L's generation
//     above both, deletes R's Raft state and metadata, and tombstones R's id, so that it
//     never opens again here.
//
// If the coordinator gives up between 1 and 3 (a timeout, a lost leadership), Abort in L's
// log decides the merge did not happen; only then does Unfreeze reopen R. Merge and Abort of
// one (R, F) are decided by L's log alone: the first applied wins and the other is refused,
// so R is never written again once L may have taken it in.
//
// A replica added to L after a merge must never replay it (it holds no R to bring to F): the
// host compacts L's log past the merge before adding one (Host.Change), so it starts from a
// snapshot. A replica that lags behind the merge and receives such a snapshot drops its own
// groups inside the larger range first (OnAbsorb).

// Freeze is a freeze command's content: the group the merge is for, and the configuration
// R's log must have last set: the index of that entry and its voters.
type Freeze struct {
	L           uint32
	ConfigIndex uint64
	Servers     []raft.Server
}

// Merge is a merge command's content, proposed in L's log.
type Merge struct {
	L           uint32 // the group that takes R in (the one whose log holds the merge)
	R           Group  // the right-hand group as its leader saw it frozen (its Gen too)
	At          uint64 // the index of R's freeze
	ConfigIndex uint64 // the index of the configuration entry L's log must have last applied
	Servers     []raft.Server
}

const (
	commandFreeze   = 4
	commandUnfreeze = 5
	commandMerge    = 6
	commandAbort    = 7
)

var (
	// ErrFrozen reports a command for a group that is frozen for a merge: nothing of it was
	// applied; its partitions are about to belong to the group on their left.
	ErrFrozen = fmt.Errorf("%w: the group is frozen for a merge", ErrMoved)
	// ErrMergeRefused reports a freeze, merge, abort or unfreeze that does not fit the
	// group as it is; nothing of it is applied, on any replica.
	ErrMergeRefused = errors.New("merge refused")
	// ErrMerged reports an abort of a merge the group's log took already.
	ErrMerged = fmt.Errorf("%w: merged already", ErrMergeRefused)
)

// EncodeFreeze appends the log entry of a freeze at time t: version byte (4), time (varint),
// L and the configuration index (uvarints), the servers as in a split.
func EncodeFreeze(dst []byte, t int64, f Freeze) []byte {
	dst = append(dst, commandFreeze)
	dst = binary.AppendVarint(dst, t)
	dst = binary.AppendUvarint(dst, uint64(f.L))
	dst = binary.AppendUvarint(dst, f.ConfigIndex)
	return appendServers(dst, f.Servers)
}

// EncodeUnfreeze appends the log entry that reopens a group frozen at index at (version 5).
func EncodeUnfreeze(dst []byte, at uint64) []byte {
	return binary.AppendUvarint(append(dst, commandUnfreeze), at)
}

// EncodeMerge appends the log entry of a merge at time t: version byte (6), time (varint),
// L, R's id, first, end and generation, the freeze index, the configuration index
// (uvarints), the servers.
func EncodeMerge(dst []byte, t int64, m Merge) []byte {
	dst = append(dst, commandMerge)
	dst = binary.AppendVarint(dst, t)
	for _, v := range []uint64{uint64(m.L), uint64(m.R.ID), uint64(m.R.First), uint64(m.R.End), uint64(m.R.Gen), m.At, m.ConfigIndex} {
		dst = binary.AppendUvarint(dst, v)
	}
	return appendServers(dst, m.Servers)
}

// EncodeAbort appends the log entry, in l's log, that decides the merge of group r frozen
// at index at did not happen (version 7): l, r and at (uvarints).
func EncodeAbort(dst []byte, l, r uint32, at uint64) []byte {
	dst = binary.AppendUvarint(append(dst, commandAbort), uint64(l))
	dst = binary.AppendUvarint(dst, uint64(r))
	return binary.AppendUvarint(dst, at)
}

func readUvarints(b []byte, n int) ([]uint64, []byte, error) {
	out := make([]uint64, n)
	for i := range out {
		v, w := binary.Uvarint(b)
		if w <= 0 {
			return nil, nil, fmt.Errorf("%w: bad integer %d", ErrBadCommand, i)
		}
		out[i], b = v, b[w:]
	}
	return out, b, nil
}

func readTime(b []byte) (int64, []byte, error) {
	t, n := binary.Varint(b)
	if n <= 0 {
		return 0, nil, fmt.Errorf("%w: bad time", ErrBadCommand)
	}
	return t, b[n:], nil
}

func noTrailing(b []byte) error {
	if len(b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrBadCommand, len(b))
	}
	return nil
}

func decodeFreeze(b []byte) (int64, Freeze, error) {
	var f Freeze
	t, b, err := readTime(b)
	var v []uint64
	if err == nil {
		v, b, err = readUvarints(b, 2)
	}
	if err == nil && v[0] > math.MaxUint32 {
		err = fmt.Errorf("%w: bad group", ErrBadCommand)
	}
	if err == nil {
		f.L, f.ConfigIndex = uint32(v[0]), v[1]
		f.Servers, b, err = readServers(b)
	}
	if err == nil {
		err = noTrailing(b)
	}
	return t, f, err
}

func decodeMerge(b []byte) (int64, Merge, error) {
	var m Merge
	t, b, err := readTime(b)
	if err != nil {
		return 0, m, err
	}
	v, b, err := readUvarints(b, 7)
	if err != nil {
		return 0, m, err
	}
	for _, x := range v[:5] {
		if x > math.MaxUint32 {
			return 0, m, fmt.Errorf("%w: bad merge", ErrBadCommand)
		}
	}
	m.L = uint32(v[0])
	m.R = Group{ID: uint32(v[1]), First: uint32(v[2]), End: uint32(v[3]), Gen: uint32(v[4])}
	m.At, m.ConfigIndex = v[5], v[6]
	if m.Servers, b, err = readServers(b); err != nil {
		return 0, m, err
	}
	return t, m, noTrailing(b)
}

// SameVoters reports whether a and b hold the same voters and no other server (a non-voter
// would be a replica of one group and not the other).
func SameVoters(a, b []raft.Server) bool {
	ids := func(ss []raft.Server) []raft.ServerID {
		var out []raft.ServerID
		for _, s := range ss {
			if s.Suffrage != raft.Voter {
				return nil
			}
			out = append(out, s.ID)
		}
		slices.Sort(out)
		return out
	}
	x, y := ids(a), ids(b)
	return len(x) > 0 && len(x) == len(a) && len(y) == len(b) && slices.Equal(x, y)
}

// applyFreeze freezes the group at entry index for a merge into fr.L.
func (a *applying) applyFreeze(index uint64, t int64, fr Freeze) error {
	switch {
	case a.frozen != 0:
		return fmt.Errorf("%w: frozen already at %d", ErrMergeRefused, a.frozen)
	case fr.L == a.g.ID:
		return fmt.Errorf("%w: a group cannot merge into itself", ErrMergeRefused)
	case !a.configIs(fr.ConfigIndex, fr.Servers):
		return fmt.Errorf("%w: the group's configuration is not the one named (entry %d)", ErrMergeRefused, fr.ConfigIndex)
	}
	a.frozen, a.frozenFor, a.last = index, fr.L, max(a.last, t)
	v := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, index), fr.L)
	_ = a.b.Set(metaKey(a.g.First, metaFrozen), v, nil)
	return nil
}

// configIs reports whether the configuration the group's log last set is the entry at index
// with exactly the voters of servers and no other server. The index makes the check the same
// on every replica: a replica that has no record of that entry (it applied the entry with a
// release that did not record configurations) refuses, and so do all the others.
func (a *applying) configIs(index uint64, servers []raft.Server) bool {
	return index != 0 && a.configAt == index && SameVoters(a.config, servers)
}

func (a *applying) applyUnfreeze(at uint64) error {
	if a.frozen != at {
		return fmt.Errorf("%w: not frozen at %d", ErrMergeRefused, at)
	}
	a.frozen, a.frozenFor = 0, 0
	_ = a.b.Delete(metaKey(a.g.First, metaFrozen), nil)
	return nil
}

// decision reads what L's log decided of the merge of r frozen at at: 'm', 'a' or 0.
func (a *applying) decision(r uint32, at uint64) byte {
	if d, ok := a.decided[string(decisionKey(a.g.First, r, at))]; ok {
		return d
	}
	d, err := a.f.s.decision(a.g.First, r, at)
	if err != nil {
		panic(fmt.Sprintf("group %d: read merge decision: %v", a.g.ID, err))
	}
	return d
}

// decision reads the merge decision recorded in the metadata of the group starting at first.
func (s *Store) decision(first, r uint32, at uint64) (byte, error) {
	v, closer, err := s.db.Get(decisionKey(first, r, at))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer closer.Close()
	if len(v) != 1 {
		return 0, nil
	}
	return v[0], nil
}

func (a *applying) applyAbort(l, r uint32, at uint64) error {
	if l != a.g.ID {
		// Only the log of the group the freeze names decides; another's abort says nothing.
		return fmt.Errorf("%w: an abort for group %#x", ErrMergeRefused, l)
	}
	switch a.decision(r, at) {
	case 'm':
		return fmt.Errorf("%w: group %#x frozen at %d", ErrMerged, r, at)
	case 'a':
		return nil
	}
	a.decide(r, at, 'a')
	return nil
}

// applyMerge checks merge m against L as it is and, if it fits, has the host bring R to its
// freeze and stop it (OnMerge), then adds the merge to a fresh batch. It flushes the batch
// before: the host's work must not wait on a batch that holds the store's group lock.
func (a *applying) applyMerge(index uint64, t int64, m Merge) error {
	r := m.R
	switch {
	case m.L != a.g.ID:
		return fmt.Errorf("%w: a merge into group %#x", ErrMergeRefused, m.L)
	case a.frozen != 0:
		return fmt.Errorf("%w: the group is frozen itself", ErrMergeRefused)
	case r.First != a.g.End || r.End <= r.First || r.ID == a.g.ID:
		return fmt.Errorf("%w: [%d, %d) does not start where the group's [%d, %d) ends", ErrMergeRefused, r.First, r.End, a.g.First, a.g.End)
	case !a.configIs(m.ConfigIndex, m.Servers):
		return fmt.Errorf("%w: the group's configuration is not the one named (entry %d)", ErrMergeRefused, m.ConfigIndex)
	case a.decision(r.ID, m.At) != 0:
		return fmt.Errorf("%w: the merge of %#x frozen at %d was decided already", ErrMergeRefused, r.ID, m.At)
	}
	a.applied = index - 1 // the entries before it
	a.flush()
	a.applied = index
	if a.f.onMerge != nil {
		if err := a.f.onMerge(r, m.At); err != nil {
			// Every other replica takes R in; this one cannot, and must not diverge.
			panic(fmt.Sprintf("group %d: merge of group %#x frozen at %d: %v", a.g.ID, r.ID, m.At, err))
		}
	}
	a.lock()
	u32 := func(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
	a.g.End, a.g.Gen = r.End, max(a.g.Gen, r.Gen)+1
	a.last = max(a.last, t)
	_ = a.b.Set(metaKey(a.g.First, metaEnd), u32(a.g.End), nil)
	_ = a.b.Set(metaKey(a.g.First, metaGen), u32(a.g.Gen), nil)
	a.decide(r.ID, m.At, 'm')
	a.mergedAt = a.applied
	_ = a.b.Set(metaKey(a.g.First, metaMergedAt), binary.BigEndian.AppendUint64(nil, a.applied), nil)
	a.dropGroup(r)
	a.merged = append(a.merged, r)
	return nil
}

// dropGroup adds to the batch the removal of group r, merged in: see Store.addDrop.
func (a *applying) dropGroup(r Group) {
	if err := a.f.s.addDrop(a.b, r, true, goneMerged); err != nil {
		panic(fmt.Sprintf("group %d: %v", a.g.ID, err))
	}
	a.sync = true
}

// addDrop adds to b the removal of group g from this node: with state, its Raft state and
// metadata (but the id that started there, which the next split there counts on); its
// record; and a tombstone of the kind given.
func (s *Store) addDrop(b *pebble.Batch, g Group, state bool, kind byte) error {
	if state {
		id, ok, err := s.metaU32(g.First, metaGroup)
		if err != nil {
			return err
		}
		for _, sec := range []byte{sectionRaft, sectionMeta} {
			lo := partitionPrefix(g.First, sec)
			_ = b.DeleteRange(lo, PrefixEnd(lo), nil)
		}
		if ok {
			_ = b.Set(metaKey(g.First, metaGroup), binary.BigEndian.AppendUint32(nil, id), nil)
		}
	}
	_ = b.Delete(groupRecordKey(g.ID), nil)
	return b.Set(tombstoneKey(g.ID), []byte{kind}, nil)
}

// The kinds of tombstone: a group merged into another by its own freeze (its log was applied
// here up to the freeze, and takes no merge after it), or one dropped otherwise (absorbed by
// a snapshot, or found stale), which says nothing of how far its log went.
const (
	goneMerged  = 'm'
	goneDropped = 'd'
)

func (a *applying) decide(r uint32, at uint64, d byte) {
	k := decisionKey(a.g.First, r, at)
	_ = a.b.Set(k, []byte{d}, nil)
	if a.decided == nil {
		a.decided = map[string]byte{}
	}
	a.decided[string(k)] = d
}

func decisionKey(first, r uint32, at uint64) []byte {
	k := binary.BigEndian.AppendUint32(metaKey(first, metaDecision), r)
	return binary.BigEndian.AppendUint64(k, at)
}

func tombstoneKey(id uint32) []byte {
	return binary.BigEndian.AppendUint32(nodeKey(nodeGone), id)
}

// Gone reports whether group id was merged into another, or dropped, on this node: it never
// opens here again.
func (s *Store) Gone(id uint32) (bool, error) {
	kind, err := s.goneKind(id)
	return kind != 0, err
}

// MergedAway reports whether group id was merged into another on this node by its own
// freeze: its log was applied here up to the freeze, and a merge into it can no longer
// happen (its log refuses one after the freeze).
func (s *Store) MergedAway(id uint32) (bool, error) {
	kind, err := s.goneKind(id)
	return kind == goneMerged, err
}

func (s *Store) goneKind(id uint32) (byte, error) {
	v, closer, err := s.db.Get(tombstoneKey(id))
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer closer.Close()
	if len(v) == 1 && v[0] == goneMerged {
		return goneMerged, nil
	}
	return goneDropped, nil
}

// Absorb drops groups that a snapshot of a newer group covering them replaced here: their
// records go and their ids are tombstoned, in one synced batch (the snapshot's ingest
// removed their Raft state and metadata). Their Raft instances must be stopped first.
func (s *Store) Absorb(groups []Group) error { return s.drop(groups, false) }

// Drop drops stale groups, which a newer group starting at the same partition replaces here:
// their Raft state, their metadata (but the id that started there, which the next split
// there counts on) and their records go, and their ids are tombstoned, in one synced batch.
// Their Raft instances must be stopped first.
func (s *Store) Drop(groups []Group) error { return s.drop(groups, true) }

func (s *Store) drop(groups []Group, state bool) error {
	s.groupsMu.Lock()
	defer s.groupsMu.Unlock()
	b := s.db.NewBatch()
	defer b.Close()
	for _, g := range groups {
		if err := s.addDrop(b, g, state, goneDropped); err != nil {
			return err
		}
	}
	return b.Commit(pebble.Sync)
}

// MergedAt is the index of the last merge the group applied (0: none; kept in its
// snapshots).
func (f *FSM) MergedAt() uint64 { return f.mergedAt.Load() }

// Frozen is the index at which the group froze for a merge, 0 when it is not frozen.
func (f *FSM) Frozen() uint64 { return f.frozen.Load() }

// FrozenFor is the group the freeze is for (valid while Frozen is not 0).
func (f *FSM) FrozenFor() uint32 { return f.frozenFor.Load() }

// Decision is what the group's log decided of the merge of group r frozen at index at: 'm'
// (merged), 'a' (aborted), or 0 (nothing yet, or unreadable).
func (f *FSM) Decision(r uint32, at uint64) byte {
	d, _ := f.s.decision(f.first, r, at)
	return d
}

// ConfigIndex is the index of the configuration entry the group's log last applied, as the
// FSM recorded it (0: none recorded).
func (f *FSM) ConfigIndex() uint64 { return f.configAt.Load() }

// Config is the group's configuration as its log last set it (nil before the FSM applied
// a configuration entry, as after an upgrade from a release that did not record it).
func (f *FSM) Config() []raft.Server {
	if c := f.config.Load(); c != nil {
		return *c
	}
	return nil
}

// OnMerge sets the function called, on the FSM goroutine, when this group applies a merge of
// group r frozen at index at, before the merge takes effect: it must bring this node's
// instance of r to that index and stop it, or fail (the process then stops rather than
// diverge). OnMerged is called after the merge is durable, with the group's range after it
// and r. Set them before the FSM is used.
func (f *FSM) OnMerge(fn func(r Group, at uint64) error) { f.onMerge = fn }

// OnMerged: see OnMerge.
func (f *FSM) OnMerged(fn func(l, r Group)) { f.onMerged = fn }

// OnAbsorb sets the function called, on the FSM goroutine, when a snapshot is about to
// restore the range [from, to) at generation gen (a range larger than the group's, or a
// newer generation: a merge this replica had not applied). It must stop the groups held here
// that start inside the range, after from, with a generation below gen, and stop counting
// them as holders (SetOwner); the snapshot's ingest then replaces their state and removes
// their Raft state, after which the restore calls the function it returned (nil: none),
// which must drop them for good (Store.Absorb). Without it a larger range is refused.
func (f *FSM) OnAbsorb(fn func(from, to, gen uint32) (func() error, error)) { f.onAbsorb = fn }

// MergeNames reports whether the log entry data is a merge and, if so, whether it names
// server id among its voters: a replica it does not name holds no instance of the group it
// takes in, and must never apply it (it starts from a snapshot taken after it instead).
func MergeNames(data []byte, id raft.ServerID) (merge, named bool) {
	if len(data) == 0 || data[0] != commandMerge {
		return false, false
	}
	_, m, err := decodeMerge(data[1:])
	if err != nil {
		return true, true // malformed: every replica refuses it alike
	}
	for _, s := range m.Servers {
		if s.ID == id {
			return true, true
		}
	}
	return true, false
}
