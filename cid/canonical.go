package cid

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
)

// Canonical returns the RFC 8785 (JCS) form of a JSON document: no white space, object
// members sorted by the UTF-16 code units of their names, strings with JSON's minimal
// escapes, numbers as ECMAScript prints doubles. Duplicate member names are refused.
func Canonical(doc []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var buf bytes.Buffer
	if err := canonicalValue(dec, &buf); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the value", ErrNotJSON)
	}
	return buf.Bytes(), nil
}

func canonicalValue(dec *json.Decoder, buf *bytes.Buffer) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotJSON, err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			type member struct {
				key string
				val []byte
			}
			var ms []member
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return fmt.Errorf("%w: %v", ErrNotJSON, err)
				}
				var v bytes.Buffer
				if err := canonicalValue(dec, &v); err != nil {
					return err
				}
				ms = append(ms, member{k.(string), v.Bytes()})
			}
			if _, err := dec.Token(); err != nil { // '}'
				return fmt.Errorf("%w: %v", ErrNotJSON, err)
			}
			slices.SortFunc(ms, func(a, b member) int { return compareUTF16(a.key, b.key) })
			buf.WriteByte('{')
			for i, m := range ms {
				if i > 0 {
					if ms[i-1].key == m.key {
						return fmt.Errorf("%w: member %q appears twice", ErrNotJSON, m.key)
					}
					buf.WriteByte(',')
				}
				writeString(buf, m.key)
				buf.WriteByte(':')
				buf.Write(m.val)
			}
			buf.WriteByte('}')
		case '[':
			buf.WriteByte('[')
			for i := 0; dec.More(); i++ {
				if i > 0 {
					buf.WriteByte(',')
				}
				if err := canonicalValue(dec, buf); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil { // ']'
				return fmt.Errorf("%w: %v", ErrNotJSON, err)
			}
			buf.WriteByte(']')
		}
	case string:
		writeString(buf, t)
	case json.Number:
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil || math.IsInf(f, 0) {
			return fmt.Errorf("%w: number %s is out of range", ErrNotJSON, t)
		}
		buf.WriteString(esNumber(f))
	case bool:
		buf.WriteString(strconv.FormatBool(t))
	case nil:
		buf.WriteString("null")
	}
	return nil
}

// compareUTF16 orders strings by their UTF-16 code units, as JCS sorts member names.
func compareUTF16(a, b string) int {
	ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	return slices.Compare(ua, ub)
}

// writeString writes s as a JSON string with the escapes JCS prescribes: \" \\ \b \f \n \r \t,
// other controls as \u00xx (lower-case hex), everything else as UTF-8.
func writeString(buf *bytes.Buffer, s string) {
	buf.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			buf.WriteString(`\"`)
		case r == '\\':
			buf.WriteString(`\\`)
		case r == '\b':
			buf.WriteString(`\b`)
		case r == '\f':
			buf.WriteString(`\f`)
		case r == '\n':
			buf.WriteString(`\n`)
		case r == '\r':
			buf.WriteString(`\r`)
		case r == '\t':
			buf.WriteString(`\t`)
		case r < 0x20:
			fmt.Fprintf(buf, `\u%04x`, r)
		default:
			buf.WriteRune(r)
		}
	}
	buf.WriteByte('"')
}

// esNumber formats f as ECMAScript's Number.prototype.toString does (what JCS requires): the
// shortest digits that read back as f, in plain notation for exponents from -7 to 20, else
// d.ddde±x.
func esNumber(f float64) string {
	if f == 0 {
		return "0" // also -0
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±xx, shortest
	mant, expStr, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(expStr)
	neg := strings.HasPrefix(mant, "-")
	mant = strings.TrimPrefix(mant, "-")
	digits := strings.Replace(mant, ".", "", 1)
	n := exp + 1 // position of the decimal point after the first digit
	var out string
	switch {
	case n >= len(digits) && n <= 21:
		out = digits + strings.Repeat("0", n-len(digits))
	case n > 0 && n <= 21:
		out = digits[:n] + "." + digits[n:]
	case n <= 0 && n > -6:
		out = "0." + strings.Repeat("0", -n) + digits
	default:
		e := n - 1
		sign := "+"
		if e < 0 {
			sign = "-"
			e = -e
		}
		out = digits[:1]
		if len(digits) > 1 {
			out += "." + digits[1:]
		}
		out += "e" + sign + strconv.Itoa(e)
	}
	if neg {
		out = "-" + out
	}
	return out
}
