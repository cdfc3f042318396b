package chaos

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardkeeper/shardkeeper/test/proc"
)

var (
	flagSeeds = flag.Int("chaos.seeds", 1, "runs of each fault, with seeds chaos.seed, chaos.seed+1, …")
	flagSeed  = flag.Int64("chaos.seed", 1, "first seed (it picks victims, durations and the clients' choices)")
	flagOut   = flag.String("chaos.out", "", "directory for node logs and history visualizations "+
		"(default: a new temporary directory, removed when every test passed)")
)

// outRoot is the directory holding one subdirectory per subtest (node logs, visualizations).
var outRoot string

func TestMain(m *testing.M) {
	flag.Parse()
	code := run(m)
	os.Exit(code)
}

func run(m *testing.M) int {
	keep := *flagOut != ""
	if keep {
		outRoot = *flagOut
		if err := os.MkdirAll(outRoot, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", err)
			return 2
		}
	} else {
		var err error
		if outRoot, err = os.MkdirTemp("", "shardkeeper-chaos-"); err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", err)
			return 2
		}
	}
	// Every node runs with mutual TLS on its peer ports, certificates of one CA made here.
	tlsDir = filepath.Join(outRoot, "tls")
	setupNetwork()
	code := m.Run()
	teardownNetwork()
	proc.Cleanup()
	switch {
	case code == 0 && !keep:
		os.RemoveAll(outRoot)
	case code != 0:
		fmt.Fprintf(os.Stderr, "chaos: node logs and history visualizations are in %s\n", outRoot)
	}
	return code
}

// outDir is the output directory of test t (created).
func outDir(t *testing.T) string {
	t.Helper()
	name := strings.NewReplacer("/", "__", " ", "_", ":", "_").Replace(t.Name())
	dir := filepath.Join(outRoot, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
