package cluster

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The keyring after each operation, and the operations refused.
func TestNextKeys(t *testing.T) {
	a, b, c := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32), bytes.Repeat([]byte{3}, 32)
	name := map[byte]string{1: "a", 2: "b", 3: "c"}
	show := func(keys [][]byte) string {
		var s []string
		for _, k := range keys {
			s = append(s, name[k[0]])
		}
		return strings.Join(s, ",")
	}
	for _, tc := range []struct {
		op   string
		keys [][]byte
		key  []byte
		want string // the keyring, or the refusal
	}{
		{KeyInstall, [][]byte{a}, b, "a,b"},
		{KeyInstall, [][]byte{a, b}, b, "a,b"},
		{KeyUse, [][]byte{a, b}, b, "b,a"},
		{KeyUse, [][]byte{a, b, c}, c, "c,a,b"},
		{KeyUse, [][]byte{a}, b, "not installed"},
		{KeyRemove, [][]byte{b, a}, a, "b"},
		{KeyRemove, [][]byte{b}, a, "b"},
		{KeyRemove, [][]byte{b, a}, b, "in use"},
		{KeyInstall, [][]byte{a}, []byte("short"), "16, 24 or 32 bytes"},
		{"rotate", [][]byte{a}, b, "unknown key operation"},
	} {
		got, err := nextKeys(tc.op, tc.keys, tc.key)
		out := show(got)
		if err != nil {
			out = err.Error()
		}
		if !strings.Contains(out, tc.want) || (err == nil && out != tc.want) {
			t.Errorf("%s %s on %s: %s, want %s", tc.op, name[tc.key[0]], show(tc.keys), out, tc.want)
		}
	}
}

// The keyring file is owner-only, read back as written, and refused when others can read it.
func TestKeyringFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "gossip-keyring.json")
	a, b := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	if err := saveKeyring(file, [][]byte{b, a}); err != nil {
		t.Fatal(err)
	}
	kr, ignored, err := loadKeyring(file, bytes.Repeat([]byte{9}, 32))
	if err != nil || !ignored {
		t.Fatalf("load: %v, flag key ignored %v", err, ignored)
	}
	if keys := kr.GetKeys(); len(keys) != 2 || !bytes.Equal(keys[0], b) {
		t.Fatalf("keys read back: %d, primary %v", len(keys), keys[0][0])
	}
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadKeyring(file, nil); err == nil || !strings.Contains(err.Error(), "accessible by other users") {
		t.Fatalf("a keyring readable by others: %v", err)
	}
}
