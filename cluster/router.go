package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/shardkeeper/shardkeeper/actors"
	"github.com/shardkeeper/shardkeeper/cluster/routepb"
	"github.com/shardkeeper/shardkeeper/persistence"
)

// routerName is the protoactor name of every node's router actor.
const routerName = "router"

// partitionView is what the router needs to know of partitions: who leads each (this node's
// Raft instance, or gossip for partitions not replicated here; see Directory), and changes
// of leader this node's Raft instances observe.
type partitionView interface {
	Partitions() int
	Group(p uint32) uint32 // the Raft group whose log holds partition p
	IsLeader(p uint32) bool
	Leader(p uint32) string // server id, "" if unknown
	WatchLeaders(fn func(p uint32, leader string))
}

// liveMembers is what the router needs of gossip.
type liveMembers interface {
	Alive() []NodeMeta
}

// RouterConfig configures request routing.
type RouterConfig struct {
	// Self is this node's Raft server id.
	Self       string
	Partitions partitionView
	Members    liveMembers
	Runtime    actors.Caller
	System     *actor.ActorSystem
	Replicas   int
	// RequestTimeout is the deadline of a call whose context has none.
	RequestTimeout time.Duration
	// LeaderMovedGrace is how long a request forwarded to a partition's former leader may
	// still wait after another node is observed leading the partition; 0: one second.
	LeaderMovedGrace time.Duration
	// Forwards, when set, counts the requests sent to another node to run.
	Forwards prometheus.Counter
	Logger   *slog.Logger
}

// Router sends a request to the node leading its actor's partition: locally into the
// runtime, or over protoactor remote (protobuf messages) to the leader's router actor.
//
// Leadership is Raft's, never gossip's: the leader is the one this node's Raft instance of the
// partition reports. A node that does not replicate the partition asks a desired replica,
// which answers NOT_LEADER with a hint. A NOT_LEADER answer means nothing ran, so it is
// safe to re-send; any other failure of a forwarded request has an unknown outcome and is
// returned as unavailable, never re-sent. A forwarded request whose connection is lost, or
// whose partition has been led by another node for LeaderMovedGrace, fails then, not at its
// deadline (see inflight).
//
// Why the grace: leadership also moves away from live nodes (transfers to spread leaders, a
// node shutting down), and those answer their requests at once (done, or NOT_LEADER to
// re-send); only a frozen or cut-off node leaves them waiting.
type Router struct {
	cfg      RouterConfig
	pid      *actor.PID
	inflight inflight
	sub      *eventstream.Subscription
}

// StartRouter spawns this node's router actor.
func StartRouter(cfg RouterConfig) (*Router, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := &Router{cfg: cfg}
	pid, err := cfg.System.Root.SpawnNamed(actor.PropsFromFunc(r.receive), routerName)
	if err != nil {
		return nil, fmt.Errorf("spawn router: %w", err)
	}
	r.pid = pid
	r.sub = cfg.System.EventStream.Subscribe(func(evt any) {
		if e, ok := evt.(*remote.EndpointTerminatedEvent); ok {
			for _, fut := range r.inflight.lost(e.Address) {
				cfg.System.Root.Send(fut, &connectionLost{addr: e.Address})
			}
		}
	})
	cfg.Partitions.WatchLeaders(r.leaderChanged)
	return r, nil
}

// leaderChanged fails, after the grace, the requests of partition p still waiting on another
// node than leader, if leader still leads p then (a later change decides for itself).
func (r *Router) leaderChanged(p uint32, leader string) {
	if leader == "" {
		return
	}
	grace := r.cfg.LeaderMovedGrace
	if grace <= 0 {
		grace = time.Second
	}
	time.AfterFunc(grace, func() {
		if r.cfg.Partitions.Leader(p) != leader {
			return
		}
		for _, fut := range r.inflight.movedAway(p, leader) {
			r.cfg.System.Root.Send(fut, &leaderMoved{p: p, leader: leader})
		}
	})
}

// Stop stops the router actor.
func (r *Router) Stop() {
	r.cfg.System.EventStream.Unsubscribe(r.sub)
	_ = r.cfg.System.Root.StopFuture(r.pid).Wait()
}

// leaderRetryDelay paces attempts while a partition has no known leader.
const leaderRetryDelay = 20 * time.Millisecond

// Local reports whether the actor (kind, id) would run on this node, without a network hop:
// this node leads its partition.
func (r *Router) Local(kind, id string) bool {
	return r.cfg.Partitions.IsLeader(actors.PartitionOf(kind, id, r.cfg.Partitions.Partitions()))
}

// Call runs req on actor (kind, id) wherever its partition is led. It satisfies actors.Caller.
// A request refused without effect (actors.ErrNotApplied: leadership moved before it ran) is
// sent again, to the new leader, until the deadline; one whose outcome is unknown never is.
func (r *Router) Call(ctx context.Context, kind, id string, req actors.Request) ([]byte, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.cfg.RequestTimeout)
		defer cancel()
	}
	h := r.cfg.Partitions
	self := r.cfg.Self
	p := actors.PartitionOf(kind, id, h.Partitions())
	hint := ""
	for {
		leader := h.Leader(p)
		if leader == "" {
			leader = hint
		}
		if leader == self {
			reply, err := r.cfg.Runtime.Call(ctx, kind, id, req)
			// Refused for lack of disk space here: answered at once (the reconciler hands this
			// node's leaderships away meanwhile).
			if !errors.Is(err, actors.ErrNotApplied) || errors.Is(err, persistence.ErrDiskLow) || pause(ctx) != nil {
				return reply, err
			}
			continue // leadership moved (or the activation restarted) before it ran: send again
		}
		target, ok := r.member(leader)
		if !ok {
			// No known leader: ask a desired replica other than us (it may know), or wait.
			target, ok = r.askReplica(p, self)
		}
		if !ok {
			if err := pause(ctx); err != nil {
				return nil, actors.Unavailable("partition %d has no leader: %v", p, err)
			}
			continue
		}
		if r.cfg.Forwards != nil {
			r.cfg.Forwards.Inc()
		}
		reply, err := r.forward(ctx, target, p, kind, id, req)
		if err != nil {
			return nil, err
		}
		if reply.Status != routepb.Status_NOT_LEADER {
			noteForwarded(ctx, p, target.HTTP)
			return decodeReply(reply)
		}
		if reply.LeaderHint == "" || reply.LeaderHint == target.ServerID || reply.LeaderHint == hint {
			if err := pause(ctx); err != nil {
				return nil, actors.Unavailable("partition %d has no leader: %v", p, err)
			}
		}
		hint = reply.LeaderHint
	}
}

func pause(ctx context.Context) error {
	t := time.NewTimer(leaderRetryDelay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (r *Router) member(serverID string) (NodeMeta, bool) {
	if serverID == "" {
		return NodeMeta{}, false
	}
	for _, m := range r.cfg.Members.Alive() {
		if m.ServerID == serverID {
			return m, true
		}
	}
	return NodeMeta{}, false
}

// askReplica picks a desired replica of p's group other than self, to ask for the leader.
func (r *Router) askReplica(p uint32, self string) (NodeMeta, bool) {
	for _, d := range Desired(r.cfg.Partitions.Group(p), r.cfg.Members.Alive(), r.cfg.Replicas) {
		if d.ServerID != self {
			return d, true
		}
	}
	return NodeMeta{}, false
}

func (r *Router) forward(ctx context.Context, target NodeMeta, p uint32, kind, id string, req actors.Request) (*routepb.ForwardReply, error) {
	deadline, _ := ctx.Deadline()
	timeout := time.Until(deadline)
	if timeout <= 0 {
		return nil, actors.Unavailable("request deadline passed before forwarding")
	}
	msg := &routepb.Forward{Kind: kind, Id: id, Method: req.Method, Body: req.Body, DeadlineUnixMs: deadline.UnixMilli()}
	fut := r.cfg.System.Root.RequestFuture(actor.NewPID(target.Remote, routerName), msg, timeout)
	r.inflight.add(fut.PID(), forwardTarget{addr: target.Remote, serverID: target.ServerID, p: p})
	res, err := fut.Result()
	r.inflight.remove(fut.PID())
	if err != nil {
		return nil, actors.Unavailable("forward to %s: %v (outcome unknown)", target.ID, err)
	}
	switch res := res.(type) {
	case *connectionLost:
		// Clients are told which node, not its address: addresses stay in the node's log.
		r.cfg.Logger.Debug("forward: connection lost", "node", target.ID, "addr", res.addr)
		return nil, actors.Unavailable("forward to %s: connection lost (outcome unknown)", target.ID)
	case *leaderMoved:
		return nil, actors.Unavailable("forward to %s: partition %d is led by %s now and %s did not answer (outcome unknown)",
			target.ID, res.p, res.leader, target.ID)
	}
	reply, ok := res.(*routepb.ForwardReply)
	if !ok {
		return nil, fmt.Errorf("forward to %s: unexpected reply %T", target.ID, res)
	}
	return reply, nil
}

func decodeReply(reply *routepb.ForwardReply) ([]byte, error) {
	switch reply.Status {
	case routepb.Status_OK:
		return reply.Body, nil
	case routepb.Status_DOMAIN_ERROR:
		return nil, &actors.Error{Code: reply.Code, Message: reply.Message,
			RetryAfter: time.Duration(reply.RetryAfterMs) * time.Millisecond}
	case routepb.Status_UNAVAILABLE:
		return nil, actors.Unavailable("%s", reply.Message)
	default:
		return nil, errors.New(reply.Message)
	}
}

// receive is the router actor: it runs forwarded requests if this node leads their
// partition. Each request runs on its own goroutine so that one slow actor does not hold up
// the router's mailbox.
func (r *Router) receive(c actor.Context) {
	msg, ok := c.Message().(*routepb.Forward)
	if !ok {
		return
	}
	sender := c.Sender()
	go func() {
		reply := r.serve(msg)
		if sender != nil {
			r.cfg.System.Root.Send(sender, reply)
		}
	}()
}

func (r *Router) serve(msg *routepb.Forward) *routepb.ForwardReply {
	h := r.cfg.Partitions
	p := actors.PartitionOf(msg.Kind, msg.Id, h.Partitions())
	if !h.IsLeader(p) {
		return &routepb.ForwardReply{Status: routepb.Status_NOT_LEADER, LeaderHint: h.Leader(p)}
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.UnixMilli(msg.DeadlineUnixMs))
	defer cancel()
	body, err := r.cfg.Runtime.Call(ctx, msg.Kind, msg.Id, actors.Request{Method: msg.Method, Body: msg.Body})
	var outcome *actors.Error
	switch {
	case err == nil:
		return &routepb.ForwardReply{Status: routepb.Status_OK, Body: body}
	case errors.As(err, &outcome):
		return &routepb.ForwardReply{Status: routepb.Status_DOMAIN_ERROR, Code: outcome.Code,
			Message: outcome.Message, RetryAfterMs: outcome.RetryAfter.Milliseconds()}
	case errors.Is(err, persistence.ErrDiskLow):
		// Refused here for lack of space: answered at once, not retried against this node.
		return &routepb.ForwardReply{Status: routepb.Status_UNAVAILABLE, Message: err.Error()}
	case errors.Is(err, actors.ErrNotApplied):
		// Nothing happened: the caller may send it to the new leader, as for NOT_LEADER.
		return &routepb.ForwardReply{Status: routepb.Status_NOT_LEADER, LeaderHint: h.Leader(p)}
	case errors.Is(err, actors.ErrUnavailable):
		return &routepb.ForwardReply{Status: routepb.Status_UNAVAILABLE, Message: err.Error()}
	default:
		return &routepb.ForwardReply{Status: routepb.Status_INTERNAL, Message: err.Error()}
	}
}
