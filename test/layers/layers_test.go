// Package layers checks that the packages stand in the layers docs/architecture.md draws: the
// table there is the rule, and this test holds the code to it.
package layers

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/shardkeeper/shardkeeper"

// layer is one row of the table: its number, its name, whether its packages stand apart (may
// not import one another), and its package patterns ("x" or "x/...").
type layer struct {
	n        int
	name     string
	apart    bool
	patterns []string
}

var row = regexp.MustCompile(`^\| (\d+) ([^|]+?) \| ([^|]+) \|`)

// readLayers reads the layer table of docs/architecture.md.
func readLayers(t *testing.T, root string) []layer {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []layer
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		m := row.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		l := layer{n: n, name: m[2], apart: strings.HasSuffix(m[2], ", apart")}
		for _, p := range strings.Split(m[3], ",") {
			l.patterns = append(l.patterns, strings.Trim(strings.TrimSpace(p), "`"))
		}
		out = append(out, l)
	}
	if len(out) == 0 {
		t.Fatal("docs/architecture.md has no layer table")
	}
	return out
}

// place returns the layer of package p (relative to the module): the one whose pattern names
// it most closely (an exact name before the longest "x/..." prefix).
func place(layers []layer, p string) (layer, bool) {
	best, bestLen, found := layer{}, -1, false
	for _, l := range layers {
		for _, pat := range l.patterns {
			switch prefix, tree := strings.CutSuffix(pat, "/..."); {
			case pat == p:
				return l, true
			case tree && (p == prefix || strings.HasPrefix(p, prefix+"/")) && len(prefix) > bestLen:
				best, bestLen, found = l, len(prefix), true
			}
		}
	}
	return best, found
}

func TestImportsPointDown(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	layers := readLayers(t, root)
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	var problems []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(strings.TrimPrefix(fields[0], module), "/")
		if pkg == "" {
			continue
		}
		from, ok := place(layers, pkg)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s is in no layer of docs/architecture.md", pkg))
			continue
		}
		for _, imp := range fields[1:] {
			dep, ok := strings.CutPrefix(imp, module+"/")
			if !ok {
				continue
			}
			to, ok := place(layers, dep)
			switch {
			case !ok:
				continue // reported as a package of its own
			case to.n > from.n:
				problems = append(problems, fmt.Sprintf("%s (layer %d, %s) imports %s, which stands above it (layer %d, %s)", pkg, from.n, from.name, dep, to.n, to.name))
			case to.n == from.n && from.apart && !sameHome(pkg, dep):
				problems = append(problems, fmt.Sprintf("%s imports %s: the packages of layer %d (%s) stand apart", pkg, dep, from.n, from.name))
			}
		}
	}
	slices.Sort(problems)
	for _, p := range problems {
		t.Error(p)
	}
}

// sameHome reports whether two packages of a layer that stands apart are one home (a package
// and the packages below its folder).
func sameHome(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/")
}

// The check itself fails on an upward import, a sideways one between homes that stand apart,
// and a package in no layer.
func TestPlace(t *testing.T) {
	layers := []layer{
		{n: 1, name: "low", patterns: []string{"low", "x/..."}},
		{n: 2, name: "mid, apart", apart: true, patterns: []string{"mid/a", "mid/b"}},
		{n: 3, name: "high", patterns: []string{"x/top", "mid"}},
	}
	for p, want := range map[string]int{"low": 1, "x": 1, "x/y/z": 1, "x/top": 3, "mid/a": 2, "mid": 3} {
		if l, ok := place(layers, p); !ok || l.n != want {
			t.Errorf("place(%s) = %d, %v; want %d", p, l.n, ok, want)
		}
	}
	if _, ok := place(layers, "nowhere"); ok {
		t.Error("an unlisted package was placed")
	}
	if _, ok := place(layers, "lower"); ok {
		t.Error(`"lower" was placed by the pattern "low"`)
	}
	if sameHome("mid/a", "mid/b") || !sameHome("mid/a", "mid/a/internal") {
		t.Error("sameHome")
	}
}
