package config

import (
	"slices"
	"sort"
	"strings"
)

// UnknownVar is a SHARDKEEPER_* environment variable that sets no option.
type UnknownVar struct {
	Name string // as set, e.g. SHARDKEEPER_DATADIR
	// Closest is the variable of the option whose name is closest to Name, e.g.
	// SHARDKEEPER_DATA_DIR; "" when none is close enough to be a likely misspelling.
	Closest string
}

// notOptions are SHARDKEEPER_* variables that the repository's scripts and tests read for
// themselves: set in a shell that also starts a node, they are not mistakes of its settings.
var notOptions = []string{
	"SHARDKEEPER_BIN",                // deploy/*/make-secrets.sh: the binary to run
	"SHARDKEEPER_IMAGE",              // deploy/*/make-secrets.sh: the image to run it from
	"SHARDKEEPER_NEAR_CROSSCHECK",    // make near-crosscheck
	"SHARDKEEPER_ARWEAVE_CROSSCHECK", // make arweave-crosscheck
	"SHARDKEEPER_URL",                // examples/: the node the relay examples call
	"SHARDKEEPER_TEST_STACK",         // clients/typescript tests: a running test stack
	"SHARDKEEPER_UPDATE_VECTORS",     // go test ./tlog: rewrite the TypeScript client's vectors
	"SHARDKEEPER_OPENAPI",            // clients/typescript tests: another openapi.yaml
}

// UnknownEnv returns the SHARDKEEPER_* variables of environ ("NAME=value" entries, as
// os.Environ gives them) that set none of the core options nor those of groups, sorted by
// name, each with the closest option's variable when one is close. Load ignores such a
// variable; the caller warns about it. Values are never looked at: a variable may hold a
// secret.
func UnknownEnv(environ []string, groups ...Group) []UnknownVar {
	s, err := newSettings(groups)
	if err != nil {
		return nil // a declaration error, which Load reports
	}
	known := map[string]bool{}
	var names []string // option names, in the variables' spelling: DATA_DIR
	for _, o := range s.all() {
		env := envName(o.Name)
		known[env] = true
		names = append(names, strings.TrimPrefix(env, envPrefix))
	}
	var out []UnknownVar
	seen := map[string]bool{}
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, envPrefix) || known[name] || seen[name] || slices.Contains(notOptions, name) {
			continue
		}
		seen[name] = true
		u := UnknownVar{Name: name}
		if c := closest(strings.TrimPrefix(name, envPrefix), names); c != "" {
			u.Closest = envPrefix + c
		}
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// closest returns the name of names that s most likely misspells, or "". Case is ignored, and
// so are the separators '_' and '-' when the letters are the same (DATADIR, data-dir); a name
// made of the same words in another order (TOKEN_ADMIN) counts as a match too. Otherwise the
// nearest name by edit distance, when the distance is at most a third of its length (and at
// least 1 edit is allowed), so that a short unrelated name suggests nothing.
func closest(s string, names []string) string {
	s = strings.ToUpper(strings.ReplaceAll(s, "-", "_"))
	squash := func(x string) string { return strings.ReplaceAll(x, "_", "") }
	words := func(x string) string {
		w := strings.FieldsFunc(x, func(r rune) bool { return r == '_' })
		sort.Strings(w)
		return strings.Join(w, "_")
	}
	for _, n := range names {
		if squash(n) == squash(s) || words(n) == words(s) {
			return n
		}
	}
	best, bestD := "", -1
	for _, n := range names {
		d := editDistance(s, n)
		if d <= max(1, len(n)/3) && (bestD < 0 || d < bestD) {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (bytes: variable names are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
