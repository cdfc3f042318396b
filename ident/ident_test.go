package ident

import (
	"regexp"
	"strings"
	"testing"
)

// Valid must agree with the contract's regular expressions on every byte and length edge.
func TestValidMatchesContractPatterns(t *testing.T) {
	name, long := regexp.MustCompile(NamePattern), regexp.MustCompile(LongPattern)
	var inputs []string
	for c := 0; c < 256; c++ {
		inputs = append(inputs, string([]byte{byte(c)}), "a"+string([]byte{byte(c)})+"b")
	}
	for _, n := range []int{0, 1, 63, 64, 65, 127, 128, 129} {
		inputs = append(inputs, strings.Repeat("x", n), strings.Repeat("-", n))
	}
	inputs = append(inputs, "org_1-A", "é", "a\nb", "a b", "ab\x00")
	for _, s := range inputs {
		if got, want := Name(s), name.MatchString(s); got != want {
			t.Errorf("Name(%q) = %v, want %v", s, got, want)
		}
		if got, want := Long(s), long.MatchString(s); got != want {
			t.Errorf("Long(%q) = %v, want %v", s, got, want)
		}
	}
}
