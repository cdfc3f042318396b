package relayer

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/actors/actortest"
	"github.com/shardkeeper/shardkeeper/near"
	"github.com/shardkeeper/shardkeeper/test/await"
	"github.com/shardkeeper/shardkeeper/test/fakenear"
)

// The key actor against the fake NEAR node through the real near.Client, with answers lost,
// node timeouts, transactions the node loses and a failover: every intent lands exactly once,
// in nonce order, never signed twice.
func TestAgainstFakeNear(t *testing.T) {
	keys, err := ParseKeys([]byte(fmt.Sprintf(`{"accounts":[{"account_id":%q,"keys":[%q]}]}`, relayAccount, secretKey("k"))))
	if err != nil {
		t.Fatal(err)
	}
	pk := keys.PublicKeys(relayAccount)[0]
	rich, _ := near.ParseU128("1000000000000000000000000000")
	fake := fakenear.Start(t, fakenear.Config{BlockInterval: 10 * time.Millisecond, Seed: 3, Accounts: []fakenear.Account{
		{ID: relayAccount, Balance: rich, Keys: []fakenear.AccountKey{{PublicKey: pk}}},
		{ID: "bob.near", Balance: near.U128From64(0)},
	}})
	if err := fake.SetFaults(fakenear.Faults{Rules: []fakenear.FaultRule{
		{Kind: fakenear.FaultDropResponse, Rate: 0.2, Methods: []string{"send_tx"}},
		{Kind: fakenear.FaultTimeout, Rate: 0.2, Methods: []string{"tx"}},
		{Kind: fakenear.FaultLose, Next: 2},
	}}); err != nil {
		t.Fatal(err)
	}
	clock := actortest.NewClock(time.Now().Add(time.Hour))
	reg := prometheus.NewRegistry()
	met := NewMetrics(reg)
	client, err := near.NewClient([]string{fake.Endpoints()[0].URL()}, near.WithCooldown(10*time.Millisecond), near.WithObserver(met.ObserveRPC))
	if err != nil {
		t.Fatal(err)
	}
	h := actortest.New(t, actortest.Options{Runtime: actors.Options{Clock: clock.Now}},
		Kind(Config{Keys: keys, RPC: client, MaxInFlight: 8, CallTimeout: 5 * time.Second, Metrics: met}))
	e := &keyEnv{t: t, h: h, clock: clock, cfg: Config{}.withDefaults(), pk: pk, id: ActorID(relayAccount, pk)}

	const n = 30
	for i := range n {
		e.mustSubmit(transfer(fmt.Sprint("pay:", i), "bob.near"))
		if i == n/2 {
			h.Failover() // what is in flight is re-sent from the next activation
		}
	}
	// Timeouts of status queries leave intents to the poll: move the clock along meanwhile.
	deadline := time.Now().Add(30 * time.Second)
	for done := false; !done; {
		e.poll()
		done = true
		for i := range n {
			in, err := e.get(fmt.Sprint("pay:", i))
			if err != nil || in.Status != StatusSucceeded {
				done = false
				if time.Now().After(deadline) {
					st, _ := json.Marshal(e.status())
					var ledger []fakenear.LedgerEntry
					if in.TxHash != nil {
						ledger = fake.LedgerOf(hashOf(t, in))
					}
					t.Fatalf("pay:%d not final: %+v %v; key %s; ledger %+v", i, in, err, st, ledger)
				}
				break
			}
		}
		if !done {
			time.Sleep(5 * time.Millisecond) // blocks come by the wall clock
		}
	}
	// A lost transaction followed by later ones landing can never land: it is replaced, so
	// attempts and nonce order may differ. What must hold: each intent's transaction landed
	// once, nothing else of the key landed, and the key's nonces rose on chain.
	hashes := map[string]bool{}
	for i := range n {
		in, _ := e.get(fmt.Sprint("pay:", i))
		hashes[*in.TxHash] = true
	}
	landed, last := 0, uint64(0)
	for _, l := range fake.Ledger() {
		if l.Kind != fakenear.Landed || l.PublicKey != pk.String() {
			continue
		}
		if !hashes[l.Hash] || l.Nonce <= last {
			t.Fatalf("landed: %s nonce %d after %d; an intent's: %v", l.Hash, l.Nonce, last, hashes[l.Hash])
		}
		landed++
		last = l.Nonce
	}
	if landed != n {
		t.Fatalf("%d transactions of the key landed, want %d", landed, n)
	}
	if st := e.status(); st.LastError == nil || st.InFlight != 0 || st.Queued != 0 {
		t.Fatalf("key status %+v: want no work left, and the faults seen", st)
	} else {
		t.Logf("last error: %+v", *st.LastError)
	}
	if b, _ := fake.Balance("bob.near"); b.String() != fmt.Sprint(n) {
		t.Fatalf("bob.near holds %s yoctoNEAR, want %d", b, n)
	}
	e.checkInvariants()
	if got, _ := fake.AccessKeyNonce(relayAccount, pk); got != last {
		t.Fatalf("the key's nonce on chain is %d, the last intent's %d", got, last)
	}

	// The metrics tell the same story.
	metric := func(name, field string, labels map[string]string) float64 {
		return actortest.Metric(t, reg, name, field, labels)
	}
	// A message whose writes the failover discarded may count again in the next activation.
	for event, want := range map[string]float64{eventAccepted: n, eventSucceeded: n, eventFailed: 0, eventRejected: 0} {
		if got := metric("shardkeeper_relayer_intents_total", "", map[string]string{"event": event}); got < want || got > want+8*min(want, 1) {
			t.Errorf("intents %s: %v, want %v", event, got, want)
		}
	}
	signed, replaced := metric("shardkeeper_relayer_intents_total", "", map[string]string{"event": eventSigned}), metric("shardkeeper_relayer_intents_total", "", map[string]string{"event": eventReplaced})
	if signed < n+replaced || signed > n+replaced+8 {
		t.Errorf("%v signed, %v replaced, for %d intents", signed, replaced, n)
	}
	if got := metric("shardkeeper_relayer_landing_seconds", "count", nil); got < n || got > n+8 {
		t.Errorf("%v landings observed, want %d", got, n)
	}
	key := map[string]string{"key": e.id}
	if q, f := metric("shardkeeper_relayer_key_queued", "", key), metric("shardkeeper_relayer_key_in_flight", "", key); q != 0 || f != 0 {
		t.Errorf("key gauges: %v queued, %v in flight, want 0", q, f)
	}
	// Lost transactions are sent again or, once a later nonce landed, replaced.
	if resent := metric("shardkeeper_relayer_resends_total", "", key); resent+replaced == 0 || metric("shardkeeper_relayer_unknown_outcomes_total", "", key) == 0 {
		t.Errorf("%v re-sends, %v replacements, %v unknown outcomes, with transactions lost and answers timing out", resent, replaced,
			metric("shardkeeper_relayer_unknown_outcomes_total", "", key))
	}
	for _, method := range []string{"send_tx", "tx", "block"} {
		if metric("shardkeeper_near_rpc_duration_seconds", "count", map[string]string{"method": method, "outcome": "ok"}) == 0 {
			t.Errorf("no %s request observed", method)
		}
	}
	h.Failover()
	await.True(t, 5*time.Second, "the key's gauges removed with its activation", func() bool {
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == "shardkeeper_relayer_key_queued" && len(mf.GetMetric()) > 0 {
				return false
			}
		}
		return true
	})
}
