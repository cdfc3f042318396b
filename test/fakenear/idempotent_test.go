package fakenear

import (
	"context"
	"testing"

	"github.com/shardkeeper/shardkeeper/near"
)

// TestResendBeforeLanding: the same signed bytes sent again, on any endpoint and at any level,
// are one transaction: one pool entry, one landing, and every waiting sender gets its outcome.
func TestResendBeforeLanding(t *testing.T) {
	f, _ := testChain(t, Config{}, EndpointConfig{}, EndpointConfig{})
	a, b := f.Client(t, f.Endpoints()[0]), f.Client(t, f.Endpoints()[1])
	ctx := context.Background()
	raw, h := signTx(t, f, txSpec{})
	for _, c := range []*near.Client{a, b, a} {
		if _, err := c.SendTx(ctx, raw, near.TxNone); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.PoolSize(); n != 1 {
		t.Fatalf("pool holds %d transactions after three sends of one", n)
	}
	w1, w2 := sendAsync(a, raw, near.TxIncluded), sendAsync(b, raw, near.TxFinal)
	f.StepN(1 + DefaultFinalityLag)
	for _, r := range []sendResult{result(t, w1), result(t, w2)} {
		if r.err != nil || *r.out.TransactionHash != h {
			t.Fatalf("waiting re-send: %+v, %v", r.out, r.err)
		}
	}
	if k := kinds(f, h); !sameKinds(k, Landed) {
		t.Fatalf("ledger %v, want one landing", k)
	}
}

// TestResendAfterLanding is nearcore's send_tx idempotence: a waiting re-send of a transaction
// that landed gets its InvalidNonce turned into the existing outcome (the RPC checks that the
// transaction exists); a NONE re-send is validated by the node without that check and refused,
// silently; once the transaction's block hash left the validity window a re-send is refused as
// Expired, landed or not — the expiry check comes first.
func TestResendAfterLanding(t *testing.T) {
	const period = 4
	f, c := testChain(t, Config{ValidityPeriod: period})
	ctx := context.Background()
	raw, h := signTx(t, f, txSpec{})
	if _, err := c.SendTx(ctx, raw, near.TxNone); err != nil {
		t.Fatal(err)
	}
	landedAt := f.Step().Height
	before := balance(t, f, bobID)

	out, err := c.SendTx(ctx, raw, near.TxExecutedOptimistic)
	if err != nil || out.TransactionHash == nil || *out.TransactionHash != h || out.Kind() != near.OutcomeSucceeded {
		t.Fatalf("waiting re-send after landing: %+v, %v; want the existing outcome", out, err)
	}
	if _, err := c.SendTx(ctx, raw, near.TxNone); err != nil {
		t.Fatalf("NONE re-send: %v", err)
	}
	f.Step()
	if k := kinds(f, h); !sameKinds(k, Landed, Refused) {
		t.Fatalf("ledger %v, want landed then the NONE re-send refused", k)
	}
	if e := f.LedgerOf(h)[1]; e.ReasonName != "InvalidNonce" {
		t.Fatalf("NONE re-send refused for %s, want InvalidNonce", e.ReasonName)
	}
	if balance(t, f, bobID).Cmp(before) != 0 {
		t.Fatal("a re-send moved money again")
	}

	for f.Head().Height <= landedAt+period {
		f.Step()
	}
	_, err = c.SendTx(ctx, raw, near.TxFinal)
	wantInvalidTx(t, err, "Expired")
	// Which is why a relayer asks the status by hash, not by re-sending, once a transaction
	// may have expired: tx still knows it.
	out, err = c.TxStatus(ctx, near.TxQuery{Hash: h, SenderID: relayerID, WaitUntil: near.TxFinal})
	if err != nil || out.Kind() != near.OutcomeSucceeded {
		t.Fatalf("status by hash after expiry: %+v, %v", out, err)
	}
}
