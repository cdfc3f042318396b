package fakenear

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/near"
	"github.com/shardkeeper/shardkeeper/test/await"
)

// The accounts every test chain starts with.
const (
	relayerID = "relayer.test"
	bobID     = "bob.test"
)

var (
	relayerKey = KeyFromLabel("relayer")
	bobKey     = KeyFromLabel("bob")
)

func yocto(s string) near.U128 {
	v, err := near.ParseU128(s)
	if err != nil {
		panic(err)
	}
	return v
}

// hundredNEAR is the starting balance of the test accounts.
var hundredNEAR = yocto("100000000000000000000000000")

// testChain starts a manual fake (blocks only when the test steps) with the relayer and bob
// accounts, a short poll timeout, and the given endpoints.
func testChain(t *testing.T, cfg Config, eps ...EndpointConfig) (*Fake, *near.Client) {
	t.Helper()
	cfg.Manual = true
	if cfg.PollTimeout == 0 {
		cfg.PollTimeout = 2 * time.Second
	}
	cfg.Accounts = append([]Account{
		{ID: relayerID, Balance: hundredNEAR, Keys: []AccountKey{{PublicKey: relayerKey.PublicKey()}}},
		{ID: bobID, Balance: hundredNEAR, Keys: []AccountKey{{PublicKey: bobKey.PublicKey()}}},
	}, cfg.Accounts...)
	f := Start(t, cfg, eps...)
	return f, f.Client(t)
}

// txSpec describes a transaction to sign; zero fields take the defaults of signTx.
type txSpec struct {
	signer   string
	key      *near.KeyPair
	nonce    uint64
	receiver string
	block    near.Hash
	actions  []near.Action
}

// signTx signs spec (signer relayer.test with its key, receiver bob.test, a 1 yocto transfer,
// the head's hash, nonce = the key's nonce + 1 unless given) and returns its borsh bytes and
// hash.
func signTx(t testing.TB, f *Fake, spec txSpec) ([]byte, near.Hash) {
	t.Helper()
	if spec.signer == "" {
		spec.signer = relayerID
	}
	if spec.key == nil {
		spec.key = relayerKey
	}
	if spec.receiver == "" {
		spec.receiver = bobID
	}
	if spec.block == (near.Hash{}) {
		spec.block = f.Head().Hash
	}
	if spec.actions == nil {
		spec.actions = []near.Action{near.Transfer{Deposit: near.U128From64(1)}}
	}
	if spec.nonce == 0 {
		n, _ := f.AccessKeyNonce(spec.signer, spec.key.PublicKey())
		spec.nonce = n + 1
	}
	tx := near.Transaction{SignerID: spec.signer, PublicKey: spec.key.PublicKey(), Nonce: spec.nonce,
		ReceiverID: spec.receiver, BlockHash: spec.block, Actions: spec.actions}
	signed, hash, err := near.SignTransaction(tx, spec.key)
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	raw, err := signed.Encode()
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	return raw, hash
}

func nonceOf(t testing.TB, f *Fake, id string, kp *near.KeyPair) uint64 {
	t.Helper()
	n, ok := f.AccessKeyNonce(id, kp.PublicKey())
	if !ok {
		t.Fatalf("%s has no key %s", id, kp.PublicKey())
	}
	return n
}

// sendAsync sends raw with wait in a goroutine and returns a channel of the answer.
type sendResult struct {
	out *near.TxOutcome
	err error
}

func sendAsync(c *near.Client, raw []byte, wait near.TxExecutionStatus) <-chan sendResult {
	ch := make(chan sendResult, 1)
	go func() {
		out, err := c.SendTx(context.Background(), raw, wait)
		ch <- sendResult{out, err}
	}()
	return ch
}

// result waits for an answer of sendAsync.
func result(t testing.TB, ch <-chan sendResult) sendResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no answer within 10s")
		return sendResult{}
	}
}

// awaitPending waits until the fake holds the transaction for a block.
func awaitPending(t testing.TB, f *Fake, h near.Hash) {
	t.Helper()
	await.True(t, 5*time.Second, "transaction "+h.String()+" pending", func() bool { return f.Pending(h) })
}

// kinds lists the ledger kinds of a hash's entries.
func kinds(f *Fake, h near.Hash) []LedgerKind {
	var out []LedgerKind
	for _, e := range f.LedgerOf(h) {
		out = append(out, e.Kind)
	}
	return out
}

func sameKinds(got []LedgerKind, want ...LedgerKind) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// wantInvalidTx checks that err is a refusal whose InvalidTx has the given name and returns it.
func wantInvalidTx(t testing.TB, err error, name string) near.InvalidTx {
	t.Helper()
	var it near.InvalidTx
	if !errors.As(err, &it) || !near.IsRefused(err) {
		t.Fatalf("got %v, want a refusal %s", err, name)
	}
	if it.InvalidTxName() != name {
		t.Fatalf("got refusal %s (%v), want %s", it.InvalidTxName(), err, name)
	}
	return it
}

// rawCall posts a JSON-RPC request to url and returns the decoded response.
func rawCall(t testing.TB, url, method string, params any) map[string]json.RawMessage {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "dontcare", "method": method, "params": params})
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: HTTP %d: %s", method, resp.StatusCode, data)
	}
	var msg map[string]json.RawMessage
	if err := json.Unmarshal(data, &msg); err != nil {
		t.Fatalf("%s: %v: %s", method, err, data)
	}
	return msg
}

func b64(raw []byte) string { return base64.StdEncoding.EncodeToString(raw) }

// balance returns an account's balance at the head.
func balance(t testing.TB, f *Fake, id string) *big.Int {
	t.Helper()
	b, ok := f.Balance(id)
	if !ok {
		t.Fatalf("no account %s", id)
	}
	return b.Big()
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
