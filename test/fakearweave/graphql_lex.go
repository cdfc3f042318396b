package fakearweave

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The lexer of GraphQL's query language: punctuators, names, numbers and strings (block
// strings refused); whitespace, commas, comments and a byte order mark are skipped.

type gqlToken struct {
	kind      byte // 'p' punctuator, 'n' name, 'i' int, 'f' float, 's' string, 0 end
	val       string
	line, col int
}

type gqlLexer struct {
	src       string
	pos       int
	line, col int
}

func (l *gqlLexer) errf(line, col int, format string, a ...any) *gqlError {
	return &gqlError{msg: "Syntax Error: " + fmt.Sprintf(format, a...), line: line, col: col}
}

// next reads the next token, skipping whitespace, commas and comments.
func (l *gqlLexer) next() (gqlToken, error) {
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch {
		case c == '\n':
			l.pos, l.line, l.col = l.pos+1, l.line+1, 1
		case c == ' ' || c == '\t' || c == '\r' || c == ',':
			l.pos, l.col = l.pos+1, l.col+1
		case c == '#':
			for l.pos < len(l.src) && l.src[l.pos] != '\n' {
				l.pos++
			}
		case strings.HasPrefix(l.src[l.pos:], "\ufeff"):
			l.pos += 3
		default:
			return l.token()
		}
	}
	return gqlToken{line: l.line, col: l.col}, nil
}

func (l *gqlLexer) token() (gqlToken, error) {
	t := gqlToken{line: l.line, col: l.col}
	start := l.pos
	c := l.src[l.pos]
	switch {
	case strings.HasPrefix(l.src[l.pos:], "..."):
		l.pos += 3
		t.kind, t.val = 'p', "..."
	case strings.IndexByte("!$&()=:@[]{}|", c) >= 0:
		l.pos++
		t.kind, t.val = 'p', string(c)
	case c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z':
		for l.pos < len(l.src) && isNameByte(l.src[l.pos]) {
			l.pos++
		}
		t.kind, t.val = 'n', l.src[start:l.pos]
	case c == '-' || c >= '0' && c <= '9':
		return l.number()
	case c == '"':
		return l.str()
	default:
		r, _ := utf8.DecodeRuneInString(l.src[l.pos:])
		return t, l.errf(t.line, t.col, "Unexpected character: %q.", r)
	}
	l.col += l.pos - start
	return t, nil
}

func isNameByte(c byte) bool {
	return c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
}

func (l *gqlLexer) number() (gqlToken, error) {
	t := gqlToken{kind: 'i', line: l.line, col: l.col}
	start := l.pos
	if l.src[l.pos] == '-' {
		l.pos++
	}
	digits := func() int {
		n := 0
		for l.pos < len(l.src) && l.src[l.pos] >= '0' && l.src[l.pos] <= '9' {
			l.pos, n = l.pos+1, n+1
		}
		return n
	}
	if digits() == 0 {
		return t, l.errf(t.line, t.col, "Invalid number, expected digit.")
	}
	if l.pos < len(l.src) && l.src[l.pos] == '.' {
		l.pos++
		t.kind = 'f'
		if digits() == 0 {
			return t, l.errf(t.line, t.col, "Invalid number, expected digit after \".\".")
		}
	}
	if l.pos < len(l.src) && (l.src[l.pos] == 'e' || l.src[l.pos] == 'E') {
		l.pos++
		t.kind = 'f'
		if l.pos < len(l.src) && (l.src[l.pos] == '+' || l.src[l.pos] == '-') {
			l.pos++
		}
		if digits() == 0 {
			return t, l.errf(t.line, t.col, "Invalid number, expected digit in the exponent.")
		}
	}
	if l.pos < len(l.src) && (isNameByte(l.src[l.pos]) || l.src[l.pos] == '.') {
		return t, l.errf(t.line, t.col, "Invalid number, unexpected %q.", l.src[l.pos])
	}
	t.val = l.src[start:l.pos]
	l.col += l.pos - start
	return t, nil
}

func (l *gqlLexer) str() (gqlToken, error) {
	t := gqlToken{kind: 's', line: l.line, col: l.col}
	if strings.HasPrefix(l.src[l.pos:], `"""`) {
		return t, l.errf(t.line, t.col, "block strings are not read by this fake node.")
	}
	start := l.pos
	l.pos++
	var b strings.Builder
	for {
		if l.pos >= len(l.src) || l.src[l.pos] == '\n' {
			return t, l.errf(t.line, t.col, "Unterminated string.")
		}
		c := l.src[l.pos]
		if c == '"' {
			l.pos++
			break
		}
		if c != '\\' {
			r, n := utf8.DecodeRuneInString(l.src[l.pos:])
			b.WriteRune(r)
			l.pos += n
			continue
		}
		if l.pos+1 >= len(l.src) {
			return t, l.errf(t.line, t.col, "Unterminated string.")
		}
		esc := l.src[l.pos+1]
		l.pos += 2
		switch esc {
		case '"', '\\', '/':
			b.WriteByte(esc)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			if l.pos+4 > len(l.src) {
				return t, l.errf(t.line, t.col, "Invalid Unicode escape sequence.")
			}
			n, err := strconv.ParseUint(l.src[l.pos:l.pos+4], 16, 32)
			if err != nil {
				return t, l.errf(t.line, t.col, "Invalid Unicode escape sequence.")
			}
			b.WriteRune(rune(n))
			l.pos += 4
		default:
			return t, l.errf(t.line, t.col, "Invalid character escape sequence: \\%c.", esc)
		}
	}
	t.val = b.String()
	l.col += utf8.RuneCountInString(l.src[start:l.pos])
	return t, nil
}
