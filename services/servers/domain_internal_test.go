package servers

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/shardkeeper/shardkeeper/config"
)

// --servers-token-file is read into the settings when the configuration loads, its content
// trimmed; without it there is no token.
func TestTokenFileLoads(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("  tok-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"--servers-token-file", file}, "tok-1"},
	} {
		cfg, err := config.Load(append([]string{"--node-id", "n1"}, c.args...), nil, nil, Settings)
		if err != nil {
			t.Fatal(err)
		}
		if got := Settings.Get(cfg).token; got != c.want {
			t.Errorf("%v: token %q, want %q", c.args, got, c.want)
		}
	}
}
