package chaos

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/test/fakenear"
)

// The relayer's share of every chaos scenario: a small stream of transfer intents over a fake
// NEAR node that loses answers, checked like the other workloads (a history under
// RelayerModel) and against the fake's ledger (each intent landed exactly once, nonces in
// order, no InvalidNonce of the relayer's own making).
const (
	relayerLoadWorkers = 2
	relayerLoadKeys    = 2
	relayerLoadDeposit = 3
)

// startChaosRelayerEnv starts the fake NEAR of a scenario: blocks every 100 ms, 10% of the
// answers to send_tx lost after the transaction was applied, 5% of the transaction calls
// answered TIMEOUT_ERROR.
func startChaosRelayerEnv(t *testing.T, seed uint64) *relayerEnv {
	return startRelayerEnv(t, seed, relayerLoadKeys, 100*time.Millisecond, fakenear.Faults{
		Latency: time.Millisecond, Jitter: 2 * time.Millisecond,
		Rules: []fakenear.FaultRule{
			{Kind: fakenear.FaultDropResponse, Rate: 0.1, Methods: []string{"send_tx"}},
			{Kind: fakenear.FaultTimeout, Rate: 0.05, Methods: []string{"send_tx", "tx", "EXPERIMENTAL_tx_status"}},
		},
	})
}

// relayerLoad drives the relayer during a scenario.
type relayerLoad struct {
	h    *relayerHistory
	seed uint64
	stop chan struct{}
	wg   sync.WaitGroup

	mu        sync.Mutex
	abandoned int // logical POSTs given up without a definite answer (settled at the end)
}

func newRelayerLoad(c *cluster, env *relayerEnv, seed uint64) *relayerLoad {
	return &relayerLoad{h: newRelayerHistory(c, env), seed: seed}
}

// start runs the workers until stopLoad: each submits a new transfer (retrying the same body
// until answered, for up to logicalDeadline), then sometimes reads it back, with or without a
// long poll, and pauses 150–350 ms.
func (l *relayerLoad) start() {
	l.stop = make(chan struct{})
	stopped := func() bool {
		select {
		case <-l.stop:
			return true
		default:
			return false
		}
	}
	for w := range relayerLoadWorkers {
		cs := &relayerClientState{id: l.h.ids.New(), next: w, rnd: rand.New(rand.NewPCG(l.seed, uint64(w)+500))}
		l.wg.Go(func() {
			for n := 0; !stopped(); n++ {
				idem := fmt.Sprintf("chaos:%d:%d:%d", l.seed, w, n)
				a, ok := l.h.submit(cs, idem, transferBody(idem, relayerLoadDeposit), time.Now().Add(logicalDeadline), stopped)
				if !ok {
					l.mu.Lock()
					l.abandoned++
					l.mu.Unlock()
				} else if !intentTerminal(a.intent.Status) {
					switch cs.rnd.IntN(3) {
					case 0:
						l.h.read(cs, idem, 0)
					case 1:
						l.h.read(cs, idem, time.Second)
					}
				}
				time.Sleep(time.Duration(150+cs.rnd.IntN(200)) * time.Millisecond)
			}
		})
	}
}

// stopLoad stops the workers and waits for them.
func (l *relayerLoad) stopLoad() {
	close(l.stop)
	l.wg.Wait()
}

// acked counts the POSTs answered so far.
func (l *relayerLoad) acked() int {
	l.h.mu.Lock()
	defer l.h.mu.Unlock()
	return l.h.acked
}

// settle drives every intent sent to a terminal status (load stopped), so that the relayer's
// partitions stop writing before the replicas are compared.
func (l *relayerLoad) settle() {
	begin := time.Now()
	l.h.settle(4, 90*time.Second)
	l.h.c.t.Logf("relayer: %d intents settled in %s", len(l.h.intents()), time.Since(begin).Round(time.Millisecond))
}

// check checks the relayer's history and the fake's ledger.
func (l *relayerLoad) check() {
	t := l.h.c.t
	l.h.checkHistory("relayer")
	intents := l.h.intents()
	failed := 0
	for idem, v := range intents {
		if v.final.Status != intentSucceeded {
			failed++
			if failed <= 10 {
				t.Errorf("relayer: intent %s is %q (%+v), want succeeded", idem, v.final.Status, v.final.Error)
			}
		}
	}
	rep := l.h.env.checkLedger(t, intents)
	l.h.checkReceiver(relayerLoadDeposit)
	l.mu.Lock()
	abandoned := l.abandoned
	l.mu.Unlock()
	t.Logf("relayer: %d intents, %d landed, %d signed more than once, %d identical re-sends refused after landing, %d of the relayer's refused for their nonce; %d POSTs left unanswered by the load (settled after); requests: %s",
		len(intents), rep.landed, rep.replaced, rep.resends, len(rep.ownInvalid), abandoned, l.h.statsLine())
}
