package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/shardkeeper/shardkeeper/arweave"
	"github.com/shardkeeper/shardkeeper/client"
	"github.com/shardkeeper/shardkeeper/services/chain"
	"github.com/shardkeeper/shardkeeper/test/fakearweave"
)

// The chain workload: events appended to one attestation chain of a one-node shardkeeper
// anchoring on the fake Arweave node (test/fakearweave, in this process: a block every 2 s,
// --chain-latency added to every answer), measured from the POST's answer (the event
// accepted) to the node taking the event's transaction (POST /tx), as the fake records it,
// for the events accepted in the measured time.
// Each run keeps a window of events accepted and not yet taken; the taken rate is the chain's
// throughput. It runs at --chain-max-in-flight 1 and 256 (the default).
//
// Beside it, on the same fake node, the sequential uploader a cron job would run: for each
// event, read an anchor and a price, sign, post, and only then take the next.
const (
	chainToken = "skbench-chain-token-0123456789abcdef-0123"
	chainBlock = 2 * time.Second
	chainName  = "bench"
	// chainSubmitters POST events concurrently, so that a POST's commit is not what limits
	// the chain.
	chainSubmitters = 16
	sysCron         = "sequential-uploader"
)

func chainWorkload(inFlight int) string { return fmt.Sprintf("chain, max-in-flight %d", inFlight) }

// chainBench is the fake node and what it took so far.
type chainBench struct {
	fake   *fakearweave.Fake
	url    string
	wallet *arweave.Wallet

	mu      sync.Mutex
	read    int                       // takes read
	waiting map[string]chan time.Time // entity → its event's wait for the take
	taken   map[string]int            // entity → takes (more than one: anchored twice)
}

// runChain measures the chain rows and the sequential uploader.
func runChain(ctx context.Context, o options, bin, tmp string, rows *[]row) error {
	b := &chainBench{waiting: map[string]chan time.Time{}, taken: map[string]int{}}
	var stop func()
	var err error
	if b.fake, b.url, stop, err = serveFake(fakearweave.Config{BlockInterval: chainBlock}, o.chainLatency); err != nil {
		return err
	}
	defer stop()
	logf("fake Arweave at %s: a block every %v, %v added to every answer", b.url, chainBlock, o.chainLatency)
	if b.wallet, err = arweave.NewWallet(); err != nil {
		return err
	}

	if err := b.runSequential(ctx, o, rows); err != nil {
		return err
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go b.watch(watchCtx)
	for _, inFlight := range []int{1, 256} {
		r, err := b.measure(ctx, o, bin, filepath.Join(tmp, "chain-"+strconv.Itoa(inFlight)), inFlight)
		if err != nil {
			return err
		}
		*rows = append(*rows, r)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return atMostOnce(b.taken, "the event of entity %v was taken %d times")
}

// watch reads the fake's takes as they come and ends the wait of each event taken (found by
// its Entity tag, unique per event).
func (b *chainBench) watch(ctx context.Context) {
	every(ctx, 2*time.Millisecond, func() {
		b.mu.Lock()
		takes := b.fake.TakenSince(b.read)
		b.read += len(takes)
		for _, tk := range takes {
			for _, tag := range tk.Tags {
				if string(tag.Name) != "Entity" {
					continue
				}
				e := string(tag.Value)
				b.taken[e]++
				if ch, ok := b.waiting[e]; ok {
					delete(b.waiting, e)
					ch <- tk.At
				}
			}
		}
		b.mu.Unlock()
	})
}

// measure starts a node with --chain-max-in-flight inFlight and keeps --chain-window events
// outstanding for the chain warm-up and duration.
func (b *chainBench) measure(ctx context.Context, o options, bin, dir string, inFlight int) (row, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return row{}, err
	}
	walletFile, tokenFile := filepath.Join(dir, "wallet.json"), filepath.Join(dir, "token")
	if err := writeSecrets(map[string][]byte{walletFile: b.wallet.JWK(), tokenFile: []byte(chainToken)}); err != nil {
		return row{}, err
	}
	node, err := startShardkeeper(ctx, bin, dir, o.partitions, "--arweave-gateway", b.url, "--arweave-wallet", walletFile,
		"--chain-token-file", tokenFile, "--chain-max-in-flight", strconv.Itoa(inFlight), "--chain-poll-interval", "2s")
	if err != nil {
		return row{}, err
	}
	defer node.stop(15 * time.Second)
	c, err := client.New([]string{node.url}, client.WithChainToken(chainToken))
	if err != nil {
		return row{}, err
	}
	name := chainWorkload(inFlight)
	logf("%s on %s, %d events outstanding: %v warm-up + %v", name, sysShardkeeper, o.chainWindow, o.chainWarmup, o.chainDuration)
	var (
		mu        sync.Mutex
		latencies []time.Duration
		takenIn   int
		errs      = map[string]int{}
		next      int
	)
	start := time.Now()
	from, to := start.Add(o.chainWarmup), start.Add(o.chainWarmup+o.chainDuration)
	runCtx, cancel := context.WithDeadline(ctx, to)
	defer cancel()
	cpu := startCPUMeter([]*process{node.process})
	slots := make(chan struct{}, o.chainWindow)
	var wg sync.WaitGroup
	for range chainSubmitters {
		wg.Go(func() {
			for {
				select {
				case slots <- struct{}{}:
				case <-runCtx.Done():
					return
				}
				mu.Lock()
				next++
				entity := fmt.Sprintf("mif%d-e%d", inFlight, next)
				mu.Unlock()
				taken := make(chan time.Time, 1)
				b.mu.Lock()
				b.waiting[entity] = taken
				b.mu.Unlock()
				ev := client.ChainEvent{EntityID: entity, Ver: 1, Op: "create", Vis: "public",
					Manifest: []byte(fmt.Sprintf(`{"entity":%q,"build":"sha256:%064d"}`, entity, next))}
				_, _, err := c.AppendEvent(ctx, chainName, ev)
				accepted := time.Now()
				if err != nil {
					b.mu.Lock()
					delete(b.waiting, entity)
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
					case at := <-taken:
						// The rate counts the takes in the measured time; the latencies, the
						// events accepted in it too (not the warm-up's backlog).
						if !at.Before(from) && at.Before(to) {
							mu.Lock()
							takenIn++
							if !accepted.Before(from) {
								latencies = append(latencies, max(at.Sub(accepted), 0))
							}
							mu.Unlock()
						}
					case <-runCtx.Done(): // still outstanding at the end: not waited for
					}
				})
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
	r := latencyRow(name, sysShardkeeper, inFlight, float64(takenIn)/o.chainDuration.Seconds(), latencies, errs).withUsage(u)
	logf("  → %.1f events posted/s, p50 %.0f ms, p99 %.0f ms from acceptance to the node taking it, errors %s%s", r.OpsPerS, r.P50ms, r.P99ms, r.errorSummary(), u)
	return r, nil
}

// serveFake starts a fake Arweave node of cfg, latency added to every answer, on a loopback
// port; stop closes both.
func serveFake(cfg fakearweave.Config, latency time.Duration) (f *fakearweave.Fake, url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", nil, err
	}
	f = fakearweave.New(cfg)
	f.SetFaults(fakearweave.Faults{Latency: latency})
	srv := &http.Server{Handler: f}
	go srv.Serve(ln)
	return f, "http://" + ln.Addr().String(), func() { srv.Close(); f.Close() }, nil
}

// writeSecrets writes each file its content, readable by its owner only.
func writeSecrets(files map[string][]byte) error {
	for path, content := range files {
		if err := os.WriteFile(path, content, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// runSequential measures the sequential uploader for the chain duration, or three events
// should that be longer.
func (b *chainBench) runSequential(ctx context.Context, o options, rows *[]row) error {
	logf("chain on %s: %v or 3 events", sysCron, o.chainDuration)
	gw := arweave.NewClient(b.url, nil)
	var latencies []time.Duration
	errs := map[string]int{}
	prev := chain.Link{}
	failed := 0
	start := time.Now()
	for n := 1; time.Since(start) < o.chainDuration || len(latencies) < 3; n++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		t0 := time.Now()
		ev := chain.Event{EntityID: "cron-" + strconv.Itoa(n), Ver: 1, Op: "create", Vis: "public", Manifest: []byte(`{"n":` + strconv.Itoa(n) + `}`)}
		if err := ev.Normalize(); err != nil {
			return err
		}
		tx, err := b.cronUpload(ctx, gw, &ev, prev)
		if err != nil {
			errs[err.Error()]++
			if failed++; failed > 10 {
				return fmt.Errorf("sequential uploader: %d uploads failed, the last: %v", failed, err)
			}
			continue
		}
		latencies = append(latencies, time.Since(t0))
		prev = chain.Link{Seq: prev.Seq + 1, TxID: tx.IDString(), CID: ev.CID}
	}
	r := latencyRow(chainWorkload(1), sysCron, 1, float64(len(latencies))/time.Since(start).Seconds(), latencies, errs)
	logf("  → %.2f events posted/s, p50 %.0f ms, errors %s", r.OpsPerS, r.P50ms, r.errorSummary())
	*rows = append(*rows, r)
	return nil
}

// cronUpload is one event of the sequential uploader: anchor, price, sign, post.
func (b *chainBench) cronUpload(ctx context.Context, gw *arweave.Client, ev *chain.Event, prev chain.Link) (*arweave.Tx, error) {
	anchor, err := gw.Anchor(ctx)
	if err != nil {
		return nil, err
	}
	data, tags := chain.Payload(chainName+"-cron", ev, prev)
	reward, err := gw.Price(ctx, len(data))
	if err != nil {
		return nil, err
	}
	tx := arweave.NewTx(data, tags)
	tx.LastTx, tx.Reward = anchor, reward
	if err := tx.Sign(b.wallet); err != nil {
		return nil, err
	}
	return tx, gw.Post(ctx, tx)
}

// printChain prints the chain rows side by side: 256 posts in flight against one and against
// the sequential uploader, and the throughput goal.
func printChain(w io.Writer, rows []row, latency time.Duration, window int) {
	find := func(workload, system string) (row, bool) {
		for _, r := range rows {
			if r.Workload == workload && r.System == system {
				return r, true
			}
		}
		return row{}, false
	}
	cron, cronOK := find(chainWorkload(1), sysCron)
	one, oneOK := find(chainWorkload(1), sysShardkeeper)
	full, fullOK := find(chainWorkload(256), sysShardkeeper)
	if !fullOK {
		return
	}
	fmt.Fprintf(w, "\nattestation chain (fake Arweave, a block every %v, %v added to every answer), events posted per second:\n", chainBlock, latency)
	if cronOK && cron.OpsPerS > 0 {
		fmt.Fprintf(w, "  max-in-flight 256: shardkeeper %.1f/s vs a sequential uploader %.2f/s: %.0f×\n", full.OpsPerS, cron.OpsPerS, full.OpsPerS/cron.OpsPerS)
	}
	if oneOK {
		fmt.Fprintf(w, "  max-in-flight 1: %.2f/s\n", one.OpsPerS)
	}
	fmt.Fprintf(w, "  from acceptance to the node taking the transaction: p50 %.0f ms, p99 %.0f ms (%d events outstanding)\n", full.P50ms, full.P99ms, window)
	verdict := map[bool]string{true: "met", false: "NOT met"}
	fmt.Fprintf(w, "goal: ≥ 100 events/s anchored at %v latency: %.1f/s — %s\n", latency, full.OpsPerS, verdict[full.OpsPerS >= 100])
}
