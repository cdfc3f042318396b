package httpconn

import (
	"errors"
	"io"
	"syscall"
)

var errUnsolicited = errors.New("httpconn: unsolicited bytes on an idle connection")

// alive reports whether c, idle in the pool, can still be used: the server has neither
// closed it nor sent anything on it (such as a 408). It peeks without blocking, which is
// what net/http's Transport learns from its read goroutine.
func (c *conn) alive() bool {
	if c.rc == nil {
		return true
	}
	return c.rc.Read(c.peekFn) == nil && c.peeked == nil
}

// peek is peekFn: one non-blocking MSG_PEEK read on the socket fd, result in c.peeked.
func (c *conn) peek(fd uintptr) bool {
	var b [1]byte
	n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	switch {
	case err == syscall.EAGAIN:
		c.peeked = nil // nothing to read: still open
	case err != nil:
		c.peeked = err
	case n == 0:
		c.peeked = io.EOF
	default:
		c.peeked = errUnsolicited
	}
	return true
}
