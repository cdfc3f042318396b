package main

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mr-tron/base58"
	"github.com/shardkeeper/shardkeeper/client"
	"github.com/shardkeeper/shardkeeper/near"
	"github.com/shardkeeper/shardkeeper/services/relayer"
	"github.com/shardkeeper/shardkeeper/test/fakenear"
)

// The relayer workload: transfer intents through a one-node shardkeeper's relayer to a fake
// NEAR node (test/fakenear, in this process: a block every 100 ms, --relayer-latency of
// one-way delay on every RPC connection), measured from the POST to the transaction's landing
// in a block as the fake's ledger records it. Each run keeps a number of intents per access
// key submitted and not yet landed (the window): 1 shows the latency of an intent alone, 64
// (twice the default --relayer-max-in-flight) keeps the key's pipeline full, so the landed
// rate is the key's throughput. With 8 keys the intents are spread evenly over them.
// shardkeeper's endpoint fails as public providers do (relayerFaults), and the ledger must
// show no transaction of the relayer refused for its nonce that a loss does not explain.
//
// Beside it, on the same fake chain through a clean endpoint, the sequential sender: what a relayer without a
// transaction manager does with one key — sign with the next nonce, send_tx waiting for
// EXECUTED_OPTIMISTIC (near-api-js's default), then the next.
const (
	relayerAccount  = "relayer.bench"
	relayerReceiver = "payee.bench"
	relayerKeyCount = 8
	relayerToken    = "skbench-relayer-token-0123456789abcdef"
	relayerBlock    = 100 * time.Millisecond
	// relayerSubmitters POST intents concurrently per key, so that a POST's commit is not
	// what limits the key.
	relayerSubmitters = 8
	sysSequential     = "sequential-sender"
)

// relayerWorkload names a relayer row's workload: "relayer, N key(s)".
func relayerWorkload(keys int) string {
	if keys == 1 {
		return "relayer, 1 key"
	}
	return fmt.Sprintf("relayer, %d keys", keys)
}

// relayerSecret derives bench key i: its keys-file form (ed25519:<base58 of 64 bytes>) and its
// key pair.
func relayerSecret(i int) (string, *near.KeyPair) {
	seed := sha256.Sum256(fmt.Appendf(nil, "skbench relayer key %d", i))
	return "ed25519:" + base58.Encode(ed25519.NewKeyFromSeed(seed[:])), near.NewKeyPairFromSeed(seed[:])
}

// relayerBench is the fake chain, the shardkeeper node relaying to it, and what its ledger
// showed so far.
type relayerBench struct {
	fake    *fakenear.Fake
	rpc     string
	keys    []near.PublicKey // shardkeeper's, in the keys file's order
	seqKey  *near.KeyPair    // the sequential sender's own key of the account
	c       *client.Client
	node    *shardkeeperNode
	idemSeq int

	mu      sync.Mutex
	read    int                 // ledger entries read
	waiting map[uint64]*pending // deposit → intent not landed yet
	landed  map[uint64]int      // deposit → landings (more than one is a double landing)
	cond    *sync.Cond
	// The ledger's verdicts on the relayer's transactions: those the node lost, those that
	// landed, and the refusals or drops for their nonce (InvalidNonce) of transactions that
	// did not land, all and those no loss explains (a later nonce landing first).
	lost, landedHash    map[string]bool
	invalid, ownInvalid int
}

// pending is one intent posted and not landed yet.
type pending struct {
	key    int
	posted time.Time
	landed chan time.Time
}

// runRelayer measures the relayer rows and the sequential sender.
func runRelayer(ctx context.Context, o options, bin, tmp string, rows *[]row) error {
	b := &relayerBench{waiting: map[uint64]*pending{}, landed: map[uint64]int{}, lost: map[string]bool{}, landedHash: map[string]bool{}}
	b.cond = sync.NewCond(&b.mu)
	rich, _ := near.ParseU128("1000000000000000000000000000000000")
	acct := fakenear.Account{ID: relayerAccount, Balance: rich}
	var secrets []string
	for i := range relayerKeyCount + 1 {
		s, kp := relayerSecret(i)
		acct.Keys = append(acct.Keys, fakenear.AccountKey{PublicKey: kp.PublicKey()})
		if i == relayerKeyCount {
			b.seqKey = kp
			continue
		}
		secrets = append(secrets, strconv.Quote(s))
		b.keys = append(b.keys, kp.PublicKey())
	}
	var err error
	b.fake, err = fakenear.New(fakenear.Config{BlockInterval: relayerBlock, Seed: 1,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		Accounts: []fakenear.Account{acct, {ID: relayerReceiver, Balance: near.U128From64(0)}}})
	if err != nil {
		return err
	}
	defer b.fake.Close()
	// The sequential sender gets a clean endpoint (it has no answer to a fault); shardkeeper one
	// that fails as public providers do: 503 to some calls without handling them, and some
	// transactions sent accepted and lost.
	ep, err := b.fake.Listen("127.0.0.1:0", fakenear.EndpointConfig{Faults: fakenear.Faults{Latency: o.relayerLatency}})
	if err != nil {
		return err
	}
	b.rpc = ep.URL()
	faulty, err := b.fake.Listen("127.0.0.1:0", fakenear.EndpointConfig{Faults: fakenear.Faults{Latency: o.relayerLatency, Rules: relayerFaults}})
	if err != nil {
		return err
	}
	logf("fake NEAR at %s (sequential sender) and %s (shardkeeper: %s): a block every %v, %v one-way latency on every connection",
		b.rpc, faulty.URL(), relayerFaultsText, relayerBlock, o.relayerLatency)

	if err := b.runSequential(ctx, o, rows); err != nil {
		return err
	}

	dir := filepath.Join(tmp, "relayer")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	keysFile := filepath.Join(dir, "keys.json")
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(keysFile, fmt.Appendf(nil, `{"accounts":[{"account_id":%q,"keys":[%s]}]}`, relayerAccount, strings.Join(secrets, ",")), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(tokenFile, []byte(relayerToken), 0o600); err != nil {
		return err
	}
	b.node, err = startShardkeeper(ctx, bin, dir, o.partitions,
		"--relayer-keys", keysFile, "--relayer-token-file", tokenFile, "--near-rpc", faulty.URL())
	if err != nil {
		return err
	}
	defer func() {
		logf("stopping the relayer's shardkeeper")
		b.node.stop(15 * time.Second)
	}()
	if b.c, err = client.New([]string{b.node.url}, client.WithRelayerToken(relayerToken)); err != nil {
		return err
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go b.watchLedger(watchCtx)

	for _, run := range []struct{ keys, window int }{{1, 1}, {1, 64}, {relayerKeyCount, 64}} {
		r, err := b.measure(ctx, o, run.keys, run.window)
		if err != nil {
			return err
		}
		*rows = append(*rows, r)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	logf("the relayer's transactions: %d lost by the node, %d refused or dropped for their nonce (%d of them with no loss to explain it)",
		len(b.lost), b.invalid, b.ownInvalid)
	if b.ownInvalid > 0 {
		return fmt.Errorf("%d transactions of the relayer were refused or dropped for their nonce with no loss to explain it", b.ownInvalid)
	}
	return atMostOnce(b.landed, "the intent of deposit %v landed %d times")
}

// relayerFaults are the faults of shardkeeper's NEAR endpoint.
var relayerFaults = []fakenear.FaultRule{
	{Kind: fakenear.FaultStatus, Status: 503, Rate: 0.1},
	{Kind: fakenear.FaultLose, Rate: 0.05, Methods: []string{"send_tx"}},
}

const relayerFaultsText = "503 to 10% of calls before handling them, 5% of sends lost"

// watchLedger reads the fake's ledger as it grows and ends the wait of every intent whose
// transfer landed (found by its deposit, unique per intent).
func (b *relayerBench) watchLedger(ctx context.Context) {
	every(ctx, 2*time.Millisecond, func() {
		seqKey := b.seqKey.PublicKey().String()
		b.mu.Lock()
		entries := b.fake.LedgerSince(b.read)
		b.read += len(entries)
		for _, e := range entries {
			if e.Signer != relayerAccount || e.Foreign || e.PublicKey == seqKey {
				continue
			}
			switch e.Kind {
			case fakenear.Lost:
				b.lost[e.Hash] = true
			case fakenear.Refused, fakenear.Dropped:
				if e.ReasonName == "InvalidNonce" && !b.landedHash[e.Hash] {
					b.invalid++
					if !b.lost[e.Hash] {
						b.ownInvalid++
					}
				}
			}
			if e.Kind != fakenear.Landed {
				continue
			}
			b.landedHash[e.Hash] = true
			var acts []struct {
				Transfer *struct {
					Deposit string `json:"deposit"`
				}
			}
			if json.Unmarshal(e.Actions, &acts) != nil || len(acts) != 1 || acts[0].Transfer == nil {
				continue
			}
			deposit, err := strconv.ParseUint(acts[0].Transfer.Deposit, 10, 64)
			if err != nil {
				continue
			}
			b.landed[deposit]++
			if p, ok := b.waiting[deposit]; ok {
				delete(b.waiting, deposit)
				p.landed <- e.At
			}
		}
		b.cond.Broadcast()
		b.mu.Unlock()
	})
}

// nextIntent returns a new idempotency key assigned to key k, and a deposit of its own.
func (b *relayerBench) nextIntent(k int) (string, uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		b.idemSeq++
		idem := "bench:" + strconv.Itoa(b.idemSeq)
		if pk, _ := relayer.Assign(idem, b.keys); pk == b.keys[k] {
			return idem, uint64(b.idemSeq)
		}
	}
}

// measure runs the relayer with window intents outstanding on each of the first keys keys:
// o.warmup, then o.duration measured, then the outstanding ones drain.
func (b *relayerBench) measure(ctx context.Context, o options, keys, window int) (row, error) {
	name := relayerWorkload(keys)
	logf("%s on %s, %d outstanding per key: %v warm-up + %v", name, sysShardkeeper, window, o.warmup, o.duration)
	var (
		mu        sync.Mutex
		latencies []time.Duration
		landedIn  int
		errs      = map[string]int{}
	)
	start := time.Now()
	from, to := start.Add(o.warmup), start.Add(o.warmup+o.duration)
	runCtx, cancel := context.WithDeadline(ctx, to)
	defer cancel()
	cpu := startCPUMeter([]*process{b.node.process})
	var wg sync.WaitGroup
	for k := range keys {
		slots := make(chan struct{}, window)
		for range min(relayerSubmitters, window) {
			wg.Go(func() {
				for {
					select {
					case slots <- struct{}{}:
					case <-runCtx.Done():
						return
					}
					idem, deposit := b.nextIntent(k)
					p := &pending{key: k, posted: time.Now(), landed: make(chan time.Time, 1)}
					b.mu.Lock()
					b.waiting[deposit] = p
					b.mu.Unlock()
					body := fmt.Sprintf(`[{"Transfer":{"deposit":"%d"}}]`, deposit)
					_, _, err := b.c.SubmitIntent(ctx, relayerAccount, client.SubmitIntent{IdempotencyKey: idem, ReceiverID: relayerReceiver, Actions: json.RawMessage(body)})
					if err != nil {
						b.mu.Lock()
						delete(b.waiting, deposit)
						b.mu.Unlock()
						<-slots
						mu.Lock()
						errs[errorClass(err)]++
						mu.Unlock()
						if ctx.Err() != nil {
							return
						}
						continue
					}
					wg.Go(func() {
						defer func() { <-slots }()
						select {
						case at := <-p.landed:
							if !at.Before(from) && at.Before(to) {
								mu.Lock()
								landedIn++
								latencies = append(latencies, at.Sub(p.posted))
								mu.Unlock()
							}
						case <-time.After(o.warmup + o.duration + time.Minute):
							mu.Lock()
							errs["not landed within a minute"]++
							mu.Unlock()
						case <-ctx.Done():
						}
					})
				}
			})
		}
	}
	<-runCtx.Done()
	u := cpu.stop()
	logf("  draining the intents still outstanding")
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return row{}, err
	}
	select {
	case <-b.node.process.done:
		return row{}, b.node.process.exitedEarly()
	default:
	}
	r := latencyRow(name, sysShardkeeper, window, float64(landedIn)/o.duration.Seconds(), latencies, errs).withUsage(u)
	logf("  → %.0f intents landed/s, p50 %.0f ms, p99 %.0f ms to landing, errors %s%s", r.OpsPerS, r.P50ms, r.P99ms, r.errorSummary(), u)
	return r, nil
}

// errorClass names a failed POST for the row's errors.
func errorClass(err error) string {
	var ae *client.APIError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return "transport"
}

// runSequential measures the sequential sender with its own key for o.duration.
func (b *relayerBench) runSequential(ctx context.Context, o options, rows *[]row) error {
	logf("%s on %s: %v", relayerWorkload(1), sysSequential, o.duration)
	c, err := near.NewClient([]string{b.rpc})
	if err != nil {
		return err
	}
	pk := b.seqKey.PublicKey()
	ak, err := c.ViewAccessKey(ctx, relayerAccount, pk, near.FinalityOptimistic)
	if err != nil {
		return fmt.Errorf("sequential sender: %w", err)
	}
	nonce := ak.Nonce
	var block near.BlockRef
	var blockAt time.Time
	var latencies []time.Duration
	errs := map[string]int{}
	start := time.Now()
	for time.Since(start) < o.duration {
		if time.Since(blockAt) > 2*time.Second { // a recent block hash, fetched now and then
			if block, err = c.Block(ctx, near.FinalityFinal); err != nil {
				return fmt.Errorf("sequential sender: %w", err)
			}
			blockAt = time.Now()
		}
		nonce++
		tx := near.Transaction{SignerID: relayerAccount, PublicKey: pk, Nonce: nonce, ReceiverID: relayerReceiver, BlockHash: block.Hash,
			Actions: []near.Action{near.Transfer{Deposit: near.U128From64(1)}}}
		signed, _, err := near.SignTransaction(tx, b.seqKey)
		if err != nil {
			return err
		}
		raw, err := signed.Encode()
		if err != nil {
			return err
		}
		t0 := time.Now()
		if _, err := c.SendTx(ctx, raw, near.TxExecutedOptimistic); err != nil {
			errs[err.Error()]++
			continue
		}
		latencies = append(latencies, time.Since(t0))
	}
	r := latencyRow(relayerWorkload(1), sysSequential, 1, float64(len(latencies))/time.Since(start).Seconds(), latencies, errs)
	logf("  → %.1f transactions landed/s, p50 %.0f ms, p99 %.0f ms, errors %s", r.OpsPerS, r.P50ms, r.P99ms, r.errorSummary())
	*rows = append(*rows, r)
	return nil
}

// every calls f every d until ctx ends.
func every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}

// atMostOnce fails, with format (the key, the count), for a key seen more than once: a
// transaction that landed twice.
func atMostOnce[K comparable](seen map[K]int, format string) error {
	for k, n := range seen {
		if n > 1 {
			return fmt.Errorf(format, k, n)
		}
	}
	return nil
}

// latencyRow is a row of a rate and latency samples.
func latencyRow(workload, system string, clients int, rate float64, lat []time.Duration, errs map[string]int) row {
	slices.Sort(lat)
	q := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return math.Round(float64(lat[min(len(lat)-1, int(p*float64(len(lat))))])/1e3) / 1e3
	}
	return row{Workload: workload, System: system, Clients: clients, OpsPerS: math.Round(rate*100) / 100,
		P50ms: q(0.50), P99ms: q(0.99), errors: errs}
}

// printRelayer prints the relayer rows side by side: one key against the sequential sender,
// eight keys against one, and the throughput goals.
func printRelayer(w io.Writer, rows []row, latency time.Duration) {
	find := func(workload, system string, clients int) (row, bool) {
		for _, r := range rows {
			if r.Workload == workload && r.System == system && r.Clients == clients {
				return r, true
			}
		}
		return row{}, false
	}
	seq, seqOK := find(relayerWorkload(1), sysSequential, 1)
	one, oneOK := find(relayerWorkload(1), sysShardkeeper, 64)
	alone, aloneOK := find(relayerWorkload(1), sysShardkeeper, 1)
	eight, eightOK := find(relayerWorkload(relayerKeyCount), sysShardkeeper, 64)
	if !oneOK {
		return
	}
	verdict := map[bool]string{true: "met", false: "NOT met"}
	fmt.Fprintf(w, "\nrelayer (fake NEAR, a block every %v, %v one-way RPC latency; shardkeeper's endpoint: %s), intents landed per second:\n",
		relayerBlock, latency, relayerFaultsText)
	fmt.Fprintf(w, "  a key sends one transaction per round trip to its RPC node, so at most %.0f/s at this latency; more keys send more\n",
		float64(time.Second)/float64(2*latency))
	if seqOK && seq.OpsPerS > 0 {
		fmt.Fprintf(w, "  1 key:  shardkeeper %.0f/s vs a sequential sender %.1f/s: %.1f×\n", one.OpsPerS, seq.OpsPerS, one.OpsPerS/seq.OpsPerS)
	}
	if aloneOK {
		fmt.Fprintf(w, "  an intent alone lands %.0f ms after its POST (p50; p99 %.0f ms); the sequential sender's transaction %.0f ms after its send (p50)\n",
			alone.P50ms, alone.P99ms, seq.P50ms)
	}
	fmt.Fprintf(w, "goal: one key ≥ 100 landed intents/s: %.0f/s — %s\n", one.OpsPerS, verdict[one.OpsPerS >= 100])
	if eightOK && one.OpsPerS > 0 {
		ratio := eight.OpsPerS / one.OpsPerS
		fmt.Fprintf(w, "goal: %d keys ≥ 7× one key: %.0f/s, %.1f× — %s\n", relayerKeyCount, eight.OpsPerS, ratio, verdict[ratio >= 7])
	}
}
