// Package ident holds the identifier syntax of the contract (API.md): registry names, server
// ids, org ids, device ids, nonces and request ids are 1 to N characters of A-Z a-z 0-9 _ -;
// and how an error message repeats client input (Quote, Clip).
//
// The checks run on every request, so they are a table lookup per byte rather than a regular
// expression (which cost over 1% of the CPU of the nonce path).
package ident

// Maximum lengths of the two identifier families.
const (
	MaxName = 64  // registry names, server ids, org ids: ^[A-Za-z0-9_-]{1,64}$
	MaxLong = 128 // device ids, nonces, request ids: ^[A-Za-z0-9_-]{1,128}$
)

// Patterns spelled as in the contract, for error messages.
const (
	NamePattern = `^[A-Za-z0-9_-]{1,64}$`
	LongPattern = `^[A-Za-z0-9_-]{1,128}$`
)

var allowed = func() (t [256]bool) {
	for c := 'A'; c <= 'Z'; c++ {
		t[c], t[c+'a'-'A'] = true, true
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	t['_'], t['-'] = true, true
	return t
}()

// Valid reports whether s is 1 to maxLen bytes of A-Z a-z 0-9 _ -.
func Valid(s string, maxLen int) bool {
	if len(s) == 0 || len(s) > maxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !allowed[s[i]] {
			return false
		}
	}
	return true
}

// Name reports whether s is a valid registry name, server id or org id.
func Name(s string) bool { return Valid(s, MaxName) }

// Long reports whether s is a valid device id, nonce or request id.
func Long(s string) bool { return Valid(s, MaxLong) }
