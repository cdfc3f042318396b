// Package load is a closed-loop load generator: N clients each run one operation after
// another for a warm-up and then a measured window; it reports completed operations per
// second and latency percentiles of the operations that completed inside the window.
package load

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"
)

// Op is one operation of one client. It runs on that client's goroutine only, so it may keep
// per-client state (a connection, a counter) without locking. A non-nil error counts as a
// failed operation; its latency is not recorded.
type Op func(ctx context.Context) error

// Config is one run.
type Config struct {
	Warmup   time.Duration // operations completing before the window are not measured
	Duration time.Duration // the measured window
	// OpTimeout bounds one operation (0: none beyond the run's context).
	OpTimeout time.Duration
	// Classify names an error for the error counts (nil: every error is "error").
	Classify func(error) string
}

// Result is the outcome of a run.
type Result struct {
	Clients   int
	Ops       int            // successful operations completed inside the window
	OpsPerSec float64        // Ops / the window
	P50, P99  time.Duration  // latency percentiles of those operations
	Errors    map[string]int // failed operations of the whole run (warm-up included), by class
}

// ErrorCount is the number of failed operations.
func (r Result) ErrorCount() int {
	n := 0
	for _, c := range r.Errors {
		n += c
	}
	return n
}

// Run runs ops[i] as client i, all concurrently, for cfg.Warmup then cfg.Duration, and
// waits for every client's last operation. An operation is measured when it completes inside
// the window. ctx ends the run early (the result then covers what was measured).
func Run(ctx context.Context, cfg Config, ops []Op) Result {
	start := time.Now()
	windowStart := start.Add(cfg.Warmup)
	windowEnd := windowStart.Add(cfg.Duration)
	ctx, cancel := context.WithDeadline(ctx, windowEnd)
	defer cancel()

	type clientResult struct {
		lat    []time.Duration
		errors map[string]int
	}
	results := make([]clientResult, len(ops))
	var wg sync.WaitGroup
	for i, op := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := clientResult{errors: map[string]int{}}
			for ctx.Err() == nil {
				opCtx, opCancel := ctx, context.CancelFunc(func() {})
				if cfg.OpTimeout > 0 {
					// Detached from the run's deadline, so the last operation finishes
					// instead of failing when the window closes.
					opCtx, opCancel = context.WithTimeout(context.WithoutCancel(ctx), cfg.OpTimeout)
				}
				t0 := time.Now()
				err := op(opCtx)
				t1 := time.Now()
				opCancel()
				if err != nil {
					if ctx.Err() != nil && t1.After(windowEnd) {
						break // cut short by the end of the run, not a failure
					}
					class := "error"
					if cfg.Classify != nil {
						class = cfg.Classify(err)
					}
					res.errors[class]++
					continue
				}
				if !t1.Before(windowStart) && t1.Before(windowEnd) {
					res.lat = append(res.lat, t1.Sub(t0))
				}
			}
			results[i] = res
		}()
	}
	wg.Wait()

	var all []time.Duration
	out := Result{Clients: len(ops), Errors: map[string]int{}}
	for _, r := range results {
		all = append(all, r.lat...)
		for k, v := range r.errors {
			out.Errors[k] += v
		}
	}
	slices.Sort(all)
	out.Ops = len(all)
	window := min(time.Since(windowStart), cfg.Duration)
	if window > 0 {
		out.OpsPerSec = float64(out.Ops) / window.Seconds()
	}
	out.P50, out.P99 = Percentile(all, 0.50), Percentile(all, 0.99)
	return out
}

// Percentile is the nearest-rank q-quantile (0 < q ≤ 1) of sorted latencies; 0 when empty.
func Percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
