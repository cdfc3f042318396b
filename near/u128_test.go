package near

import (
	"encoding/json"
	"math/big"
	"testing"
)

func TestU128(t *testing.T) {
	max := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 128), big.NewInt(1))
	for _, s := range []string{"0", "1", "18446744073709551615", "18446744073709551616", "1000000000000000000000000", max.String()} {
		v, err := ParseU128(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if v.String() != s || v.Big().String() != s {
			t.Fatalf("%s became %s / %s", s, v, v.Big())
		}
		b, _ := new(big.Int).SetString(s, 10)
		if w, err := U128FromBig(b); err != nil || w != v {
			t.Fatalf("%s from big: %v %v", s, w, err)
		}
	}
	if v, err := ParseU128("000000000000000000000000000000000000000000000000042"); err != nil || v != U128From64(42) {
		t.Fatalf("leading zeros: %v %v", v, err)
	}
	over := new(big.Int).Add(max, big.NewInt(1))
	for _, s := range []string{"", "-1", "+1", " 1", "1 ", "1e3", "0x10", "1.0", "١", over.String(),
		"3402823669209384634633746074317682114550"} {
		if v, err := ParseU128(s); err == nil {
			t.Errorf("%q parsed as %s", s, v)
		}
	}
	if _, err := U128FromBig(over); err == nil {
		t.Error("2^128 from big")
	}
	if _, err := U128FromBig(big.NewInt(-1)); err == nil {
		t.Error("-1 from big")
	}

	a, b := U128{hi: 1}, U128{lo: ^uint64(0)}
	if a.Cmp(b) != 1 || b.Cmp(a) != -1 || a.Cmp(a) != 0 || !(U128{}).IsZero() || a.IsZero() {
		t.Fatal("Cmp/IsZero")
	}

	var v struct{ D U128 }
	if err := json.Unmarshal([]byte(`{"D":"340282366920938463463374607431768211455"}`), &v); err != nil || v.D.Big().Cmp(max) != 0 {
		t.Fatalf("%v %v", v, err)
	}
	if err := json.Unmarshal([]byte(`{"D":5}`), &v); err == nil {
		t.Fatal("a JSON number accepted")
	}
	if out, _ := json.Marshal(v); string(out) != `{"D":"340282366920938463463374607431768211455"}` {
		t.Fatalf("%s", out)
	}
}
