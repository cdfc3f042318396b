package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
)

// Command is one Raft log entry's worth of state changes for a group of partitions: the
// writes of every message the leader coalesced into it, and the leader's clock when it
// proposed them.
//
// Keys are relative state keys (see StateKey) of the partition each op names; the FSM
// refuses a command naming a partition outside its group, so a command cannot touch the Raft
// or metadata sections, or another group's state, whatever bytes it holds.
type Command struct {
	// Time is the proposing leader's wall clock in Unix milliseconds. Every expiry decision
	// the command embodies was made against this clock, never the applying node's.
	Time int64
	Ops  []Op
	// v1 marks a command decoded from version 1, written when every group held one
	// partition: its ops name none and belong to the group's first partition.
	v1 bool
}

// Op is one write: a put of Value at Key, or a delete of Key, in Partition.
type Op struct {
	Delete    bool
	Partition uint32
	Key       []byte
	Value     []byte
}

const (
	commandV1      = 1 // ops without a partition
	commandVersion = 2
	opPut          = 1
	opDelete       = 2
)

// ErrBadCommand reports a log entry that does not decode as a Command.
var ErrBadCommand = errors.New("malformed command")

// Encode appends the command's binary form to dst:
// version byte (2), time (varint), op count (uvarint), then per op a type byte, the
// partition (uvarint), the key and (for puts) the value as length-prefixed strings.
// Version 1 has no partition per op (see EncodeFor).
func (c *Command) Encode(dst []byte) []byte { return c.encode(dst, commandVersion) }

// EncodeFor appends the command's binary form for the log of group g: version 1, without
// the partitions, when g holds one partition and every op is in it, which nodes that predate
// groups read too, so that a cluster of such groups (G = P) upgrades one node at a time;
// version 2 otherwise. The ops decide, not g alone: a caller's g may predate a merge that
// gave the group more partitions, and a version 1 op lands in the group's first partition.
func (c *Command) EncodeFor(g Group, dst []byte) []byte {
	if g.End-g.First == 1 && !slices.ContainsFunc(c.Ops, func(op Op) bool { return op.Partition != g.First }) {
		return c.encode(dst, commandV1)
	}
	return c.encode(dst, commandVersion)
}

func (c *Command) encode(dst []byte, version byte) []byte {
	size := 1 + 2*binary.MaxVarintLen64
	for _, op := range c.Ops {
		size += 1 + 3*binary.MaxVarintLen32 + len(op.Key) + len(op.Value)
	}
	dst = slices.Grow(dst, size) // one allocation, not one per growth
	dst = append(dst, version)
	dst = binary.AppendVarint(dst, c.Time)
	dst = binary.AppendUvarint(dst, uint64(len(c.Ops)))
	for _, op := range c.Ops {
		typ := byte(opPut)
		if op.Delete {
			typ = opDelete
		}
		dst = append(dst, typ)
		if version != commandV1 {
			dst = binary.AppendUvarint(dst, uint64(op.Partition))
		}
		dst = AppendComponent(dst, op.Key)
		if !op.Delete {
			dst = AppendComponent(dst, op.Value)
		}
	}
	return dst
}

// DecodeCommand parses b. It never panics; malformed input is an error wrapping
// ErrBadCommand. (Padded varints are accepted, so decoding is not injective: re-encoding a
// decoded command gives the canonical form, which decodes to the same command.) The returned
// slices alias b.
func DecodeCommand(b []byte) (Command, error) {
	var c Command
	if len(b) == 0 || (b[0] != commandVersion && b[0] != commandV1) {
		return c, fmt.Errorf("%w: unknown version", ErrBadCommand)
	}
	c.v1 = b[0] == commandV1
	b = b[1:]
	t, n := binary.Varint(b)
	if n <= 0 {
		return c, fmt.Errorf("%w: bad time", ErrBadCommand)
	}
	c.Time = t
	b = b[n:]
	count, n := binary.Uvarint(b)
	// Every op takes at least two bytes, which bounds the allocation by the input size.
	if n <= 0 || count > uint64(len(b)-n)/2 {
		return c, fmt.Errorf("%w: bad op count", ErrBadCommand)
	}
	b = b[n:]
	c.Ops = make([]Op, 0, count)
	for i := uint64(0); i < count; i++ {
		if len(b) == 0 {
			return c, fmt.Errorf("%w: truncated at op %d", ErrBadCommand, i)
		}
		typ := b[0]
		b = b[1:]
		var op Op
		var err error
		if !c.v1 {
			p, n := binary.Uvarint(b)
			if n <= 0 || p > math.MaxUint32 {
				return c, fmt.Errorf("%w: op %d has a bad partition", ErrBadCommand, i)
			}
			op.Partition, b = uint32(p), b[n:]
		}
		if op.Key, b, err = ReadComponent(b); err != nil {
			return c, fmt.Errorf("%w: op %d key: %v", ErrBadCommand, i, err)
		}
		if len(op.Key) == 0 {
			return c, fmt.Errorf("%w: op %d has an empty key", ErrBadCommand, i)
		}
		switch typ {
		case opPut:
			if op.Value, b, err = ReadComponent(b); err != nil {
				return c, fmt.Errorf("%w: op %d value: %v", ErrBadCommand, i, err)
			}
		case opDelete:
			op.Delete = true
		default:
			return c, fmt.Errorf("%w: op %d has type %d", ErrBadCommand, i, typ)
		}
		c.Ops = append(c.Ops, op)
	}
	if len(b) != 0 {
		return c, fmt.Errorf("%w: %d trailing bytes", ErrBadCommand, len(b))
	}
	return c, nil
}
