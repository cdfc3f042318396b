package near

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
)

// Borsh (https://borsh.io) is NEAR's binary encoding: little-endian fixed-size integers, a u32
// length before strings and vectors, a u8 tag before enum variants and options, struct fields
// in declaration order with nothing between them. Every value has exactly one encoding, which
// is why a transaction's hash can be taken over its bytes.

// ErrBorsh is wrapped by every decoding error: the bytes are not a valid encoding of the type.
var ErrBorsh = errors.New("invalid borsh encoding")

// encoder appends borsh encodings to buf. It cannot fail: values that cannot be encoded are
// refused by the typed encoders before they write anything.
type encoder struct {
	buf []byte
}

func (e *encoder) u8(v uint8) { e.buf = append(e.buf, v) }

func (e *encoder) u32(v uint32) { e.buf = binary.LittleEndian.AppendUint32(e.buf, v) }

func (e *encoder) u64(v uint64) { e.buf = binary.LittleEndian.AppendUint64(e.buf, v) }

func (e *encoder) u128(v U128) {
	e.u64(v.lo)
	e.u64(v.hi)
}

func (e *encoder) fixed(b []byte) { e.buf = append(e.buf, b...) }

// bytes writes a Vec<u8>; the caller has checked len(b) with checkLen.
func (e *encoder) bytes(b []byte) {
	e.u32(uint32(len(b)))
	e.fixed(b)
}

// str writes a String; the caller has checked len(s) with checkLen.
func (e *encoder) str(s string) {
	e.u32(uint32(len(s)))
	e.buf = append(e.buf, s...)
}

// checkLen refuses a length that does not fit borsh's u32 length prefix.
func checkLen(what string, n int) error {
	if uint64(n) > math.MaxUint32 {
		return fmt.Errorf("%s: length %d does not fit a u32", what, n)
	}
	return nil
}

// checkStr refuses a string borsh cannot carry: Rust decodes String as UTF-8 and fails
// otherwise, so bytes that are not UTF-8 would make a transaction no node can decode.
func checkStr(what, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s is not valid UTF-8", what)
	}
	return checkLen(what, len(s))
}

// decoder reads borsh from b. The first error sticks: later reads return zero values, so a
// decoding function can read every field and check err once at the end.
type decoder struct {
	b   []byte
	off int
	err error
}

func (d *decoder) fail(format string, args ...any) {
	d.failWith(ErrBorsh, format, args...)
}

// failWith records an error wrapping sentinel, unless an earlier one stuck.
func (d *decoder) failWith(sentinel error, format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: at byte %d: %s", sentinel, d.off, fmt.Sprintf(format, args...))
	}
}

// take returns the next n bytes, or nil (and the error) when fewer remain.
func (d *decoder) take(n int, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b)-d.off {
		d.fail("%s: need %d bytes, %d left", what, n, len(d.b)-d.off)
		return nil
	}
	p := d.b[d.off : d.off+n]
	d.off += n
	return p
}

func (d *decoder) u8(what string) uint8 {
	p := d.take(1, what)
	if p == nil {
		return 0
	}
	return p[0]
}

func (d *decoder) u32(what string) uint32 {
	p := d.take(4, what)
	if p == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(p)
}

func (d *decoder) u64(what string) uint64 {
	p := d.take(8, what)
	if p == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(p)
}

func (d *decoder) u128(what string) U128 {
	lo := d.u64(what)
	hi := d.u64(what)
	return U128{hi: hi, lo: lo}
}

// fixed copies the next n bytes into dst.
func (d *decoder) fixed(dst []byte, what string) {
	if p := d.take(len(dst), what); p != nil {
		copy(dst, p)
	}
}

// bytes reads a Vec<u8> into a fresh slice (never aliasing the input).
func (d *decoder) bytes(what string) []byte {
	n := d.u32(what + " length")
	p := d.take(int(n), what)
	if p == nil {
		return nil
	}
	return append(make([]byte, 0, len(p)), p...)
}

func (d *decoder) str(what string) string {
	n := d.u32(what + " length")
	p := d.take(int(n), what)
	if p == nil {
		return ""
	}
	if !utf8.Valid(p) {
		d.fail("%s is not valid UTF-8", what)
		return ""
	}
	return string(p)
}

// count reads a vector's length. Every element takes at least minSize bytes, so a count the
// remaining bytes cannot hold is refused before anything is allocated for it.
func (d *decoder) count(what string, minSize int) int {
	n := d.u32(what + " count")
	if d.err != nil {
		return 0
	}
	if uint64(n)*uint64(minSize) > uint64(len(d.b)-d.off) {
		d.fail("%s: %d elements cannot fit in %d bytes", what, n, len(d.b)-d.off)
		return 0
	}
	return int(n)
}

// option reads an Option tag: false for None (0), true for Some (1).
func (d *decoder) option(what string) bool {
	switch tag := d.u8(what); tag {
	case 0:
		return false
	case 1:
		return true
	default:
		d.fail("%s: option tag %d is neither 0 nor 1", what, tag)
		return false
	}
}

// finish fails when bytes remain: like Rust's try_from_slice, a value must use all its input,
// or two different byte strings would decode to the same transaction.
func (d *decoder) finish(what string) error {
	if d.err == nil && d.off != len(d.b) {
		d.fail("%s: %d trailing bytes", what, len(d.b)-d.off)
	}
	return d.err
}
