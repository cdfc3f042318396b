package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Key layout. Every key a node stores lives in one Pebble DB:
//
//	'n' <name>                         node metadata (the partition and group counts)
//	'n' "group/" <id u32>              a split-born group this node holds: first, end, gen (u32s)
//	'n' "gone/" <id u32>               a group merged into another here (merge.go)
//	'p' <partition u32> 'R' 'l' <index u64>   Raft log entry of the group it is first of
//	'p' <partition u32> 'R' 's' <key>         Raft stable store of the group it is first of
//	'p' <partition u32> 'm' <name>            FSM metadata of the group it is first of
//	                                          (applied index, command time, configuration;
//	                                          after a split or merge, the range end and
//	                                          generation; a split-born group's id and birth
//	                                          configuration; while frozen, the freeze's
//	                                          index; the merges its log decided)
//	'p' <partition u32> 's' <state key>       replicated state, laid out by the actors package
//
// Integers are big-endian so that byte order is numeric order. A group of partitions
// [First, End) keeps its Raft log, stable store and FSM metadata under First's prefix, so
// its snapshot is one contiguous range, from First's 'm' section to the end of End-1's 's'
// section: it holds the group's metadata and every one of its partitions' state, and the
// only Raft sections inside it are those of partitions that are not first of a group, which
// are empty. The Raft sections are local to each replica and are never part of a snapshot.
// No section may sort between 'm' and 's' (the Raft section is 'R', which sorts before both).
const (
	prefixNode      = 'n'
	prefixPartition = 'p'

	sectionRaft  = 'R'
	sectionMeta  = 'm'
	sectionState = 's'

	raftLog    = 'l'
	raftStable = 's'
)

var (
	metaApplied     = []byte("applied")
	metaTime        = []byte("time")
	metaEnd         = []byte("end")    // the group's range end, once a split changed it
	metaGroup       = []byte("group")  // the id of a split-born group starting here
	metaBirth       = []byte("birth")  // a split-born group's birth configuration
	metaGen         = []byte("gen")    // the group's generation (Group.Gen), once not 0
	metaConfig      = []byte("config") // the configuration the group's log last set
	metaFrozen      = []byte("frozen") // the index of the freeze it is frozen at
	metaDecision    = []byte("merge/") // <group u32><index u64>: 'm' or 'a' (merge.go)
	metaMergedAt    = []byte("merged") // the index of the last merge the group applied
	nodeGone        = []byte("gone/")
	nodeGroup       = []byte("group/")
	nodeParts       = []byte("partitions")
	nodeGroups      = []byte("groups")
	nodeIncarnation = []byte("incarnation")
)

func partitionPrefix(p uint32, section byte) []byte {
	return appendPartitionPrefix(make([]byte, 0, 16), p, section)
}

func appendPartitionPrefix(k []byte, p uint32, section byte) []byte {
	k = append(k, prefixPartition)
	k = binary.BigEndian.AppendUint32(k, p)
	return append(k, section)
}

func nodeKey(name []byte) []byte { return append([]byte{prefixNode}, name...) }

func logKey(p uint32, index uint64) []byte {
	k := append(partitionPrefix(p, sectionRaft), raftLog)
	return binary.BigEndian.AppendUint64(k, index)
}

func stableKey(p uint32, key []byte) []byte {
	return append(append(partitionPrefix(p, sectionRaft), raftStable), key...)
}

func metaKey(p uint32, name []byte) []byte { return append(partitionPrefix(p, sectionMeta), name...) }

// StateKey returns the Pebble key of the relative state key k in partition p.
func StateKey(p uint32, k []byte) []byte {
	return append(appendPartitionPrefix(make([]byte, 0, 6+len(k)), p, sectionState), k...)
}

// snapshotBounds returns [lower, upper) covering group g's metadata and state: from First's
// 'm' section to the end of End-1's 's' section. First's Raft section 'R' sorts before 'm',
// so it is outside.
func snapshotBounds(g Group) (lower, upper []byte) {
	return partitionPrefix(g.First, sectionMeta), partitionPrefix(g.End-1, sectionState+1)
}

// PrefixEnd returns the smallest key greater than every key with the given prefix, or nil
// when there is none (the prefix is all 0xff).
func PrefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}

// AppendComponent appends a length-prefixed component (uvarint length, then the bytes), so
// that keys built from several components are unambiguous whatever bytes they hold.
func AppendComponent(dst, c []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(c)))
	return append(dst, c...)
}

// ErrBadComponent reports a key that does not hold a well-formed length-prefixed component.
var ErrBadComponent = errors.New("malformed key component")

// ReadComponent reads one component written by AppendComponent and returns it and the rest.
func ReadComponent(b []byte) (c, rest []byte, err error) {
	n, w := binary.Uvarint(b)
	if w <= 0 || uint64(len(b)-w) < n {
		return nil, nil, fmt.Errorf("%w: %x", ErrBadComponent, b)
	}
	return b[w : w+int(n)], b[w+int(n):], nil
}
