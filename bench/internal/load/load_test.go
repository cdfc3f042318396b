package load

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 100; i++ {
		s = append(s, time.Duration(i))
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50}, {0.99, 99}, {1, 100}, {0.001, 1}} {
		if got := Percentile(s, tc.q); got != tc.want {
			t.Errorf("Percentile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if Percentile(nil, 0.5) != 0 {
		t.Error("empty percentile not 0")
	}
}

func TestRunMeasuresOnlyTheWindowAndCountsErrors(t *testing.T) {
	errBoom := errors.New("boom")
	// Client 0 succeeds with ~1 ms operations; client 1 fails every time.
	ops := []Op{
		func(ctx context.Context) error { time.Sleep(time.Millisecond); return nil },
		func(ctx context.Context) error { time.Sleep(time.Millisecond); return errBoom },
	}
	res := Run(context.Background(), Config{Warmup: 50 * time.Millisecond, Duration: 200 * time.Millisecond,
		Classify: func(err error) string { return err.Error() }}, ops)
	if res.Clients != 2 {
		t.Fatalf("clients %d", res.Clients)
	}
	// At most one operation per millisecond of the window for the one succeeding client.
	if res.Ops == 0 || res.Ops > 200 {
		t.Fatalf("ops %d, want 1..200 (one client, ≥1 ms each, 200 ms window)", res.Ops)
	}
	if res.P50 < time.Millisecond || res.P99 < res.P50 {
		t.Fatalf("p50 %v p99 %v", res.P50, res.P99)
	}
	if res.Errors["boom"] == 0 || res.ErrorCount() != res.Errors["boom"] {
		t.Fatalf("errors %v", res.Errors)
	}
	if res.OpsPerSec <= 0 || res.OpsPerSec > 1000 {
		t.Fatalf("ops/s %v", res.OpsPerSec)
	}
}
