// Package resp is a minimal RESP2 (Redis serialization protocol) client: enough to send
// commands as arrays of bulk strings over one connection and read their replies. It exists so
// that the benchmark can drive Redis without a client module; it is not a general client (no
// pipelining, pub/sub, RESP3 or cluster redirects).
package resp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// Kind is a reply's type byte.
type Kind byte

// The RESP2 reply types.
const (
	SimpleString Kind = '+'
	Integer      Kind = ':'
	BulkString   Kind = '$'
	Array        Kind = '*'
)

// Value is one reply. Str holds a simple or bulk string, Int an integer and Elems an array;
// Null marks a null bulk string or null array.
type Value struct {
	Kind  Kind
	Str   string
	Int   int64
	Elems []Value
	Null  bool
}

// ServerError is an error reply ("-ERR ..."): the command reached the server and failed
// there. The connection stays usable.
type ServerError struct{ Msg string }

func (e *ServerError) Error() string { return "redis: " + e.Msg }

// Conn is one connection. It is not safe for concurrent use. After an error other than a
// *ServerError the stream may be out of step: close the connection.
type Conn struct {
	nc      net.Conn
	r       *bufio.Reader
	w       *bufio.Writer
	timeout time.Duration
	scratch []byte
}

// Dial connects to addr; timeout bounds the dial and, later, each command (0: no bound).
func Dial(ctx context.Context, addr string, timeout time.Duration) (*Conn, error) {
	d := net.Dialer{Timeout: timeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("resp: dial %s: %w", addr, err)
	}
	return NewConn(nc, timeout), nil
}

// NewConn wraps an established connection.
func NewConn(nc net.Conn, timeout time.Duration) *Conn {
	return &Conn{nc: nc, r: bufio.NewReader(nc), w: bufio.NewWriter(nc), timeout: timeout}
}

// Close closes the connection.
func (c *Conn) Close() error { return c.nc.Close() }

// Do sends one command (args[0] is its name) and reads its reply. An error reply is returned
// as a *ServerError with the zero Value.
func (c *Conn) Do(args ...string) (Value, error) {
	if len(args) == 0 {
		return Value{}, errors.New("resp: empty command")
	}
	if c.timeout > 0 {
		if err := c.nc.SetDeadline(time.Now().Add(c.timeout)); err != nil {
			return Value{}, fmt.Errorf("resp: %w", err)
		}
	}
	if err := c.write(args); err != nil {
		return Value{}, fmt.Errorf("resp: send %s: %w", args[0], err)
	}
	v, err := c.read()
	if err != nil {
		var se *ServerError
		if errors.As(err, &se) {
			return Value{}, err
		}
		return Value{}, fmt.Errorf("resp: reply to %s: %w", args[0], err)
	}
	return v, nil
}

// write sends args as an array of bulk strings: *<n>\r\n then $<len>\r\n<arg>\r\n each.
func (c *Conn) write(args []string) error {
	b := c.scratch[:0]
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	c.scratch = b
	if _, err := c.w.Write(b); err != nil {
		return err
	}
	return c.w.Flush()
}

// maxBulk bounds a bulk string or array length read from the server (a protocol sanity
// check, as Redis' own proto-max-bulk-len default).
const maxBulk = 512 << 20

// read parses one reply, nested arrays included. An error reply is a *ServerError, returned
// only after the whole reply has been consumed.
func (c *Conn) read() (Value, error) {
	line, err := c.line()
	if err != nil {
		return Value{}, err
	}
	if len(line) == 0 {
		return Value{}, errors.New("empty reply line")
	}
	kind, rest := line[0], string(line[1:])
	switch kind {
	case '+':
		return Value{Kind: SimpleString, Str: rest}, nil
	case '-':
		return Value{}, &ServerError{Msg: rest}
	case ':':
		n, err := strconv.ParseInt(rest, 10, 64)
		if err != nil {
			return Value{}, fmt.Errorf("bad integer reply %q", rest)
		}
		return Value{Kind: Integer, Int: n}, nil
	case '$':
		n, err := strconv.Atoi(rest)
		if err != nil || n < -1 || n > maxBulk {
			return Value{}, fmt.Errorf("bad bulk length %q", rest)
		}
		if n == -1 {
			return Value{Kind: BulkString, Null: true}, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, buf); err != nil {
			return Value{}, err
		}
		if buf[n] != '\r' || buf[n+1] != '\n' {
			return Value{}, errors.New("bulk string not terminated by CRLF")
		}
		return Value{Kind: BulkString, Str: string(buf[:n])}, nil
	case '*':
		n, err := strconv.Atoi(rest)
		if err != nil || n < -1 || n > maxBulk {
			return Value{}, fmt.Errorf("bad array length %q", rest)
		}
		if n == -1 {
			return Value{Kind: Array, Null: true}, nil
		}
		v := Value{Kind: Array, Elems: make([]Value, 0, n)}
		var firstErr *ServerError
		for range n {
			e, err := c.read()
			var se *ServerError
			if errors.As(err, &se) {
				// An error inside an array (EXEC, script results) is an element; keep reading
				// so the stream stays in step, and report the first one.
				if firstErr == nil {
					firstErr = se
				}
				continue
			}
			if err != nil {
				return Value{}, err
			}
			v.Elems = append(v.Elems, e)
		}
		if firstErr != nil {
			return Value{}, firstErr
		}
		return v, nil
	default:
		return Value{}, fmt.Errorf("unknown reply type %q", kind)
	}
}

// line reads one CRLF-terminated line without its terminator.
func (c *Conn) line() ([]byte, error) {
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, errors.New("reply line too long")
		}
		return nil, err
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, errors.New("reply line not terminated by CRLF")
	}
	return line[:len(line)-2], nil
}
