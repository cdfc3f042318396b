package relayer

import (
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// access holds what decides who may submit what: every account's policy and own token, as the
// keys file says now. The file (and the token files it names) is read again when one of them
// changes, looked at no more than once per reloadEvery and only when a request asks, so that a
// tightened policy or a rotated token holds at once on every node without a restart. The keys
// themselves stay those loaded at start: a key actor signs with what it was built with, so a
// change of keys needs a restart, which the log says.
//
// A keys file that no longer loads (bad JSON, a mode that lets others read it) leaves the
// policies in force as they were, and is logged; nothing of its content is. But a token file
// that changed is never read past: the account whose token file changed and does not load
// takes no token at all until it loads (its paths answer 403), since its owner meant to
// replace the token in force — a revocation fails closed.
type access struct {
	path  string
	start *Keys // the keys loaded at start, whose accounts and keys never change

	mu      sync.Mutex
	current *Keys             // the rules in force
	stamps  map[string]string // file → stamp, of the files current was read from
	next    time.Time         // when the files may be looked at again
	now     func() time.Time
}

const reloadEvery = time.Second

func newAccess(path string, keys *Keys) *access {
	a := &access{path: path, start: keys, current: keys, now: time.Now}
	if path != "" && keys != nil {
		a.stamps = a.stampsOf(keys)
		a.next = a.now().Add(reloadEvery)
		warnUnrestricted(slog.Default(), path, keys)
	}
	return a
}

// warnUnrestricted logs, once at start, a warning for each account of the keys file whose
// policy restricts nothing (none, or one without receivers, actions, methods, max_deposit or
// deposit_budget): a holder of its token may have it sign any action the relayer supports,
// for any receiver and deposit. The warning names the account, never a key or a token.
func warnUnrestricted(logger *slog.Logger, path string, keys *Keys) {
	for _, account := range keys.Accounts() {
		if p := keys.Policy(account); p == nil || p.unrestricted() {
			logger.Warn("a relayer account has no policy: its token can have it sign any supported action for any receiver and deposit (see docs/relayer-policies.md)",
				"account", account, "path", path)
		}
	}
}

// rules returns the rules in force, reading the files again first if they changed.
func (a *access) rules() *Keys {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.path == "" || a.start == nil || a.now().Before(a.next) {
		return a.current
	}
	a.next = a.now().Add(reloadEvery)
	// Stamped before reading: a change made while the files are read is seen next time.
	stamps := a.stampsOf(a.current)
	if maps.Equal(stamps, a.stamps) {
		return a.current
	}
	changed := a.stamps
	a.stamps = stamps
	k, err := LoadKeys(a.path)
	if err != nil {
		slog.Error("relayer keys file or a token file changed and does not load: the policies in force stay", "err", err)
		a.current = a.revokeChanged(changed, stamps)
		return a.current
	}
	if !sameKeys(a.start, k) {
		slog.Warn("relayer keys file changed its keys: policies and tokens are reloaded, keys apply at the next restart", "path", a.path)
	}
	// Accounts stay those loaded at start: an account added to the file has no key actors yet.
	rules := &Keys{accounts: a.start.accounts, policies: map[string]*Policy{}, tokens: map[string]string{}}
	for account := range a.start.accounts {
		if p := k.policies[account]; p != nil {
			rules.policies[account] = p
			if t, ok := k.tokens[account]; ok {
				rules.tokens[account] = t
			}
			continue
		}
		// An account removed from the file keeps its policy until the restart removes it.
		rules.policies[account] = a.current.policies[account]
		if t, ok := a.current.tokens[account]; ok {
			rules.tokens[account] = t
		}
	}
	a.current = rules
	slog.Info("relayer policies and tokens reloaded", "path", a.path, "accounts", len(rules.policies))
	return rules
}

// revokeChanged returns the rules in force but without the tokens whose files changed from
// before to now: an account whose token file changed and does not load takes no token.
func (a *access) revokeChanged(before, now map[string]string) *Keys {
	rules := &Keys{accounts: a.current.accounts, policies: a.current.policies, tokens: map[string]string{}}
	for account, t := range a.current.tokens {
		if f := a.tokenPath(account, a.current); before[f] == now[f] {
			rules.tokens[account] = t
		} else {
			slog.Error("a relayer account's token file changed and does not load: the account takes no token until it does", "account", account)
		}
	}
	return rules
}

// tokenPath is the path of account's token file in k ("" for none).
func (a *access) tokenPath(account string, k *Keys) string {
	f := k.Policy(account).TokenFile
	if f != "" && !filepath.IsAbs(f) {
		f = filepath.Join(filepath.Dir(a.path), f)
	}
	return f
}

// stampsOf identifies the contents of the keys file and of the token files k names, by their
// size, modification time and mode (a missing file stamps as such).
func (a *access) stampsOf(k *Keys) map[string]string {
	files := []string{a.path}
	for _, account := range k.Accounts() {
		if f := a.tokenPath(account, k); f != "" {
			files = append(files, f)
		}
	}
	out := make(map[string]string, len(files))
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			out[f] = "missing"
			continue
		}
		out[f] = fmt.Sprintf("%d:%d:%v", st.Size(), st.ModTime().UnixNano(), st.Mode())
	}
	return out
}

// unrestricted reports whether p sets no rule on what an account signs, as check reads it: a
// list that is absent allows anything, an empty one nothing (a token file of its own is not a
// rule on what).
func (p *Policy) unrestricted() bool {
	return p.Receivers == nil && p.Actions == nil && p.Methods == nil && p.MaxDeposit == nil && p.Budget == nil
}

// sameKeys reports whether x and y hold the same accounts with the same keys.
func sameKeys(x, y *Keys) bool {
	if len(x.accounts) != len(y.accounts) {
		return false
	}
	for account, xs := range x.accounts {
		ys := y.accounts[account]
		if len(xs) != len(ys) {
			return false
		}
		for i := range xs {
			if xs[i].PublicKey() != ys[i].PublicKey() {
				return false
			}
		}
	}
	return true
}
