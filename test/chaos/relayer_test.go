package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/shardkeeper/shardkeeper/near"
	"github.com/shardkeeper/shardkeeper/test/fakenear"
)

// Figures of TestRelayerExactlyOnce.
const (
	exactlyOnceIntents = 200
	exactlyOnceWorkers = 16
	exactlyOnceKeys    = 4
	exactlyOnceDeposit = 7
	killAfterAcks      = 60  // the busy key's leader is killed once this many POSTs were answered
	bumpAfterAcks      = 150 // a foreign sender takes a key's nonce then
)

// TestRelayerExactlyOnce: 200 transfer intents posted concurrently through every node of a
// three-node cluster, over a NEAR node that answers 503 to 10% of all calls without handling
// them (as a provider's load balancer does), loses 5% of the transactions sent (accepted,
// never pooled), drops 20% of the answers to send_tx after applying the transaction and
// answers TIMEOUT_ERROR to 5% of the transaction calls (send_tx, tx). Meanwhile the node leading the partition of the busiest access key is SIGKILLed (the
// clients go on through the survivors) and restarted on its data, and a foreign sender of
// another key moves its nonce 1000 ahead. Every intent must succeed; its transaction must
// land exactly once; no other transaction of the account may land; per key the landed nonces
// rise; none of the relayer's transactions may be refused for its nonce unless the foreign
// sender explains it; a POST repeated after all that answers 200 with the final record; the
// receiver holds the sum of the deposits; and the clients' history is linearizable under
// RelayerModel.
func TestRelayerExactlyOnce(t *testing.T) {
	const seed = 1
	begin := time.Now()
	env := startRelayerEnv(t, seed, exactlyOnceKeys, 100*time.Millisecond, fakenear.Faults{
		Latency: 2 * time.Millisecond, Jitter: 3 * time.Millisecond,
		Rules: []fakenear.FaultRule{
			{Kind: fakenear.FaultStatus, Status: 503, Rate: 0.1},
			{Kind: fakenear.FaultLose, Rate: 0.05, Methods: []string{"send_tx"}},
			{Kind: fakenear.FaultDropResponse, Rate: 0.2, Methods: []string{"send_tx"}},
			{Kind: fakenear.FaultTimeout, Rate: 0.05, Methods: []string{"send_tx", "tx", "EXPERIMENTAL_tx_status"}},
		},
	})
	c := startClusterBinding(t, false, env.flags...)
	h := newRelayerHistory(c, env)

	idems := make([]string, exactlyOnceIntents)
	perKey := map[near.PublicKey]int{}
	for i := range idems {
		idems[i] = fmt.Sprintf("pay:%d", i)
		perKey[env.keyOf(idems[i])]++
	}
	byLoad := slices.Clone(env.keys)
	sort.SliceStable(byLoad, func(i, j int) bool { return perKey[byLoad[i]] > perKey[byLoad[j]] })
	busy, bumped := byLoad[0], byLoad[1]
	t.Logf("intents per key: %s", keyLoad(env.keys, perKey))

	// The controller: kill, restart, bump, driven by the count of answered POSTs.
	prog := newProgress()
	var (
		acked     int
		posted    int // workers that finished
		killedAt  time.Time
		servedAt  time.Time // the first answered POST of a busy-key intent sent after the kill
		restarted time.Time
	)
	ack := func(idem string, call time.Time) {
		prog.Update(func() {
			acked++
			if !killedAt.IsZero() && servedAt.IsZero() && call.After(killedAt) && env.keyOf(idem) == busy {
				servedAt = time.Now()
			}
		})
	}
	waitFor := func(what string, timeout time.Duration, ok func() bool) { prog.WaitFor(t, what, timeout, ok) }
	var ctl sync.WaitGroup
	ctl.Go(func() {
		waitFor("kill point", 60*time.Second, func() bool { return acked >= killAfterAcks || posted == exactlyOnceWorkers })
		p := partitionOf(busy)
		leader := c.leaderOf(p)
		v := c.nodeIndex(leader)
		if v < 0 {
			t.Errorf("no leader known for partition %d of the busy key", p)
			return
		}
		victim := c.nodes[v]
		c.note("SIGKILL %s, leader of partition %d of the busiest key %s (%d intents)", leader, p, busy, perKey[busy])
		victim.Kill()
		prog.Update(func() { killedAt = time.Now() })
		waitFor("busy key serving again", 30*time.Second, func() bool { return !servedAt.IsZero() || posted == exactlyOnceWorkers })
		prog.Update(func() {
			if !servedAt.IsZero() {
				c.note("the busy key took a new intent %.2fs after the kill", servedAt.Sub(killedAt).Seconds())
			}
		})
		waitFor("more answers through the survivors", 10*time.Second, func() bool { return acked >= killAfterAcks+30 || posted == exactlyOnceWorkers })
		victim.Restart()
		victim.WaitReady(60 * time.Second)
		prog.Update(func() { restarted = time.Now() })
		c.note("%s restarted on its data and ready", leader)
		c.waitLeaders(30 * time.Second)
	})
	ctl.Go(func() {
		waitFor("bump point", 90*time.Second, func() bool { return acked >= bumpAfterAcks || posted == exactlyOnceWorkers })
		b, err := env.bump(bumped)
		if err != nil {
			t.Error(err)
			return
		}
		c.note("a foreign sender of key %s lands nonce %d (tx %s)", bumped, b.nonce, b.hash)
	})

	// The clients: each takes the next intent, POSTs it until answered, pauses.
	postBegin := time.Now()
	var next sync.Mutex
	nextIdx := 0
	var wg sync.WaitGroup
	for w := range exactlyOnceWorkers {
		cs := &relayerClientState{id: h.ids.New(), next: w, rnd: rand.New(rand.NewPCG(seed, uint64(w)))}
		wg.Go(func() {
			defer prog.Update(func() { posted++ })
			for {
				next.Lock()
				i := nextIdx
				nextIdx++
				next.Unlock()
				if i >= len(idems) {
					return
				}
				call := time.Now()
				if _, ok := h.submit(cs, idems[i], transferBody(idems[i], exactlyOnceDeposit), time.Now().Add(90*time.Second), func() bool { return false }); ok {
					ack(idems[i], call)
				} else {
					t.Errorf("POST %s: no answer within 90 s", idems[i])
				}
				time.Sleep(time.Duration(200+cs.rnd.IntN(500)) * time.Millisecond)
			}
		})
	}
	wg.Wait()
	postTook := time.Since(postBegin)
	ctl.Wait()
	var posts []int
	h.mu.Lock()
	for _, idem := range idems {
		posts = append(posts, h.posts[idem])
	}
	h.mu.Unlock()
	if t.Failed() {
		t.FailNow()
	}

	settleBegin := time.Now()
	h.settle(exactlyOnceWorkers, 90*time.Second)
	settleTook := time.Since(settleBegin)
	if t.Failed() {
		t.FailNow()
	}

	// Every intent answers a repeated POST with 200 and its final record.
	cs := &relayerClientState{id: h.ids.New(), rnd: rand.New(rand.NewPCG(seed, 999))}
	repeatBad := 0
	for _, idem := range idems {
		a, ok := h.submit(cs, idem, transferBody(idem, exactlyOnceDeposit), time.Now().Add(30*time.Second), func() bool { return false })
		final := h.intents()[idem].final
		if !ok || a.status != 200 || a.intent.Status != final.Status || deref(a.intent.TxHash) != deref(final.TxHash) {
			repeatBad++
			if repeatBad <= 10 {
				t.Errorf("repeated POST %s: %s %s tx %s, want 200 %s tx %s", idem, a.output(), a.intent.Status, deref(a.intent.TxHash), final.Status, deref(final.TxHash))
			}
		}
	}

	intents := h.intents()
	var attempts []int
	for _, idem := range idems {
		v := intents[idem]
		if v.final.Status != intentSucceeded {
			t.Errorf("intent %s is %s (%+v), want succeeded", idem, v.final.Status, v.final.Error)
		}
		attempts = append(attempts, v.final.Attempts)
	}
	rep := env.checkLedger(t, intents)
	h.checkReceiver(exactlyOnceDeposit)
	h.checkHistory("relayer")

	// The busy key after the kill: when the first intent created after the kill landed, and
	// the longest pause between two of its landings after the kill.
	landedAt := map[string]time.Time{}
	var busyLandings []time.Time
	for _, l := range env.fake.Ledger() {
		if l.Kind == fakenear.Landed && !l.Foreign {
			landedAt[l.Hash] = l.At
			if l.PublicKey == busy.String() && l.At.After(killedAt) {
				busyLandings = append(busyLandings, l.At)
			}
		}
	}
	var firstNew time.Time
	for _, idem := range idems {
		v := intents[idem]
		if env.keyOf(idem) == busy && time.UnixMilli(v.final.CreatedAt).After(killedAt) && v.final.TxHash != nil {
			if at, ok := landedAt[*v.final.TxHash]; ok && (firstNew.IsZero() || at.Before(firstNew)) {
				firstNew = at
			}
		}
	}
	var gap time.Duration
	for i := 1; i < len(busyLandings); i++ {
		gap = max(gap, busyLandings[i].Sub(busyLandings[i-1]))
	}
	if len(busyLandings) > 0 {
		gap = max(gap, busyLandings[0].Sub(killedAt))
	}
	t.Logf("took %s (POSTs %s, settling %s); %d intents, %d transactions landed (per key: %s), %d foreign",
		time.Since(begin).Round(time.Millisecond), postTook.Round(time.Millisecond), settleTook.Round(time.Millisecond),
		len(idems), rep.landed, landedPerKey(env.keys, rep.byKeyLanded), rep.foreignLanded)
	t.Logf("signatures per intent (attempts): %s; intents signed more than once: %d; transactions the node lost: %d", histogram(attempts), rep.replaced, rep.lost)
	t.Logf("POST attempts per intent until answered: %s", histogram(posts))
	t.Logf("identical bytes re-sent after landing (refused re-sends in the ledger): %d; relayer transactions refused for their nonce without a foreign sender: %d",
		rep.resends, len(rep.ownInvalid))
	if !killedAt.IsZero() {
		msg := fmt.Sprintf("busy key %s after the kill: ", busy)
		if !servedAt.IsZero() {
			msg += fmt.Sprintf("took a new intent after %.2fs; ", servedAt.Sub(killedAt).Seconds())
		}
		if !firstNew.IsZero() {
			msg += fmt.Sprintf("first intent created after the kill landed %.2fs after it; ", firstNew.Sub(killedAt).Seconds())
		}
		msg += fmt.Sprintf("longest pause between its landings %.2fs; node back %.2fs after the kill", gap.Seconds(), restarted.Sub(killedAt).Seconds())
		t.Log(msg)
	}
	t.Logf("relayer requests: %s", h.statsLine())
}

func keyLoad(keys []near.PublicKey, perKey map[near.PublicKey]int) string {
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s…: %d (partition %d)", k.String()[:16], perKey[k], partitionOf(k)))
	}
	return strings.Join(parts, ", ")
}

func landedPerKey(keys []near.PublicKey, landed map[string]int) string {
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s…: %d", k.String()[:16], landed[k.String()]))
	}
	return strings.Join(parts, ", ")
}

func submitOp(key string) Input { return Input{Op: OpSubmit, Key: key} }
func readOp(key string) Input   { return Input{Op: OpRead, Key: key} }

func intentOut(status int, intent, hash string) Output {
	return Output{Status: status, Intent: intent, TxHash: hash}
}

// RelayerModel on hand-written histories.
func TestRelayerModel(t *testing.T) {
	noIntent := Output{Status: 404, Code: "unknown_intent"}
	cases := []modelCase{
		{"created once, repeats 200, hash changes before terminal only", RelayerModel, hist(
			op(0, 0, 10, submitOp("a"), intentOut(201, intentQueued, "")),
			op(0, 11, 20, readOp("a"), intentOut(200, intentSubmitted, "h1")),
			op(1, 12, 21, submitOp("a"), intentOut(200, intentSubmitted, "h2")),
			op(0, 30, 40, readOp("a"), intentOut(200, intentSucceeded, "h2")),
			op(1, 41, 50, submitOp("a"), intentOut(200, intentSucceeded, "h2")),
		), true},
		{"created twice", RelayerModel, hist(
			op(0, 0, 10, submitOp("a"), intentOut(201, intentQueued, "")),
			op(1, 11, 20, submitOp("a"), intentOut(201, intentQueued, "")),
		), false},
		{"a lost POST created it; the retry is a repeat", RelayerModel, hist(
			op(0, 0, -1, submitOp("a"), unknown),
			op(1, 5, 20, submitOp("a"), intentOut(200, intentSubmitted, "h1")),
		), true},
		{"a lost POST did not create it; the retry creates", RelayerModel, hist(
			op(0, 0, -1, submitOp("a"), unavailable503()),
			op(1, 5, 20, submitOp("a"), intentOut(201, intentQueued, "")),
			op(1, 21, 30, readOp("a"), intentOut(200, intentSucceeded, "h1")),
		), true},
		{"a repeat before any creation", RelayerModel, hist(
			op(0, 0, 10, submitOp("a"), intentOut(200, intentQueued, "")),
		), false},
		{"read unknown before, found after", RelayerModel, hist(
			op(0, 0, 10, readOp("a"), noIntent),
			op(0, 11, 20, submitOp("a"), intentOut(201, intentQueued, "")),
			op(1, 21, 30, readOp("a"), intentOut(200, intentQueued, "")),
		), true},
		{"read unknown after an acknowledged create", RelayerModel, hist(
			op(0, 0, 10, submitOp("a"), intentOut(201, intentQueued, "")),
			op(1, 11, 20, readOp("a"), noIntent),
		), false},
		{"terminal hash changed", RelayerModel, hist(
			op(0, 0, 10, submitOp("a"), intentOut(201, intentQueued, "")),
			op(0, 11, 20, readOp("a"), intentOut(200, intentSucceeded, "h1")),
			op(1, 21, 30, readOp("a"), intentOut(200, intentSucceeded, "h2")),
		), false},
		{"non-terminal after terminal", RelayerModel, hist(
			op(0, 0, 10, submitOp("a"), intentOut(201, intentQueued, "")),
			op(0, 11, 20, readOp("a"), intentOut(200, intentSucceeded, "h1")),
			op(1, 21, 30, submitOp("a"), intentOut(200, intentSubmitted, "h1")),
		), false},
		{"overlapping reads around the end", RelayerModel, hist(
			op(0, 0, 10, submitOp("a"), intentOut(201, intentSubmitted, "h1")),
			op(0, 11, 30, readOp("a"), intentOut(200, intentSucceeded, "h1")),
			op(1, 12, 31, readOp("a"), intentOut(200, intentSubmitted, "h1")),
		), true},
		{"queue full changes nothing", RelayerModel, hist(
			op(0, 0, 10, submitOp("a"), Output{Status: 429, Code: "queue_full"}),
			op(0, 11, 20, submitOp("a"), intentOut(201, intentQueued, "")),
		), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := Check(c.model, c.history, 10*time.Second, "", nil)
			if got := res.Result == porcupine.Ok; got != c.legal {
				t.Fatalf("linearizable = %v (%v), want %v\n%s", got, res.Result, c.legal, res.Dump)
			}
		})
	}
}
