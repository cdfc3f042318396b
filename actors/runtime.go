// Package actors is the virtual-actor runtime: activation of (kind, id) on its partition's
// leader, one message at a time per activation, storage transactions, write coalescing into
// Raft commands, the output gate, durable alarms, effects on the outside world after commit,
// and passivation. Consensus is behind the Replicator interface; storage reads go to the
// node's persistence.Store.
package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/shardkeeper/shardkeeper/persistence"
)

// Options configure a Runtime. Zero values take the defaults noted.
type Options struct {
	Store      *persistence.Store // required
	Replicator Replicator         // required
	Partitions int                // required: P
	// Groups is G, the Raft groups the partitions are spread over (persistence.Layout); 0:
	// one per partition.
	Groups int
	// System is the protoactor system to spawn activations in; a new one if nil.
	System     *actor.ActorSystem
	Registerer prometheus.Registerer // metrics; a private registry if nil
	Logger     *slog.Logger

	RequestTimeout   time.Duration // default deadline of a call: 5s
	IdleTimeout      time.Duration // passivate after this long without messages: 2m
	MaxBatchMessages int           // messages per Raft command at most: 1024
	AlarmBackoff     time.Duration // first retry delay of a failed alarm, doubling: 2s
	MaxAlarmRetries  int           // failed retries before an alarm is parked: 6
	// MaxEffects bounds the effect functions running at once on this node: 1024. It protects
	// the node (goroutines, sockets, the outside services) from a flood of effects. A quarter
	// of it is reserved, in equal shares, to the kinds (see effectReserve), so that a kind
	// flooding effects cannot starve another of slots.
	MaxEffects int
	// MaxEffectsPerActor bounds the effect functions of one activation running at once: 16
	// (Kind.MaxEffects overrides it for a kind).
	// It keeps one busy actor from taking every slot of MaxEffects. Effects beyond either
	// bound wait, in the order their commits completed, without holding up any mailbox.
	MaxEffectsPerActor int
	Clock              func() time.Time
}

// Runtime hosts the activations of this node. It is safe for concurrent use.
type Runtime struct {
	opts    Options
	store   *persistence.Store
	repl    Replicator
	system  *actor.ActorSystem
	logger  *slog.Logger
	metrics *metrics
	kinds   map[string]*kindEntry
	parts   []*partition
	// groupsMu guards groups: the Raft groups this node knows, by id (Regroup adds those
	// splits create).
	groupsMu sync.RWMutex
	groups   map[uint32]*group
	// unheld holds the partitions no group holds here (Regroup); it is never led.
	unheld *group
	// regroupMu serializes Regroup.
	regroupMu sync.Mutex
	// closed is set when Close starts: a group created after it is born closed.
	closed atomic.Bool
	// dispatcher runs the activations' mailboxes on reused goroutines.
	dispatcher *dispatcher
	// live counts activations spawned and not yet stopped, so Close can wait for them.
	live sync.WaitGroup
	// effectSlots holds one token per running effect function that holds a slot of the shared
	// pool: MaxEffects less every kind's reserve (kindEntry.effectSlots).
	effectSlots chan struct{}
	// effectWorkers counts the goroutines running effects, so Close can wait for them.
	effectWorkers sync.WaitGroup
}

type kindEntry struct {
	Kind
	mailbox prometheus.Gauge // shardkeeper_actor_mailbox_messages of this kind, resolved once
	effects *effectMetrics   // the effect instruments of this kind, resolved once
	// effectSlots holds one token per running effect function of this kind that holds one of
	// its reserved slots (nil when the kinds reserve none, see effectReserve).
	effectSlots chan struct{}
}

// effectReserve is how many of maxEffects slots each of kinds kinds reserves: a quarter of
// them, shared equally (none when that leaves a kind less than one).
//
// The invariant: at most maxEffects effects run on the node (the reserves plus the shared
// pool), and whatever the other kinds run, every kind can start effectReserve of its own at
// once — one kind holds at most its reserve and the shared pool, maxEffects less the other
// kinds' reserves. A reserve per kind, rather than a cap on each, keeps the guarantee however
// many kinds flood at once; a quarter keeps most slots for whichever kind needs them, at the
// price of idling the reserves of kinds that run no effects (most kinds have none).
func effectReserve(maxEffects, kinds int) int {
	if kinds == 0 {
		return 0
	}
	return maxEffects / (4 * kinds)
}

// New creates a runtime for the given kinds. No partition is led until SetLeader says so.
func New(opts Options, kinds ...Kind) (*Runtime, error) {
	if opts.Store == nil || opts.Replicator == nil || opts.Partitions <= 0 {
		return nil, fmt.Errorf("actors: Store, Replicator and Partitions are required")
	}
	layout := persistence.Layout{Partitions: opts.Partitions, Groups: opts.Groups}
	if err := layout.Validate(); err != nil {
		return nil, fmt.Errorf("actors: %w", err)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&opts.RequestTimeout, 5*time.Second)
	def(&opts.IdleTimeout, 2*time.Minute)
	def(&opts.AlarmBackoff, 2*time.Second)
	if opts.MaxBatchMessages <= 0 {
		opts.MaxBatchMessages = 1024
	}
	if opts.MaxAlarmRetries <= 0 {
		opts.MaxAlarmRetries = 6
	}
	if opts.MaxEffects <= 0 {
		opts.MaxEffects = 1024
	}
	if opts.MaxEffectsPerActor <= 0 {
		opts.MaxEffectsPerActor = 16
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	if opts.System == nil {
		opts.System = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
			return opts.Logger.With("component", "protoactor")
		}))
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("actors: register metrics: %w", err)
	}
	reserve := effectReserve(opts.MaxEffects, len(kinds))
	r := &Runtime{opts: opts, store: opts.Store, repl: opts.Replicator, system: opts.System,
		logger: opts.Logger, metrics: m, kinds: map[string]*kindEntry{}, groups: map[uint32]*group{}, dispatcher: newDispatcher(256),
		effectSlots: make(chan struct{}, opts.MaxEffects-reserve*len(kinds))}
	for _, k := range kinds {
		if err := k.validate(); err != nil {
			return nil, fmt.Errorf("actors: %w", err)
		}
		if _, dup := r.kinds[k.Name]; dup {
			return nil, fmt.Errorf("actors: kind %q registered twice", k.Name)
		}
		e := &kindEntry{Kind: k, mailbox: m.mailbox.WithLabelValues(k.Name), effects: m.effectsOf(k.Name)}
		if reserve > 0 {
			e.effectSlots = make(chan struct{}, reserve)
		}
		r.kinds[k.Name] = e
	}
	for p := range opts.Partitions {
		r.parts = append(r.parts, newPartition(r, uint32(p)))
	}
	r.unheld = newGroup(r, persistence.Group{ID: ^uint32(0)})
	r.Regroup(func() []persistence.Group {
		spans := make([]persistence.Group, layout.Count())
		for g := range spans {
			spans[g] = layout.Group(uint32(g))
		}
		return spans
	})
	return r, nil
}

// group returns the runtime's state for Raft group id, created on first use.
func (r *Runtime) group(id uint32, span persistence.Group) *group {
	r.groupsMu.RLock()
	g := r.groups[id]
	r.groupsMu.RUnlock()
	if g != nil {
		return g
	}
	r.groupsMu.Lock()
	defer r.groupsMu.Unlock()
	if g = r.groups[id]; g == nil {
		g = newGroup(r, span)
		if r.closed.Load() {
			g.close()
		}
		r.groups[id] = g
	}
	return g
}

// allGroups returns every group the runtime knows.
func (r *Runtime) allGroups() []*group {
	r.groupsMu.RLock()
	defer r.groupsMu.RUnlock()
	out := make([]*group, 0, len(r.groups))
	for _, g := range r.groups {
		out = append(out, g)
	}
	return out
}

// Regroup gives each partition to the Raft group that holds it on this node, as spans (each
// group's id and range) say (persistence.Holders: where ranges overlap, the one starting
// later); a partition no span covers is held by none and refuses calls. A partition that
// moves stops on this node at once; calls for it are refused (ErrNotApplied, so they go where
// it is led now) until its new group is led here and its Barrier passed. spans is read under the runtime's regroup lock, so
// concurrent calls apply one after the other and the last one applies the newest ranges.
func (r *Runtime) Regroup(spans func() []persistence.Group) {
	r.regroupMu.Lock()
	defer r.regroupMu.Unlock()
	all := spans()
	groups := make(map[uint32]*group, len(all))
	for _, s := range all {
		groups[s.ID] = r.group(s.ID, s)
	}
	for p, id := range persistence.Holders(all, len(r.parts)) {
		g := r.unheld
		if id != persistence.NoGroup {
			g = groups[id]
		}
		part := r.parts[p]
		if from := part.grp.Load(); from != g {
			if from != nil {
				from.release(part)
			}
			g.take(part)
		}
	}
}

// SetLeader tells the runtime that this node gained or lost the leadership of Raft group g,
// and so of each of its partitions. On gaining it, the partitions open once one Barrier of
// the group has applied every committed entry; on losing it, their activations stop, their
// held replies fail with ErrUnavailable, and calls, those waiting for readiness included,
// fail with ErrNotApplied until the leadership returns. Calls for one group must come in the
// order of the changes (cluster.Host makes them from one goroutine per group).
func (r *Runtime) SetLeader(g uint32, leader bool) {
	r.group(g, persistence.Group{ID: g}).setLeader(leader)
}

// Ready reports whether partition p accepts messages on this node.
func (r *Runtime) Ready(p uint32) bool {
	part := r.parts[p]
	part.mu.Lock()
	defer part.mu.Unlock()
	return part.ready
}

// Call sends req to the actor (kind, id) and waits for its reply, which arrives only after
// the writes it depends on have committed. The deadline is ctx's, or RequestTimeout from now.
// Errors: the handler's own error; ErrNotApplied (wrapped in ErrUnavailable) at once after
// Raft reported that this node does not lead the partition, and at the deadline while it is
// not ready here otherwise (no report yet, or the Barrier after gaining the leadership);
// ErrUnavailable when the commit does not finish in time or fails; ErrUnknownKind.
func (r *Runtime) Call(ctx context.Context, kind, id string, req Request) ([]byte, error) {
	k, ok := r.kinds[kind]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownKind, kind)
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		var cancel context.CancelFunc
		deadline = r.opts.Clock().Add(r.opts.RequestTimeout)
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	// The deadline passing is the runtime's outcome, told apart from the caller giving up.
	expired := func() bool { return errors.Is(ctx.Err(), context.DeadlineExceeded) }

	env := &envelope{req: req, deadline: deadline, reply: make(chan result, 1)}
	part := r.parts[PartitionOf(kind, id, len(r.parts))]
	for {
		wait, err := part.deliver(k, id, env)
		if err != nil {
			return nil, err
		}
		if wait == nil {
			break
		}
		select {
		case <-wait:
		case <-ctx.Done():
			if expired() {
				return nil, NotApplied("partition %d has no leader on this node", part.id)
			}
			return nil, fmt.Errorf("%w: %v", ErrUnavailable, ctx.Err())
		}
	}
	select {
	case res := <-env.reply:
		return res.body, res.err
	case <-ctx.Done():
		if expired() {
			return nil, Unavailable("commit did not complete before the deadline")
		}
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, ctx.Err())
	}
}

// Close stops every activation and scheduler, cancels every running effect, and waits (up to
// 10 s) until no handler or effect function runs any more, so that storage can be closed after
// it. Pending replies fail with ErrUnavailable.
func (r *Runtime) Close() {
	r.closed.Store(true)
	for _, g := range r.allGroups() {
		g.close()
	}
	r.unheld.close()
	stopped := make(chan struct{})
	go func() {
		r.live.Wait()
		// Every activation has stopped, so every effect set is closed and no worker starts any
		// more: waiting for the workers cannot race with their Add.
		r.effectWorkers.Wait()
		// Nor does any batch get submitted: once the commands in flight end, nothing reaches
		// the replicator (and the store under it, which the caller may close next).
		for _, g := range r.allGroups() {
			g.proposer.waitIdle()
		}
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		r.logger.Error("activations or effects still running 10s after close")
	}
	r.dispatcher.close()
}
