package relayer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

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
}

// keysFile is the JSON form: {"accounts":[{"account_id":"…","keys":["ed25519:<base58>",…]}]}.
type keysFile struct {
	Accounts []struct {
		AccountID string   `json:"account_id"`
		Keys      []string `json:"keys"`
	} `json:"accounts"`
}

// LoadKeys reads and checks the keys file at path.
func LoadKeys(path string) (*Keys, error) {
	b, err := config.ReadSecretFile(path, "relayer keys file", 1<<20)
	if err != nil {
		return nil, err
	}
	k, err := ParseKeys(b)
	if err != nil {
		return nil, fmt.Errorf("relayer keys file %s: %w", path, err)
	}
	return k, nil
}

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
		return nil, errors.New(`not of the form {"accounts":[{"account_id":"…","keys":["ed25519:…"]}]}`)
	}
	if len(kf.Accounts) == 0 {
		return nil, errors.New("no accounts")
	}
	k := &Keys{accounts: map[string][]*near.KeyPair{}}
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
	}
	return k, nil
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
