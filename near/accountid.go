package near

import "fmt"

// Account id limits of nearcore (near-account-id).
const (
	MinAccountIDLen = 2
	MaxAccountIDLen = 64
)

// ValidateAccountID checks s against nearcore's account id rules: 2 to 64 bytes of a-z, 0-9
// and the separators '-', '_', '.', with no separator first, last or next to another. Named
// (alice.near), implicit (64 hex digits) and eth-implicit (0x + 40 hex digits) ids all follow
// them. nearcore refuses to even decode a transaction naming an invalid id, so checking early
// turns what would be a node's parse error into a clear one.
//
// The borsh decoders of this package do not apply it: they decode what they are given.
func ValidateAccountID(s string) error {
	if len(s) < MinAccountIDLen || len(s) > MaxAccountIDLen {
		return fmt.Errorf("account id %s: length %d is not %d to %d", clip(s), len(s), MinAccountIDLen, MaxAccountIDLen)
	}
	prevSep := true // a separator may not come first
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			prevSep = false
		case c == '-' || c == '_' || c == '.':
			if prevSep {
				return fmt.Errorf("account id %s: separator %q at %d follows a separator or starts the id", clip(s), c, i)
			}
			prevSep = true
		default:
			return fmt.Errorf("account id %s: character %q at %d is not a-z, 0-9, '-', '_' or '.'", clip(s), c, i)
		}
	}
	if prevSep {
		return fmt.Errorf("account id %s ends with a separator", clip(s))
	}
	return nil
}
