package cluster

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/shardkeeper/shardkeeper/actors"
)

// fakePartitions is an in-memory partitionView: one leader for every partition, and whether
// this node leads (the router actor that serves forwarded requests asks that too).
type fakePartitions struct {
	mu       sync.Mutex
	leader   string
	isLeader bool
	watchers []func(p uint32, leader string)
}

func (f *fakePartitions) Partitions() int       { return 4 }
func (f *fakePartitions) Group(p uint32) uint32 { return p / 2 } // two partitions a group
func (f *fakePartitions) IsLeader(uint32) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.isLeader
}
func (f *fakePartitions) Leader(uint32) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leader
}
func (f *fakePartitions) WatchLeaders(fn func(p uint32, leader string)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.watchers = append(f.watchers, fn)
}

// fakeRuntime answers calls with its reply, failing the first notApplied of them as
// ErrNotApplied (leadership moved before they ran).
type fakeRuntime struct {
	calls      atomic.Int32
	notApplied int32
	reply      []byte
	err        error
}

func (f *fakeRuntime) Call(ctx context.Context, kind, id string, req actors.Request) ([]byte, error) {
	if n := f.calls.Add(1); n <= f.notApplied {
		return nil, actors.NotApplied("leadership moved")
	}
	return f.reply, f.err
}

type staticMembers []NodeMeta

func (s staticMembers) Alive() []NodeMeta { return s }

// startTestRouter runs a router in an actor system of its own. Member "b" has this system's
// address, so a request forwarded to b reaches this same router actor (as it would reach b's),
// which serves it if the partition view says this node leads.
func startTestRouter(t *testing.T, parts *fakePartitions, rt *fakeRuntime) *Router {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	members := staticMembers{
		{ID: "a", ServerID: "a@1", Remote: sys.ProcessRegistry.Address},
		{ID: "b", ServerID: "b@1", Remote: sys.ProcessRegistry.Address},
	}
	r, err := StartRouter(RouterConfig{Self: "a@1", Partitions: parts, Members: members, Runtime: rt, System: sys,
		Replicas: 2, RequestTimeout: time.Second, LeaderMovedGrace: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}

// A request for a partition led here runs in the local runtime; one refused before it ran
// (ErrNotApplied) is sent again, and its retry's answer is the answer.
func TestRouterLocalAndResendsNotApplied(t *testing.T) {
	rt := &fakeRuntime{notApplied: 2, reply: []byte(`"ok"`)}
	r := startTestRouter(t, &fakePartitions{leader: "a@1", isLeader: true}, rt)
	got, err := r.Call(context.Background(), "k", "x", actors.Request{Method: "m"})
	if err != nil || string(got) != `"ok"` {
		t.Fatalf("Call = %s, %v", got, err)
	}
	if n := rt.calls.Load(); n != 3 {
		t.Fatalf("runtime called %d times, want 3 (two refused without effect, then done)", n)
	}
}

// A request for a partition led elsewhere is forwarded to the leader's router actor, which
// runs it there; domain errors come back as they were.
func TestRouterForwards(t *testing.T) {
	rt := &fakeRuntime{err: &actors.Error{Code: "nonce_used", Message: "used"}}
	r := startTestRouter(t, &fakePartitions{leader: "b@1", isLeader: true}, rt)
	_, err := r.Call(context.Background(), "k", "x", actors.Request{Method: "m"})
	var domainErr *actors.Error
	if !errors.As(err, &domainErr) || domainErr.Code != "nonce_used" {
		t.Fatalf("Call error = %v, want the domain error nonce_used", err)
	}
	if n := rt.calls.Load(); n != 1 {
		t.Fatalf("runtime called %d times, want 1", n)
	}
}

// A forwarded request that meets a node not leading the partition is answered NOT_LEADER and
// never run; with no better hint the router waits and fails unavailable at the deadline.
func TestRouterFailsUnavailableWithoutLeader(t *testing.T) {
	rt := &fakeRuntime{reply: []byte(`"ok"`)}
	r := startTestRouter(t, &fakePartitions{leader: "b@1", isLeader: false}, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := r.Call(ctx, "k", "x", actors.Request{Method: "m"})
	if !errors.Is(err, actors.ErrUnavailable) {
		t.Fatalf("Call error = %v, want unavailable", err)
	}
	if n := rt.calls.Load(); n != 0 {
		t.Fatalf("runtime called %d times by a node that does not lead", n)
	}

	// No leader known at all, and no replica to ask but this node: unavailable too.
	r2 := startTestRouter(t, &fakePartitions{}, rt)
	r2.cfg.Members = staticMembers{{ID: "a", ServerID: "a@1"}}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	if _, err := r2.Call(ctx2, "k", "x", actors.Request{Method: "m"}); !errors.Is(err, actors.ErrUnavailable) {
		t.Fatalf("Call without any leader: %v, want unavailable", err)
	}
}

// A node that knows no leader asks a desired replica of the partition's group, not of a group
// numbered like the partition.
func TestAskReplicaOfTheGroup(t *testing.T) {
	members := staticMembers(nodes(5))
	r := &Router{cfg: RouterConfig{Partitions: &fakePartitions{}, Members: members, Replicas: 3}}
	for p := range uint32(4) {
		got, ok := r.askReplica(p, "nobody")
		want := Desired(p/2, nodes(5), 3)[0]
		if !ok || got.ID != want.ID {
			t.Fatalf("partition %d (group %d): asked %s, want %s", p, p/2, got.ID, want.ID)
		}
	}
}
