package fakenear

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"

	"github.com/shardkeeper/shardkeeper/near"
)

// Account is an account to create, in Config.Accounts, Fake.AddAccount, the binary's
// --accounts file and POST /fake/accounts.
type Account struct {
	ID      string       `json:"account_id"`
	Balance near.U128    `json:"balance"`
	Keys    []AccountKey `json:"keys,omitempty"`
}

// AccountKey is an access key to install.
type AccountKey struct {
	PublicKey near.PublicKey `json:"public_key"`
	// Permission defaults to FullAccess.
	Permission *near.AccessKeyPermission `json:"permission,omitempty"`
	// Nonce defaults to head·10⁶, the nonce an AddKey landing in the next block would give.
	Nonce *uint64 `json:"nonce,omitempty"`
}

// KeyFromLabel derives a key pair from a label (seed sha256("fakenear key " + label)), so that
// a test, the binary's accounts file and the near-api-js cross-check can name the same key.
func KeyFromLabel(label string) *near.KeyPair {
	seed := sha256.Sum256([]byte("fakenear key " + label))
	return near.NewKeyPairFromSeed(seed[:])
}

// accountsFile is the --accounts file: {"accounts":[…]} or a bare array of accounts.
type accountsFile struct {
	Accounts []Account `json:"accounts"`
}

// LoadAccounts reads a JSON file of accounts: {"accounts":[{"account_id","balance","keys":
// [{"public_key","permission","nonce"}]}]} or the bare array.
func LoadAccounts(path string) ([]Account, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("fakenear: read accounts: %w", err)
	}
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] == '[' {
		var list []Account
		if err := json.Unmarshal(data, &list); err != nil {
			return nil, fmt.Errorf("fakenear: accounts file %s: %w", path, err)
		}
		return list, nil
	}
	var f accountsFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("fakenear: accounts file %s: %w", path, err)
	}
	return f.Accounts, nil
}

func (a Account) check() error {
	if err := near.ValidateAccountID(a.ID); err != nil {
		return fmt.Errorf("fakenear: account: %w", err)
	}
	for _, k := range a.Keys {
		if k.Permission != nil {
			if _, err := json.Marshal(k.Permission); err != nil {
				return fmt.Errorf("fakenear: account %s key %s: %w", a.ID, k.PublicKey, err)
			}
		}
	}
	return nil
}
