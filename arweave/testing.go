package arweave

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// TestWalletJWK returns the JWK of the test wallet, testdata/wallet.json (it holds nothing),
// for the tests of any package.
func TestWalletJWK(tb testing.TB) []byte {
	tb.Helper()
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "testdata", "wallet.json"))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestWallet returns the test wallet (see TestWalletJWK).
func TestWallet(tb testing.TB) *Wallet {
	tb.Helper()
	w, err := ParseWallet(TestWalletJWK(tb))
	if err != nil {
		tb.Fatal(err)
	}
	return w
}
