package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Command is one Raft log entry's worth of state changes for a partition: the writes of every
// message the leader coalesced into it, and the leader's clock when it proposed them.
//
// Keys are relative state keys (see StateKey); the FSM confines them to its partition, so a
// command cannot touch the Raft or metadata sections whatever bytes it holds.
type Command struct {
	// Time is the proposing leader's wall clock in Unix milliseconds. Every expiry decision
	// the command embodies was made against this clock, never the applying node's.
	Time int64
	Ops  []Op
}

// Op is one write: a put of Value at Key, or a delete of Key.
type Op struct {
	Delete bool
	Key    []byte
	Value  []byte
}

const (
	commandVersion = 1
	opPut          = 1
	opDelete       = 2
)

// ErrBadCommand reports a log entry that does not decode as a Command.
var ErrBadCommand = errors.New("malformed command")

// Encode appends the command's binary form to dst:
// version byte, time (varint), op count (uvarint), then per op a type byte, the key and (for
// puts) the value as length-prefixed strings.
func (c *Command) Encode(dst []byte) []byte {
	size := 1 + 2*binary.MaxVarintLen64
	for _, op := range c.Ops {
		size += 1 + 2*binary.MaxVarintLen32 + len(op.Key) + len(op.Value)
	}
	dst = slices.Grow(dst, size) // one allocation, not one per growth
	dst = append(dst, commandVersion)
	dst = binary.AppendVarint(dst, c.Time)
	dst = binary.AppendUvarint(dst, uint64(len(c.Ops)))
	for _, op := range c.Ops {
		if op.Delete {
			dst = append(dst, opDelete)
			dst = AppendComponent(dst, op.Key)
			continue
		}
		dst = append(dst, opPut)
		dst = AppendComponent(dst, op.Key)
		dst = AppendComponent(dst, op.Value)
	}
	return dst
}

// DecodeCommand parses b. It never panics; malformed input is an error wrapping
// ErrBadCommand. (Padded varints are accepted, so decoding is not injective: re-encoding a
// decoded command gives the canonical form, which decodes to the same command.) The returned
// slices alias b.
func DecodeCommand(b []byte) (Command, error) {
	var c Command
	if len(b) == 0 || b[0] != commandVersion {
		return c, fmt.Errorf("%w: unknown version", ErrBadCommand)
	}
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
		var op Op
		var err error
		if op.Key, b, err = ReadComponent(b[1:]); err != nil {
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
