package near

import (
	"fmt"
	"math/big"
	"math/bits"
)

// U128 is an unsigned 128-bit integer: NEAR's Balance, amounts in yoctoNEAR (10^-24 NEAR).
// The zero value is 0. It is a comparable value type, so amounts can be copied and compared
// with == without aliasing. JSON carries it as a decimal string, as nearcore does: a number
// above 2^53 would lose precision in JavaScript clients.
type U128 struct {
	hi, lo uint64
}

// maxAmountLen bounds the text ParseU128 reads: 2^128-1 has 39 digits, the rest of the
// allowance is for leading zeros.
const maxAmountLen = 128

// U128From64 returns v as a U128.
func U128From64(v uint64) U128 { return U128{lo: v} }

// ParseU128 parses a decimal integer below 2^128, without sign, spaces or exponent. Leading
// zeros are accepted, as Rust's u128 parser accepts them.
func ParseU128(s string) (U128, error) {
	if s == "" {
		return U128{}, fmt.Errorf("amount is empty")
	}
	if len(s) > maxAmountLen {
		return U128{}, fmt.Errorf("amount of %d characters is too long", len(s))
	}
	var v U128
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return U128{}, fmt.Errorf("amount %q is not a decimal integer", s)
		}
		// v = v*10 + digit, refusing any carry out of the top 64 bits.
		hiMul, hiLo := bits.Mul64(v.hi, 10)
		loHi, loLo := bits.Mul64(v.lo, 10)
		hi, carry := bits.Add64(hiLo, loHi, 0)
		if hiMul != 0 || carry != 0 {
			return U128{}, fmt.Errorf("amount %q exceeds 2^128-1", s)
		}
		lo, c2 := bits.Add64(loLo, uint64(c-'0'), 0)
		hi, carry = bits.Add64(hi, 0, c2)
		if carry != 0 {
			return U128{}, fmt.Errorf("amount %q exceeds 2^128-1", s)
		}
		v = U128{hi: hi, lo: lo}
	}
	return v, nil
}

// U128FromBig converts a non-negative integer below 2^128.
func U128FromBig(b *big.Int) (U128, error) {
	if b == nil || b.Sign() < 0 || b.BitLen() > 128 {
		return U128{}, fmt.Errorf("amount %v is outside 0..2^128-1", b)
	}
	lo := new(big.Int).And(b, new(big.Int).SetUint64(^uint64(0)))
	hi := new(big.Int).Rsh(b, 64)
	return U128{hi: hi.Uint64(), lo: lo.Uint64()}, nil
}

// Big returns v as a new big.Int.
func (v U128) Big() *big.Int {
	b := new(big.Int).SetUint64(v.hi)
	b.Lsh(b, 64)
	return b.Or(b, new(big.Int).SetUint64(v.lo))
}

// IsZero reports whether v is 0.
func (v U128) IsZero() bool { return v.hi == 0 && v.lo == 0 }

// Cmp returns -1, 0 or +1 as v is less than, equal to or greater than w.
func (v U128) Cmp(w U128) int {
	switch {
	case v.hi != w.hi:
		if v.hi < w.hi {
			return -1
		}
		return 1
	case v.lo != w.lo:
		if v.lo < w.lo {
			return -1
		}
		return 1
	}
	return 0
}

// String returns the decimal form.
func (v U128) String() string {
	if v.hi == 0 {
		return fmt.Sprint(v.lo)
	}
	return v.Big().String()
}

// MarshalText implements encoding.TextMarshaler (JSON: a quoted decimal string).
func (v U128) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler. Through encoding/json it accepts only a
// JSON string: the contract gives amounts as strings, and a bare number is refused rather
// than trusted to have kept its precision on the way.
func (v *U128) UnmarshalText(b []byte) error {
	p, err := ParseU128(string(b))
	if err != nil {
		return err
	}
	*v = p
	return nil
}
