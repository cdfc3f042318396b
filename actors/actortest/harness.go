// Package actortest runs actor kinds in tests: a Harness (the real runtime over an in-memory
// replicator and a real Pebble store), a fake Clock, a Gated replicator that holds commits until
// the test releases them, and State, an actor's committed storage read back from the store.
// Every service's tests and the runtime's own use it.
package actortest

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/persistence"
	"github.com/shardkeeper/shardkeeper/test/await"
)

// Partitions is the number of partitions of a Harness, spread over Groups Raft groups (two
// partitions each), so that commands carry the batches of several partitions.
const (
	Partitions = 4
	Groups     = 2
)

// Layout is a Harness's map of partitions to groups.
var Layout = persistence.Layout{Partitions: Partitions, Groups: Groups}

// Options configure a Harness.
type Options struct {
	// Runtime tunes the runtime (RequestTimeout, IdleTimeout, AlarmBackoff, MaxAlarmRetries,
	// MaxEffects, MaxEffectsPerActor, Clock); the harness sets Store, Replicator, Partitions,
	// Groups, Registerer and Logger.
	Runtime actors.Options
	// Wrap, when set, puts a replicator of the test's (a Gated one, say) in front of the
	// in-memory one.
	Wrap func(*actors.MemReplicator) actors.Replicator
}

// Harness is one runtime over actors.MemReplicator and a real Pebble store, leading every
// partition. Besides the test's kinds it runs one of its own (see Wake).
type Harness struct {
	t    testing.TB
	opts Options

	Store   *persistence.Store
	Mem     *actors.MemReplicator
	Runtime *actors.Runtime
	// Metrics is the runtime's registry; Restart replaces it with a fresh one.
	Metrics *prometheus.Registry
}

// Logger logs errors only, to stderr: what a test's runtime, store and cluster log.
func Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

// New starts a harness running kinds on a fresh store. It is closed when the test ends.
func New(t testing.TB, o Options, kinds ...actors.Kind) *Harness {
	t.Helper()
	store, err := persistence.Open(t.TempDir(), Logger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	mem, err := actors.NewMemReplicator(store, Layout)
	if err != nil {
		t.Fatal(err)
	}
	h := &Harness{t: t, opts: o, Store: store, Mem: mem}
	h.Restart(kinds...)
	return h
}

// Restart closes the running runtime and starts a new one on the same store, running kinds
// (a restart with a new configuration), with fresh metrics.
func (h *Harness) Restart(kinds ...actors.Kind) {
	h.t.Helper()
	if h.Runtime != nil {
		h.Runtime.Close()
	}
	opts := h.opts.Runtime
	h.Metrics = prometheus.NewRegistry()
	opts.Store, opts.Partitions, opts.Groups, opts.Registerer, opts.Logger = h.Store, Partitions, Groups, h.Metrics, Logger()
	opts.Replicator = h.Mem
	if h.opts.Wrap != nil {
		opts.Replicator = h.opts.Wrap(h.Mem)
	}
	rt, err := actors.New(opts, append(kinds, wakeKind)...)
	if err != nil {
		h.t.Fatal(err)
	}
	h.Runtime = rt
	h.t.Cleanup(rt.Close)
	for g := range uint32(Groups) {
		rt.SetLeader(g, true)
	}
	WaitReady(h.t, rt, Partitions)
}

// WaitReady waits until the first n partitions of rt accept messages.
func WaitReady(t testing.TB, rt *actors.Runtime, n int) {
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

// Failover drops and regains the leadership of every group: activations restart and every
// partition's alarm scheduler rescans its index with the current clock.
func (h *Harness) Failover() {
	h.t.Helper()
	for g := range uint32(Groups) {
		h.Runtime.SetLeader(g, false)
		h.Runtime.SetLeader(g, true)
	}
	WaitReady(h.t, h.Runtime, Partitions)
}

// Call sends one message. Its context has no deadline, so the runtime takes RequestTimeout
// from its own (possibly fake) clock.
func (h *Harness) Call(kind, id, method string, body []byte) ([]byte, error) {
	return h.Runtime.Call(context.Background(), kind, id, actors.Request{Method: method, Body: body})
}

// MustCall is Call failing the test on any error.
func (h *Harness) MustCall(kind, id, method string, body []byte) []byte {
	h.t.Helper()
	return MustCall(h.t, h.Runtime, kind, id, method, body)
}

// MustCall sends one message to rt, failing t on any error.
func MustCall(t testing.TB, rt *actors.Runtime, kind, id, method string, body []byte) []byte {
	t.Helper()
	out, err := rt.Call(context.Background(), kind, id, actors.Request{Method: method, Body: body})
	if err != nil {
		t.Fatalf("%s %s/%s: %v", method, kind, id, err)
	}
	return out
}

// CallJSON sends in, JSON-encoded, and decodes a successful reply into out (when non-nil). It
// returns the call's error as is (an *actors.Error for a domain outcome).
func (h *Harness) CallJSON(kind, id, method string, in, out any) error {
	h.t.Helper()
	body, err := json.Marshal(in)
	if err != nil {
		h.t.Fatal(err)
	}
	reply, err := h.Call(kind, id, method, body)
	if err != nil || out == nil {
		return err
	}
	if err := json.Unmarshal(reply, out); err != nil {
		h.t.Fatalf("%s %s/%s: decode %s: %v", method, kind, id, reply, err)
	}
	return nil
}

// Partition is the partition of the actor (kind, id).
func (h *Harness) Partition(kind, id string) uint32 { return actors.PartitionOf(kind, id, Partitions) }

// KeyCount counts the committed keys of the partition of (kind, id): every actor's there,
// alarms and index entries included.
func (h *Harness) KeyCount(kind, id string) int {
	h.t.Helper()
	n, err := h.Store.KeyCount(h.Partition(kind, id), []byte{})
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

// Metric is the value of a gathered metric of the runtime (see Metric).
func (h *Harness) Metric(name, field string, labels map[string]string) float64 {
	h.t.Helper()
	return Metric(h.t, h.Metrics, name, field, labels)
}

// Code is the outcome code of err: "" for nil (a nil *actors.Error too), the code of an
// *actors.Error, and "error: " and the text of any other error, so that a test expecting a
// code (or none) fails on an error that is not an outcome.
func Code(err error) string {
	var e *actors.Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &e):
		if e == nil {
			return ""
		}
		return e.Code
	}
	return "error: " + err.Error()
}
