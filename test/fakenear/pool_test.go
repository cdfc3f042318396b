package fakenear

import (
	"context"
	"testing"

	"github.com/shardkeeper/shardkeeper/near"
)

// TestPoolNonceOrderWithinBlock: transactions of one key that wait for the same block land in
// nonce order, whatever order they arrived in.
func TestPoolNonceOrderWithinBlock(t *testing.T) {
	f, c := testChain(t, Config{})
	ctx := context.Background()
	n := nonceOf(t, f, relayerID, relayerKey)
	byNonce := map[uint64]near.Hash{}
	for _, nonce := range []uint64{n + 3, n + 1, n + 2} {
		raw, h := signTx(t, f, txSpec{nonce: nonce})
		if _, err := c.SendTx(ctx, raw, near.TxNone); err != nil {
			t.Fatal(err)
		}
		byNonce[nonce] = h
	}
	// Another key's transaction in the same block is not held back by them.
	other, hOther := signTx(t, f, txSpec{signer: bobID, key: bobKey, receiver: relayerID})
	if _, err := c.SendTx(ctx, other, near.TxNone); err != nil {
		t.Fatal(err)
	}
	f.Step()
	var nonces []uint64
	for _, e := range f.Ledger() {
		if e.Kind != Landed {
			t.Fatalf("entry %+v, want only landings", e)
		}
		if e.Signer == relayerID {
			if e.Hash != byNonce[e.Nonce].String() {
				t.Fatalf("entry %+v is not the transaction sent with its nonce", e)
			}
			nonces = append(nonces, e.Nonce)
		}
	}
	if len(nonces) != 3 || nonces[0] != n+1 || nonces[1] != n+2 || nonces[2] != n+3 {
		t.Fatalf("landing order %v, want %d, %d, %d", nonces, n+1, n+2, n+3)
	}
	if k := kinds(f, hOther); !sameKinds(k, Landed) {
		t.Fatalf("other key: %v", k)
	}
	if got := nonceOf(t, f, relayerID, relayerKey); got != n+3 {
		t.Fatalf("key nonce %d, want %d", got, n+3)
	}
}

// TestOutOfOrderHazard: a higher nonce that reaches a block before a lower one lands first;
// the lower one is then refused (InvalidNonce) and never lands. The fake does not reorder.
func TestOutOfOrderHazard(t *testing.T) {
	f, c := testChain(t, Config{})
	ctx := context.Background()
	n := nonceOf(t, f, relayerID, relayerKey)
	low, hLow := signTx(t, f, txSpec{nonce: n + 1})
	high, hHigh := signTx(t, f, txSpec{nonce: n + 2})
	if _, err := c.SendTx(ctx, high, near.TxNone); err != nil {
		t.Fatal(err)
	}
	f.Step()
	_, err := c.SendTx(ctx, low, near.TxFinal)
	it := wantInvalidTx(t, err, "InvalidNonce").(*near.InvalidNonceError)
	if it.TxNonce != n+1 || it.AkNonce != n+2 {
		t.Fatalf("%+v", it)
	}
	if !sameKinds(kinds(f, hHigh), Landed) || !sameKinds(kinds(f, hLow), Refused) {
		t.Fatalf("ledger: high %v, low %v", kinds(f, hHigh), kinds(f, hLow))
	}
}

// TestDroppedWhileWaiting: a waiting send_tx whose transaction is dropped from the pool (a later
// nonce of its key landed first, by a foreign sender) answers the refusal it would now get, as
// nearcore's status polling re-checks the signed transaction.
func TestDroppedWhileWaiting(t *testing.T) {
	f, c := testChain(t, Config{})
	n := nonceOf(t, f, relayerID, relayerKey)
	raw, h := signTx(t, f, txSpec{nonce: n + 1})
	if _, err := f.BumpNonce(relayerID, relayerKey.PublicKey(), n+1); err != nil {
		t.Fatal(err)
	}
	res := sendAsync(c, raw, near.TxFinal)
	awaitPending(t, f, h)
	f.Step()
	r := result(t, res)
	wantInvalidTx(t, r.err, "InvalidNonce")
	e := f.LedgerOf(h)
	if len(e) != 1 || e[0].Kind != Dropped || e[0].ReasonName != "InvalidNonce" {
		t.Fatalf("ledger %+v, want dropped InvalidNonce", e)
	}
}
