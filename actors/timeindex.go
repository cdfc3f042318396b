package actors

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// TimeIndex is an index of names by time in an actor's storage: one key per entry,
//
//	<Prefix> <u64 time, big-endian> <name>
//
// so that a listing of the prefix is in time order (then name order). Times are Unix
// milliseconds; a negative time is stored as 0. The value of an entry is the caller's (often
// empty). The layout is stored data: it must never change.
type TimeIndex struct {
	Prefix []byte
}

// Key is the key of name at t. Key(t, "") sorts before every entry at t, so it bounds ranges.
func (x TimeIndex) Key(t int64, name string) []byte {
	k := make([]byte, 0, len(x.Prefix)+8+len(name))
	k = append(k, x.Prefix...)
	k = binary.BigEndian.AppendUint64(k, uint64(max(t, 0)))
	return append(k, name...)
}

// Parse splits a key of the index into its time and name.
func (x TimeIndex) Parse(k []byte) (int64, string, error) {
	rest, ok := bytes.CutPrefix(k, x.Prefix)
	if !ok || len(rest) < 8 {
		return 0, "", fmt.Errorf("malformed index key %q", k)
	}
	return int64(binary.BigEndian.Uint64(rest)), string(rest[8:]), nil
}

// Put writes the entry of name at t.
func (x TimeIndex) Put(ctx *Context, t int64, name string, value []byte) {
	ctx.Put(x.Key(t, name), value)
}

// Delete removes the entry of name at t.
func (x TimeIndex) Delete(ctx *Context, t int64, name string) { ctx.Delete(x.Key(t, name)) }

// Before lists up to limit (≤ 0: all) entries with a time before t, earliest first, starting
// at the key from (nil: the start of the index).
func (x TimeIndex) Before(ctx *Context, t int64, from []byte, limit int) ([]KV, error) {
	return ctx.List(ListOptions{Prefix: x.Prefix, Start: from, End: x.Key(t, ""), Limit: limit})
}

// From lists up to limit (≤ 0: all) entries with a time at or after t, earliest first.
func (x TimeIndex) From(ctx *Context, t int64, limit int) ([]KV, error) {
	return ctx.List(ListOptions{Prefix: x.Prefix, Start: x.Key(t, ""), Limit: limit})
}

// First returns the time and name of the earliest entry at or after the key from (nil: the
// start of the index); ok is false when there is none.
func (x TimeIndex) First(ctx *Context, from []byte) (t int64, name string, ok bool, err error) {
	kvs, err := ctx.List(ListOptions{Prefix: x.Prefix, Start: from, Limit: 1})
	if err != nil || len(kvs) == 0 {
		return 0, "", false, err
	}
	t, name, err = x.Parse(kvs[0].Key)
	return t, name, err == nil, err
}
