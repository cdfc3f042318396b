//go:build !linux

package httpconn

// alive reports whether c, idle in the pool, can still be used. Without a non-blocking peek
// on this platform it assumes so; a request that then fails is retried as Transport says.
func (c *conn) alive() bool { return true }

func (c *conn) peek(uintptr) bool { return true }
