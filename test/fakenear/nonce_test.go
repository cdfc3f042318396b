package fakenear

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/near"
)

// TestInvalidNonce: a nonce not above the key's is refused with InvalidNonce{tx_nonce, ak_nonce};
// a landed transaction sets the key's nonce to its own, gaps allowed.
func TestInvalidNonce(t *testing.T) {
	f, c := testChain(t, Config{})
	ctx := context.Background()
	ak := nonceOf(t, f, relayerID, relayerKey)

	for _, n := range []uint64{ak, ak - 1} {
		raw, h := signTx(t, f, txSpec{nonce: n})
		_, err := c.SendTx(ctx, raw, near.TxFinal)
		it := wantInvalidTx(t, err, "InvalidNonce").(*near.InvalidNonceError)
		if it.TxNonce != n || it.AkNonce != ak {
			t.Fatalf("InvalidNonce %+v, want tx %d ak %d", it, n, ak)
		}
		if !near.IsStale(err) {
			t.Fatal("InvalidNonce is not IsStale")
		}
		if k := kinds(f, h); !sameKinds(k, Refused) {
			t.Fatalf("ledger %v, want refused", k)
		}
	}

	jump := ak + 1000 // nonces need not be consecutive
	raw, h := signTx(t, f, txSpec{nonce: jump})
	if _, err := c.SendTx(ctx, raw, near.TxNone); err != nil {
		t.Fatal(err)
	}
	f.Step()
	if got := nonceOf(t, f, relayerID, relayerKey); got != jump {
		t.Fatalf("key nonce %d after landing nonce %d", got, jump)
	}
	if k := kinds(f, h); !sameKinds(k, Landed) {
		t.Fatalf("ledger %v, want landed", k)
	}
	raw, _ = signTx(t, f, txSpec{nonce: jump - 1})
	_, err := c.SendTx(ctx, raw, near.TxIncluded)
	wantInvalidTx(t, err, "InvalidNonce")
}

// TestNonceTooLargeDroppedAtInclusion: nearcore does not check the upper bound when it receives
// a transaction (it does not know the including block yet); a block at height h drops a
// transaction with nonce >= h·10⁶. The sender that waits learns nothing but TIMEOUT_ERROR.
func TestNonceTooLargeDroppedAtInclusion(t *testing.T) {
	f, c := testChain(t, Config{PollTimeout: 300 * time.Millisecond})
	ctx := context.Background()
	next := f.Head().Height + 1
	bound := next * nonceMultiplier

	over, hOver := signTx(t, f, txSpec{nonce: bound})
	res := sendAsync(c, over, near.TxFinal)
	awaitPending(t, f, hOver)
	f.Step()
	r := result(t, res)
	var te *near.TimeoutError
	if r.err == nil || !near.IsOutcomeUnknown(r.err) || !errors.As(r.err, &te) {
		t.Fatalf("send_tx of a nonce too large: %v, want TIMEOUT_ERROR", r.err)
	}
	entries := f.LedgerOf(hOver)
	if len(entries) != 1 || entries[0].Kind != Dropped || entries[0].ReasonName != "NonceTooLarge" || entries[0].Height != next {
		t.Fatalf("ledger %+v, want dropped NonceTooLarge at %d", entries, next)
	}
	if string(entries[0].Reason) != fmt.Sprintf(`{"NonceTooLarge":{"tx_nonce":%d,"upper_bound":%d}}`, bound, bound) {
		t.Fatalf("reason %s", entries[0].Reason)
	}

	// One below the bound of the including block lands.
	next = f.Head().Height + 1
	under, hUnder := signTx(t, f, txSpec{nonce: next*nonceMultiplier - 1})
	if _, err := c.SendTx(ctx, under, near.TxNone); err != nil {
		t.Fatal(err)
	}
	f.Step()
	if k := kinds(f, hUnder); !sameKinds(k, Landed) {
		t.Fatalf("nonce just under the bound: ledger %v, want landed", k)
	}
}

// TestNonceTooLargeAtRPC: with NonceUpperBoundAtRPC the refusal comes back from send_tx.
func TestNonceTooLargeAtRPC(t *testing.T) {
	f, c := testChain(t, Config{NonceUpperBoundAtRPC: true})
	bound := (f.Head().Height + 1) * nonceMultiplier
	raw, _ := signTx(t, f, txSpec{nonce: bound + 5})
	_, err := c.SendTx(context.Background(), raw, near.TxFinal)
	it := wantInvalidTx(t, err, "NonceTooLarge").(*near.NonceTooLargeError)
	if it.TxNonce != bound+5 || it.UpperBound != bound {
		t.Fatalf("NonceTooLarge %+v, want tx %d bound %d", it, bound+5, bound)
	}
}

// TestAddedKeyNonce: a key added by an AddKey action landing in block h starts at (h-1)·10⁶,
// whatever nonce the action carries; DeleteKey removes it.
func TestAddedKeyNonce(t *testing.T) {
	f, c := testChain(t, Config{})
	ctx := context.Background()
	newKey := KeyFromLabel("new")
	raw, _ := signTx(t, f, txSpec{receiver: relayerID, actions: []near.Action{
		near.AddKey{PublicKey: newKey.PublicKey(), AccessKey: near.AccessKey{Nonce: 7, Permission: near.AccessKeyPermission{FullAccess: true}}},
	}})
	if _, err := c.SendTx(ctx, raw, near.TxNone); err != nil {
		t.Fatal(err)
	}
	h := f.Step().Height
	if got := nonceOf(t, f, relayerID, newKey); got != (h-1)*nonceMultiplier {
		t.Fatalf("new key nonce %d, want (%d-1)·10⁶", got, h)
	}
	// The new key signs at once with (h-1)·10⁶ + 1.
	raw, hNew := signTx(t, f, txSpec{key: newKey})
	if _, err := c.SendTx(ctx, raw, near.TxNone); err != nil {
		t.Fatal(err)
	}
	f.Step()
	if k := kinds(f, hNew); !sameKinds(k, Landed) {
		t.Fatalf("transaction of the new key: %v", k)
	}
	raw, _ = signTx(t, f, txSpec{receiver: relayerID, actions: []near.Action{near.DeleteKey{PublicKey: newKey.PublicKey()}}})
	if _, err := c.SendTx(ctx, raw, near.TxNone); err != nil {
		t.Fatal(err)
	}
	f.Step()
	if _, ok := f.AccessKeyNonce(relayerID, newKey.PublicKey()); ok {
		t.Fatal("key still there after DeleteKey")
	}
	raw, _ = signTx(t, f, txSpec{key: newKey, nonce: h * nonceMultiplier})
	_, err := c.SendTx(ctx, raw, near.TxFinal)
	it := wantInvalidTx(t, err, "InvalidAccessKeyError").(*near.InvalidAccessKeyError)
	if it.Kind != "AccessKeyNotFound" {
		t.Fatalf("deleted key: %v", it)
	}
}
