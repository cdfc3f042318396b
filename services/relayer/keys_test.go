package relayer

import (
	"crypto/ed25519"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mr-tron/base58"
	"github.com/shardkeeper/shardkeeper/near"
)

// secretKey is a test key's NEAR secret key string, from a name.
func secretKey(name string) string {
	seed := sha256.Sum256([]byte("relayer test key " + name))
	return "ed25519:" + base58.Encode(ed25519.NewKeyFromSeed(seed[:]))
}

func writeKeys(t *testing.T, mode os.FileMode, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keys.json")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadKeys(t *testing.T) {
	body := fmt.Sprintf(`{"accounts":[{"account_id":"relay.near","keys":[%q,%q]},{"account_id":"b.testnet","keys":[%q]}]}`,
		secretKey("a"), secretKey("b"), secretKey("c"))
	k, err := LoadKeys(writeKeys(t, 0o600, body))
	if err != nil {
		t.Fatal(err)
	}
	if got := k.Accounts(); len(got) != 2 || got[0] != "b.testnet" || got[1] != "relay.near" {
		t.Fatalf("accounts %v", got)
	}
	pks := k.PublicKeys("relay.near")
	if len(pks) != 2 {
		t.Fatalf("relay.near keys %v", pks)
	}
	kp, ok := k.Signer("relay.near", pks[1])
	if !ok {
		t.Fatal("no signer for the second key")
	}
	want, _ := near.ParseKeyPair(secretKey("b"))
	if kp.PublicKey() != want.PublicKey() {
		t.Fatalf("signer of %s has key %s", pks[1], kp.PublicKey())
	}
	if _, ok := k.Signer("b.testnet", pks[0]); ok {
		t.Fatal("a key of relay.near signs for b.testnet")
	}
}

// A keys file others may read or write is refused, and so is anything that is not a file.
func TestLoadKeysRefusesFilesOthersCanAccess(t *testing.T) {
	body := fmt.Sprintf(`{"accounts":[{"account_id":"relay.near","keys":[%q]}]}`, secretKey("a"))
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o620, 0o602} {
		_, err := LoadKeys(writeKeys(t, mode, body))
		if err == nil || !strings.Contains(err.Error(), "chmod 600") {
			t.Errorf("mode %04o: %v, want a refusal", mode, err)
		}
	}
	if _, err := LoadKeys(writeKeys(t, 0o400, body)); err != nil {
		t.Errorf("mode 0400: %v", err)
	}
	if _, err := LoadKeys(t.TempDir()); err == nil {
		t.Error("a directory was accepted as the keys file")
	}
}

// Malformed files are refused with an error that names the place, never a secret.
func TestParseKeysErrorsHoldNoSecret(t *testing.T) {
	secret := secretKey("a")
	bad := secret[:len(secret)-3] + "xyz" // right prefix, wrong key
	for name, body := range map[string]string{
		"not json":          `{"accounts":[` + secret,
		"unknown field":     `{"accounts":[],"secret":"` + secret + `"}`,
		"no accounts":       `{"accounts":[]}`,
		"bad account":       `{"accounts":[{"account_id":"Bad Account","keys":["` + secret + `"]}]}`,
		"no keys":           `{"accounts":[{"account_id":"relay.near","keys":[]}]}`,
		"bad key":           `{"accounts":[{"account_id":"relay.near","keys":["` + bad + `"]}]}`,
		"duplicate key":     `{"accounts":[{"account_id":"relay.near","keys":["` + secret + `","` + secret + `"]}]}`,
		"duplicate account": `{"accounts":[{"account_id":"relay.near","keys":["` + secret + `"]},{"account_id":"relay.near","keys":["` + secretKey("b") + `"]}]}`,
		"wrong type":        `{"accounts":[{"account_id":"relay.near","keys":"` + secret + `"}]}`,
	} {
		_, err := ParseKeys([]byte(body))
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		seed := strings.TrimPrefix(secret, "ed25519:")
		if strings.Contains(err.Error(), seed[:16]) || strings.Contains(err.Error(), strings.TrimPrefix(bad, "ed25519:")[:16]) {
			t.Errorf("%s: error holds the secret: %v", name, err)
		}
	}
}

// Assignment is deterministic, spreads idempotency keys over the keys, and adding a key moves
// only the intents the new key wins.
func TestAssign(t *testing.T) {
	var keys []near.PublicKey
	for i := range 4 {
		kp, _ := near.ParseKeyPair(secretKey(fmt.Sprint(i)))
		keys = append(keys, kp.PublicKey())
	}
	if _, ok := Assign("x", nil); ok {
		t.Fatal("assigned with no keys")
	}
	counts := map[near.PublicKey]int{}
	for i := range 4000 {
		idem := fmt.Sprintf("create:user%d.near", i)
		k3, _ := Assign(idem, keys[:3])
		if again, _ := Assign(idem, []near.PublicKey{keys[2], keys[0], keys[1]}); again != k3 {
			t.Fatalf("%s: assignment depends on key order", idem)
		}
		k4, _ := Assign(idem, keys)
		if k4 != k3 && k4 != keys[3] {
			t.Fatalf("%s moved from %s to %s, not to the added key", idem, k3, k4)
		}
		counts[k4]++
	}
	for _, k := range keys {
		if n := counts[k]; n < 800 || n > 1200 {
			t.Errorf("key %s got %d of 4000 intents", k, n)
		}
	}
}
