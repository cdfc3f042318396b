package near

import (
	"strings"
	"testing"
)

func TestValidateAccountID(t *testing.T) {
	valid := []string{
		"ok", "alice.near", "relayer.testnet", "a-b_c.d", "0x0123456789abcdef0123456789abcdef01234567",
		strings.Repeat("a", 64), "98793cd91a3f870fb126f66285808c7e094afcfc4eda8a970f6648cdf0dbd6de",
	}
	for _, s := range valid {
		if err := ValidateAccountID(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	invalid := []string{
		"", "a", strings.Repeat("a", 65), "Alice.near", "alice..near", ".alice", "alice.", "-a", "a_", "a-.b",
		"a b", "alice@near", "ﬀ.near", "a\x00b",
	}
	for _, s := range invalid {
		if err := ValidateAccountID(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}
