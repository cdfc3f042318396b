package fakenear

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCrossCheckNearAPIJS runs crosscheck/crosscheck.mjs — near-api-js 7.3.1, unmodified —
// against a fake started here, so that the fake's answers are read by a client that is not
// this repository's. It needs Node and npm (npm ci installs the pinned near-api-js into
// crosscheck/node_modules the first time) and runs only with SHARDKEEPER_NEAR_CROSSCHECK=1.
func TestCrossCheckNearAPIJS(t *testing.T) {
	if os.Getenv("SHARDKEEPER_NEAR_CROSSCHECK") != "1" {
		t.Skip("set SHARDKEEPER_NEAR_CROSSCHECK=1 to run the near-api-js cross-check (needs node and npm)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	dir, err := filepath.Abs("crosscheck")
	must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "near-api-js", "package.json")); err != nil {
		npm, err := exec.LookPath("npm")
		if err != nil {
			t.Skip("npm is not installed")
		}
		cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci: %v\n%s", err, out)
		}
	}

	f := Start(t, Config{BlockInterval: 50 * time.Millisecond})
	cmd := exec.CommandContext(ctx, node, "crosscheck.mjs", f.Endpoints()[0].URL())
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	t.Logf("crosscheck.mjs output:\n%s", out)
	if err != nil {
		t.Fatalf("crosscheck.mjs: %v", err)
	}
	if key := KeyFromLabel("crosscheck").PublicKey().String(); !strings.Contains(string(out), key) {
		t.Fatalf("the script's key is not KeyFromLabel(\"crosscheck\") = %s", key)
	}
	var landed int
	for _, e := range f.Ledger() {
		if e.Kind == Landed && e.Signer == "crosscheck.test" {
			landed++
		}
	}
	if landed != 1 {
		t.Fatalf("%d transactions of the script landed, want 1 (the re-send is the same transaction): %+v", landed, f.Ledger())
	}
}
