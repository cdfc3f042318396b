package relayer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/shardkeeper/shardkeeper/config"
	"github.com/shardkeeper/shardkeeper/near"
)

// Keys are the relayer's access keys, by account: the --relayer-keys file.
//
// The file holds secret keys that spend money, so it is refused when other users may read or
// write it (its mode must not grant anything to group or others, as ssh does for private
// keys), and no error or log line ever contains a secret: a bad key is named by its account
// and position only.
type Keys struct {
	accounts map[string][]*near.KeyPair // account id → its keys, in file order
	policies map[string]*Policy         // account id → its policy (every account has one)
	tokens   map[string]string          // account id → its own token, for a policy's token_file
}

// keysFile is the JSON form: {"accounts":[{"account_id":"…","keys":["ed25519:<base58>",…],
// "policy":{…}}]}.
type keysFile struct {
	Accounts []struct {
		AccountID string      `json:"account_id"`
		Keys      []string    `json:"keys"`
		Policy    *policyFile `json:"policy"`
	} `json:"accounts"`
}

// LoadKeys reads and checks the keys file at path, and the token files its policies name
// (a relative path is taken from the keys file's folder). Token files are secret files too.
func LoadKeys(path string) (*Keys, error) {
	b, err := config.ReadSecretFile(path, "relayer keys file", 1<<20)
	if err != nil {
		return nil, err
	}
	k, err := ParseKeys(b)
	if err != nil {
		return nil, fmt.Errorf("relayer keys file %s: %w", path, err)
	}
	for _, a := range k.Accounts() {
		f := k.policies[a].TokenFile
		if f == "" {
			continue
		}
		if !filepath.IsAbs(f) {
			f = filepath.Join(filepath.Dir(path), f)
		}
		t, err := config.ReadToken(f)
		if err != nil {
			return nil, fmt.Errorf("relayer keys file %s: account %s: token_file: %w", path, a, err)
		}
		if config.WeakToken(t) {
			slog.Warn("a relayer account's token is weak: shorter than 32 bytes", "account", a, "min_bytes", config.MinTokenBytes)
		}
		k.tokens[a] = t
	}
	return k, nil
}

var fieldName = regexp.MustCompile(`^"[a-z_]{1,32}"$`)

// ParseKeys parses the keys file's contents. Every account id must be valid and listed once,
// with at least one key; a key may serve one account only once.
func ParseKeys(b []byte) (*Keys, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var kf keysFile
	if err := dec.Decode(&kf); err != nil {
		// The decoder's error may quote the input; say where, never what.
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return nil, fmt.Errorf("not valid JSON (at byte %d)", syn.Offset)
		}
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) {
			return nil, fmt.Errorf("field %q has the wrong type", typ.Field)
		}
		// A misspelt policy field must not pass as "no rule": name it when it reads as a field
		// name (and so cannot be a secret that landed in the wrong place).
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok && fieldName.MatchString(f) {
			return nil, fmt.Errorf("unknown field %s", f)
		}
		return nil, errors.New(`not of the form {"accounts":[{"account_id":"…","keys":["ed25519:…"],"policy":{…}}]}`)
	}
	if len(kf.Accounts) == 0 {
		return nil, errors.New("no accounts")
	}
	k := &Keys{accounts: map[string][]*near.KeyPair{}, policies: map[string]*Policy{}, tokens: map[string]string{}}
	for i, a := range kf.Accounts {
		if err := near.ValidateAccountID(a.AccountID); err != nil {
			return nil, fmt.Errorf("account %d: %w", i+1, err)
		}
		if _, dup := k.accounts[a.AccountID]; dup {
			return nil, fmt.Errorf("account %s is listed twice", a.AccountID)
		}
		if len(a.Keys) == 0 {
			return nil, fmt.Errorf("account %s has no keys", a.AccountID)
		}
		seen := map[near.PublicKey]bool{}
		for j, s := range a.Keys {
			kp, err := near.ParseKeyPair(s)
			if err != nil {
				return nil, fmt.Errorf("account %s, key %d: not an ed25519 secret key (ed25519:<base58 of 64 bytes>)", a.AccountID, j+1)
			}
			if seen[kp.PublicKey()] {
				return nil, fmt.Errorf("account %s, key %d: %s is listed twice", a.AccountID, j+1, kp.PublicKey())
			}
			seen[kp.PublicKey()] = true
			k.accounts[a.AccountID] = append(k.accounts[a.AccountID], kp)
		}
		p, err := a.Policy.parse()
		if err != nil {
			return nil, fmt.Errorf("account %s, policy: %w", a.AccountID, err)
		}
		k.policies[a.AccountID] = p
	}
	return k, nil
}

// Policy returns an account's policy (nil for an account in no keys file).
func (k *Keys) Policy(account string) *Policy {
	if k == nil {
		return nil
	}
	return k.policies[account]
}

// token returns the token that authorizes account's paths: its own when its policy names a
// token file (own is then true), otherwise the relayer token.
func (k *Keys) token(account, relayerToken string) (token string, own bool) {
	if p := k.Policy(account); p != nil && p.TokenFile != "" {
		return k.tokens[account], true
	}
	return relayerToken, false
}

// Accounts lists the account ids, sorted. A nil *Keys (no keys file) has none.
func (k *Keys) Accounts() []string {
	if k == nil {
		return nil
	}
	out := make([]string, 0, len(k.accounts))
	for a := range k.accounts {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// PublicKeys lists an account's public keys in file order (none for an unknown account).
func (k *Keys) PublicKeys(account string) []near.PublicKey {
	if k == nil {
		return nil
	}
	var out []near.PublicKey
	for _, kp := range k.accounts[account] {
		out = append(out, kp.PublicKey())
	}
	return out
}

// Signer returns the key pair of (account, public key), if configured.
func (k *Keys) Signer(account string, pk near.PublicKey) (*near.KeyPair, bool) {
	if k == nil {
		return nil, false
	}
	for _, kp := range k.accounts[account] {
		if kp.PublicKey() == pk {
			return kp, true
		}
	}
	return nil, false
}
