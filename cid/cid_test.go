package cid

import (
	"encoding/json"
	"errors"
	"os"
	"testing"
)

// Canonical forms and CIDs are those of canonicalize and multiformats, byte for byte
// (testdata/gen, make cid-vectors).
func TestAgainstJavaScript(t *testing.T) {
	b, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Cases []struct{ Input, Canonical, CID string }
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	for _, c := range v.Cases {
		canonical, id, err := OfJSON([]byte(c.Input))
		if err != nil {
			t.Fatalf("%s: %v", c.Input, err)
		}
		if string(canonical) != c.Canonical {
			t.Errorf("%s:\n got %s\nwant %s", c.Input, canonical, c.Canonical)
		}
		if id != c.CID || !Valid(id) {
			t.Errorf("%s: cid %s, want %s", c.Input, id, c.CID)
		}
	}
}

func TestRefusals(t *testing.T) {
	for _, doc := range []string{``, `{`, `{"a":1}{}`, `{"a":1,"a":2}`, `[1e999]`, `nul`} {
		if _, err := Canonical([]byte(doc)); !errors.Is(err, ErrNotJSON) {
			t.Errorf("%q: %v, want ErrNotJSON", doc, err)
		}
	}
	for _, s := range []string{"", "b", "Qm123", "bafkreicecnx2gvntm6fbcrvnc336qze6st5u7qq7457igegamd3bzkx7r", "zafkreicecnx2gvntm6fbcrvnc336qze6st5u7qq7457igegamd3bzkx7ri"} {
		if Valid(s) {
			t.Errorf("%q is valid", s)
		}
	}
}
