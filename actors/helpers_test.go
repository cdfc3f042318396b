package actors_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/shardkeeper/shardkeeper/test/await"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/persistence"
)

const testPartitions = 4

type env struct {
	rt    *actors.Runtime
	store *persistence.Store
	reg   *prometheus.Registry
	mem   *actors.MemReplicator
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

// newEnv starts a runtime over MemReplicator (wrapped by wrap, if given) on a real Pebble
// store, leading every partition.
func newEnv(t testing.TB, opts actors.Options, wrap func(*actors.MemReplicator) actors.Replicator, kinds ...actors.Kind) *env {
	t.Helper()
	store, err := persistence.Open(t.TempDir(), quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	mem, err := actors.NewMemReplicator(store, testPartitions)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{store: store, reg: prometheus.NewRegistry(), mem: mem}
	opts.Store, opts.Partitions, opts.Registerer, opts.Logger = store, testPartitions, e.reg, quietLogger()
	opts.Replicator = mem
	if wrap != nil {
		opts.Replicator = wrap(mem)
	}
	if e.rt, err = actors.New(opts, kinds...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.rt.Close()
		store.Close()
	})
	for p := range uint32(testPartitions) {
		e.rt.SetLeader(p, true)
	}
	waitReady(t, e.rt, testPartitions)
	return e
}

func waitReady(t testing.TB, rt *actors.Runtime, n int) {
	t.Helper()
	await.True(t, 10*time.Second, "every partition ready", func() bool {
		for p := range uint32(n) {
			if !rt.Ready(p) {
				return false
			}
		}
		return true
	})
}

func call(t testing.TB, rt *actors.Runtime, kind, id, method string, body []byte) string {
	t.Helper()
	out, err := rt.Call(context.Background(), kind, id, actors.Request{Method: method, Body: body})
	if err != nil {
		t.Fatalf("%s %s/%s: %v", method, kind, id, err)
	}
	return string(out)
}

// metric returns a gathered metric's value: counter/gauge value, or for histograms the
// sample count (field "count") or sum ("sum").
func metric(t testing.TB, reg *prometheus.Registry, name, field string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for k, v := range labels {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == k && lp.GetValue() == v {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			total += value(m, field)
		}
	}
	return total
}

func value(m *dto.Metric, field string) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil && field == "sum":
		return m.Histogram.GetSampleSum()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	panic(fmt.Sprintf("unsupported metric %v", m))
}

// gatedReplicator holds every proposal until the test opens the gate for it, so a test can
// observe the runtime while commits are in flight.
type gatedReplicator struct {
	*actors.MemReplicator
	proposed chan uint32
	release  chan error // one value per proposal: nil commits it, an error fails it
}

func newGated(mem *actors.MemReplicator) *gatedReplicator {
	return &gatedReplicator{MemReplicator: mem, proposed: make(chan uint32, 1024), release: make(chan error)}
}

func (g *gatedReplicator) Propose(p uint32, cmd []byte) actors.Future {
	g.proposed <- p
	return &gatedFuture{g: g, p: p, cmd: cmd}
}

type gatedFuture struct {
	g    *gatedReplicator
	p    uint32
	cmd  []byte
	once sync.Once
	err  error
}

func (f *gatedFuture) Error() error {
	f.once.Do(func() {
		if f.err = <-f.g.release; f.err == nil {
			f.err = f.g.MemReplicator.Propose(f.p, f.cmd).Error()
		}
	})
	return f.err
}

var errInjected = errors.New("injected commit failure")
