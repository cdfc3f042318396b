package ident_test

import (
	"strings"
	"testing"

	"github.com/shardkeeper/shardkeeper/ident"
)

func TestQuote(t *testing.T) {
	if got := ident.Quote("a\"b"); got != `"a\"b"` {
		t.Fatalf("Quote = %s", got)
	}
	long := strings.Repeat("x", 70000)
	got := ident.Quote(long)
	if want := `"` + strings.Repeat("x", 64) + `"… (70000 bytes)`; got != want {
		t.Fatalf("Quote of 70000 bytes = %s", got)
	}
	if got := ident.Clip(long); len(got) > 260 || !strings.HasSuffix(got, "…") {
		t.Fatalf("Clip: %d bytes", len(got))
	}
	if got := ident.Clip("short"); got != "short" {
		t.Fatalf("Clip = %q", got)
	}
}
