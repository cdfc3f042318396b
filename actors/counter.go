package actors

import (
	"encoding/binary"
	"fmt"
)

// Counter is a count kept in one key of an actor's storage as a big-endian u64, so that
// counting what an actor holds is O(1). The key is absent at zero: an actor whose count fell
// back to zero holds no key for it. The encoding is stored data: it must never change.
type Counter struct {
	Key []byte
}

// Get reads the count (0 when the key is absent).
func (c Counter) Get(ctx *Context) (int, error) {
	v, found, err := ctx.Get(c.Key)
	if err != nil || !found {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("%s %s: %s of %d bytes", ctx.Kind(), ctx.ID(), c.Key, len(v))
	}
	return int(binary.BigEndian.Uint64(v)), nil
}

// Set writes the count, deleting the key at zero (or below, which no caller means).
func (c Counter) Set(ctx *Context, n int) {
	if n <= 0 {
		ctx.Delete(c.Key)
		return
	}
	ctx.Put(c.Key, binary.BigEndian.AppendUint64(nil, uint64(n)))
}
