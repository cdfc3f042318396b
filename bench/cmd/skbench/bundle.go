package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shardkeeper/shardkeeper/arweave"
	"github.com/shardkeeper/shardkeeper/client"
	"github.com/shardkeeper/shardkeeper/services/chain"
	"github.com/shardkeeper/shardkeeper/test/fakearweave"
)

// The chain in bundle mode: events appended to one chain of a one-node shardkeeper, each a
// data item, packed into bundles on a fake Arweave node at mainnet's pace — a block every
// 2 minutes holding at most 1,000 transactions — with --chain-latency added to every answer.
// An event counts once the node has taken the wrapper of its bundle (POST /tx answered), as
// the fake records it: its First-Seq and Last-Seq tags say which events it carries. The rate
// is the events of the wrappers taken in the measured time, after the first of them, over the
// time from that first to the last: takes come one per --chain-bundle-interval, each with
// thousands of events, and counting whole wrappers in a window would be off by one of them.
// It runs with Ed25519 items (--chain-signer-key) and with RSA items (the wallet signs), as
// fast as the window allows; and with Ed25519 items offered at bundlePaced events/s, to see
// the wrappers come one per --chain-bundle-interval when no bundle fills up.
const (
	bundleBlock       = 2 * time.Minute
	bundleBlockTxs    = 1000
	bundleInterval    = 5 * time.Second
	bundleSubmitters  = 64
	bundleMinDuration = 30 * time.Second
	bundleMinWarmup   = 10 * time.Second
	bundlePaced       = 1000
)

// bundleWorkload names a bundle row: signer's items, offered at rate events/s (0: as fast as
// the window allows).
func bundleWorkload(signer string, rate int) string {
	if rate > 0 {
		return fmt.Sprintf("chain bundles, %s items, %d/s offered", signer, rate)
	}
	return "chain bundles, " + signer + " items"
}

// bundleBench is the fake node and the wrappers it took.
type bundleBench struct {
	fake   *fakearweave.Fake
	url    string
	wallet *arweave.Wallet

	mu   sync.Mutex
	read int
	// accepted holds, by chain, when each append was answered, in the order of the answers.
	// The node gives seqs in the order it accepted the events, so the k-th answer is about
	// seq k (the submitters' concurrency blurs it by at most that many events, milliseconds
	// apart): close enough for latencies of seconds.
	accepted map[string][]time.Time
	takes    map[string][]bundleTake // chain → wrappers taken, in order
}

// bundleTake is one wrapper the node took.
type bundleTake struct {
	first, last int64
	at          time.Time
}

// runBundles measures the bundle rows.
func runBundles(ctx context.Context, o options, bin, tmp string, rows *[]row) error {
	b := &bundleBench{accepted: map[string][]time.Time{}, takes: map[string][]bundleTake{}}
	var stop func()
	var err error
	if b.fake, b.url, stop, err = serveFake(fakearweave.Config{BlockInterval: bundleBlock, MaxBlockTxs: bundleBlockTxs}, o.chainLatency); err != nil {
		return err
	}
	defer stop()
	logf("fake Arweave at %s: a block every %v of at most %d transactions, %v added to every answer", b.url, bundleBlock, bundleBlockTxs, o.chainLatency)
	if b.wallet, err = arweave.NewWallet(); err != nil {
		return err
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go b.watch(watchCtx)
	for _, run := range []struct {
		signer string
		rate   int
	}{{"Ed25519", 0}, {"RSA", 0}, {"Ed25519", bundlePaced}} {
		r, err := b.measure(ctx, o, bin, filepath.Join(tmp, fmt.Sprintf("bundle-%s-%d", run.signer, run.rate)), run.signer, run.rate)
		if err != nil {
			return err
		}
		*rows = append(*rows, r)
	}
	return nil
}

// watch reads the fake's takes as they come.
func (b *bundleBench) watch(ctx context.Context) {
	every(ctx, 5*time.Millisecond, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		takes := b.fake.TakenSince(b.read)
		b.read += len(takes)
		for _, tk := range takes {
			tags := map[string]string{}
			for _, t := range tk.Tags {
				tags[string(t.Name)] = string(t.Value)
			}
			first, err1 := strconv.ParseInt(tags["First-Seq"], 10, 64)
			last, err2 := strconv.ParseInt(tags["Last-Seq"], 10, 64)
			if err1 == nil && err2 == nil {
				b.takes[tags["Chain"]] = append(b.takes[tags["Chain"]], bundleTake{first, last, tk.At})
			}
		}
	})
}

// measure starts a node in bundle mode whose items signer signs, and keeps
// --chain-bundle-window events accepted and not yet taken, sending at most rate a second
// (0: no bound).
func (b *bundleBench) measure(ctx context.Context, o options, bin, dir, signer string, rate int) (row, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return row{}, err
	}
	walletFile, tokenFile, keyFile := filepath.Join(dir, "wallet.json"), filepath.Join(dir, "token"), filepath.Join(dir, "signer.key")
	key, _, _, err := chain.NewSignerKey()
	if err != nil {
		return row{}, err
	}
	if err := writeSecrets(map[string][]byte{walletFile: b.wallet.JWK(), tokenFile: []byte(chainToken), keyFile: []byte(key)}); err != nil {
		return row{}, err
	}
	flags := []string{"--arweave-gateway", b.url, "--arweave-wallet", walletFile, "--chain-token-file", tokenFile,
		"--chain-mode", chain.ModeBundle, "--chain-bundle-interval", bundleInterval.String(), "--chain-poll-interval", "2s"}
	if signer == "Ed25519" {
		flags = append(flags, "--chain-signer-key", keyFile)
	}
	node, err := startShardkeeper(ctx, bin, dir, o.partitions, flags...)
	if err != nil {
		return row{}, err
	}
	defer node.stop(15 * time.Second)
	c, err := client.New([]string{node.url}, client.WithChainToken(chainToken))
	if err != nil {
		return row{}, err
	}
	name := fmt.Sprintf("bundles-%s-%d", strings.ToLower(signer), rate)
	warmup, duration := max(o.chainWarmup, bundleMinWarmup), max(o.chainDuration, bundleMinDuration)
	workload := bundleWorkload(signer, rate)
	// RSA items are signed one after the other (each names the one before), some 150 a
	// second: a window of Ed25519's would only fill the queue (429 queue_full).
	window := int64(o.chainBundleWindow)
	if signer == "RSA" {
		window = max(window/8, 1)
	}
	logf("%s on %s, %d events outstanding: %v warm-up + %v", workload, sysShardkeeper, window, warmup, duration)
	var (
		mu   sync.Mutex
		errs = map[string]int{}
		next int
		// done counts the events taken so far (the wrappers' takes, read under b.mu): an
		// event's slot frees once a wrapper covering it was taken.
		done int64
	)
	start := time.Now()
	from, to := start.Add(warmup), start.Add(warmup+duration)
	runCtx, cancel := context.WithDeadline(ctx, to)
	defer cancel()
	cpu := startCPUMeter([]*process{node.process})
	var sent int64 // appends answered
	var wg sync.WaitGroup
	for range bundleSubmitters {
		wg.Go(func() {
			for runCtx.Err() == nil {
				mu.Lock()
				if sent-done >= window {
					mu.Unlock()
					// The window is full: wait for a take (a wrapper every few seconds).
					if sleep(runCtx, 20*time.Millisecond) != nil {
						return
					}
					b.mu.Lock()
					taken := lastTaken(b.takes[name])
					b.mu.Unlock()
					mu.Lock()
					done = max(done, taken)
					mu.Unlock()
					continue
				}
				next++
				n := next
				entity := fmt.Sprintf("%s-e%d", name, n)
				sent++
				mu.Unlock()
				if rate > 0 && sleep(runCtx, time.Until(start.Add(time.Duration(n)*time.Second/time.Duration(rate)))) != nil {
					return // (the n-th event is due n/rate seconds in)
				}
				ev := client.ChainEvent{EntityID: entity, Ver: 1, Op: "create", Vis: "public",
					Manifest: []byte(fmt.Sprintf(`{"entity":%q,"build":"sha256:%064d"}`, entity, n))}
				_, _, err := c.AppendEvent(runCtx, name, ev)
				if err != nil {
					mu.Lock()
					sent--
					if runCtx.Err() == nil {
						errs[errorClass(err)]++
					}
					mu.Unlock()
					continue
				}
				at := time.Now()
				b.mu.Lock()
				b.accepted[name] = append(b.accepted[name], at)
				b.mu.Unlock()
			}
		})
	}
	<-runCtx.Done()
	u := cpu.stop()
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return row{}, err
	}
	select {
	case <-node.process.done:
		return row{}, node.process.exitedEarly()
	default:
	}
	b.mu.Lock()
	var in []bundleTake
	for _, tk := range b.takes[name] {
		if !tk.at.Before(from) && tk.at.Before(to) {
			in = append(in, tk)
		}
	}
	var latencies []time.Duration
	var events int64
	for i, tk := range in {
		if i > 0 {
			events += tk.last - tk.first + 1
		}
		for seq := tk.first; seq <= tk.last; seq++ {
			if acc := b.accepted[name]; seq <= int64(len(acc)) && !acc[seq-1].Before(from) {
				latencies = append(latencies, max(tk.at.Sub(acc[seq-1]), 0))
			}
		}
	}
	b.mu.Unlock()
	perS, perTx := 0.0, 0.0
	if len(in) >= 2 {
		span := in[len(in)-1].at.Sub(in[0].at).Seconds()
		perS, perTx = float64(events)/span, span/float64(len(in)-1)
	}
	r := latencyRow(workload, sysShardkeeper, bundleSubmitters, perS, latencies, errs).withUsage(u)
	r.L1Every = perTx
	logf("  → %.0f events/s bundled, %d wrappers taken in the measured %v (one every %.1f s), p50 %.0f ms, p99 %.0f ms from acceptance to the node taking its wrapper, errors %s%s",
		r.OpsPerS, len(in), duration, perTx, r.P50ms, r.P99ms, r.errorSummary(), u)
	if len(in) < 2 {
		return r, fmt.Errorf("%s: %d wrappers taken in the measured %v, too few for a rate", workload, len(in), duration)
	}
	return r, nil
}

// lastTaken is the last seq taken, by the wrappers taken in order.
func lastTaken(takes []bundleTake) int64 {
	if len(takes) == 0 {
		return 0
	}
	return takes[len(takes)-1].last
}

// printBundles prints the bundle rows beside the L1 mode's.
func printBundles(w io.Writer, rows []row, latency time.Duration) {
	find := func(workload string) (row, bool) {
		for _, r := range rows {
			if r.Workload == workload && r.System == sysShardkeeper {
				return r, true
			}
		}
		return row{}, false
	}
	ed, edOK := find(bundleWorkload("Ed25519", 0))
	rsa, rsaOK := find(bundleWorkload("RSA", 0))
	paced, pacedOK := find(bundleWorkload("Ed25519", bundlePaced))
	if !edOK && !rsaOK {
		return
	}
	fmt.Fprintf(w, "\nattestation chain in bundle mode (fake Arweave, a block every %v of at most %d transactions, %v added to every answer; --chain-bundle-interval %v,\n"+
		"a wrapper sooner only when a bundle reaches --chain-bundle-max-items or -bytes):\n", bundleBlock, bundleBlockTxs, latency, bundleInterval)
	l1, l1OK := find(chainWorkload(256))
	verdict := map[bool]string{true: "met", false: "NOT met"}
	for _, c := range []struct {
		r    row
		ok   bool
		name string
		goal float64
	}{{ed, edOK, "Ed25519", 1000}, {rsa, rsaOK, "RSA", 150}} {
		if !c.ok {
			continue
		}
		fmt.Fprintf(w, "  %s items: %.0f events/s, one L1 transaction every %.1f s", c.name, c.r.OpsPerS, c.r.L1Every)
		if l1OK && l1.OpsPerS > 0 {
			fmt.Fprintf(w, " (%.0f× the L1 mode's %.1f/s, one transaction per event)", c.r.OpsPerS/l1.OpsPerS, l1.OpsPerS)
		}
		if c.r.P50ms > 0 {
			fmt.Fprintf(w, "; acceptance to the wrapper taken p50 %.1f s, p99 %.1f s (the window of events outstanding over the rate)", c.r.P50ms/1000, c.r.P99ms/1000)
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "goal: ≥ %.0f events/s with %s items: %.0f/s — %s\n", c.goal, c.name, c.r.OpsPerS, verdict[c.r.OpsPerS >= c.goal])
	}
	if pacedOK {
		fmt.Fprintf(w, "  Ed25519 items offered at %d/s: %.0f events/s taken, one L1 transaction every %.1f s, acceptance to the wrapper taken p50 %.1f s, p99 %.1f s\n",
			bundlePaced, paced.OpsPerS, paced.L1Every, paced.P50ms/1000, paced.P99ms/1000)
		fmt.Fprintf(w, "goal: at most one L1 transaction per --chain-bundle-interval (%v) at %d events/s: one every %.1f s — %s\n",
			bundleInterval, bundlePaced, paced.L1Every, verdict[paced.OpsPerS >= 0.95*bundlePaced && paced.L1Every >= 0.95*bundleInterval.Seconds()])
	}
}
