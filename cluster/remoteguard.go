package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/shardkeeper/shardkeeper/cluster/routepb"
)

// Actor remoting (protoactor's gRPC server) takes from a peer whatever it sends, and trusts
// it: a message of any registered type to any process (system messages such as Stop or Watch
// included), with indexes into its batch's tables that it does not check, through a
// serializer id it does not check either — a malformed batch panicked the node, and a forged
// Stop killed the router. RemoteGuard is what a node lets through.
//
// A peer may only send the router's request (routepb.Forward) to this node's router, and to
// this node's futures (the requests it forwarded) their reply (ForwardReply) or protoactor's
// answer that the target is gone (actor.DeadLetterResponse, which fails a waiting request
// fast); serialized as protobuf, with every index in range. A target on another address would
// make this node relay the message there. A batch with anything else ends the peer's stream
// (PermissionDenied). A panic in anything the server runs for a peer is recovered, logged and
// answered Internal.
//
// Peers are not authenticated here (that is mutual TLS's job): a process that reaches the
// port can still send a well-formed Forward, or guess a future's id.

// remoteTypes are the type names a peer may send, with the kind of process each may target.
var remoteTypes = map[string]func(id string) bool{
	string(proto.MessageName(&routepb.Forward{})):      func(id string) bool { return id == routerName },
	string(proto.MessageName(&routepb.ForwardReply{})): isFuture,
	"actor.DeadLetterResponse":                         isFuture,
}

// isFuture reports whether id names a protoactor future (actor.NewFuture: "future" + id).
func isFuture(id string) bool { return strings.HasPrefix(id, "future") }

// protoSerializer is protoactor's serializer id of protobuf messages.
const protoSerializer = 0

// checkBatch reports what in b a peer may not send to the node at self, or nil.
func checkBatch(b *remote.MessageBatch, self string) error {
	for i, e := range b.Envelopes {
		switch {
		case e.SerializerId != protoSerializer:
			return fmt.Errorf("envelope %d: serializer %d", i, e.SerializerId)
		case e.TypeId < 0 || int(e.TypeId) >= len(b.TypeNames):
			return fmt.Errorf("envelope %d: type index %d of %d", i, e.TypeId, len(b.TypeNames))
		case remoteTypes[b.TypeNames[e.TypeId]] == nil:
			return fmt.Errorf("envelope %d: type %q is not accepted from peers", i, b.TypeNames[e.TypeId])
		case e.Target < 0 || int(e.Target) >= len(b.Targets) || b.Targets[e.Target] == nil:
			return fmt.Errorf("envelope %d: target index %d of %d", i, e.Target, len(b.Targets))
		case e.Sender < 0 || int(e.Sender) > len(b.Senders) || e.Sender > 0 && b.Senders[e.Sender-1] == nil:
			return fmt.Errorf("envelope %d: sender index %d of %d", i, e.Sender, len(b.Senders))
		}
		target := b.Targets[e.Target]
		if target.Address != self || !remoteTypes[b.TypeNames[e.TypeId]](target.Id) {
			return fmt.Errorf("envelope %d: %s may not be sent to %s/%s", i, b.TypeNames[e.TypeId], target.Address, target.Id)
		}
	}
	return nil
}

// RemoteGuard returns the gRPC server options of actor remoting that apply the rules above;
// self returns this node's remoting address (known once remoting started).
func RemoteGuard(logger *slog.Logger, self func() string) []grpc.ServerOption {
	recovered := func(method string, err *error) {
		if p := recover(); p != nil {
			logger.Error("actor remoting: a peer's call panicked; refused", "method", method, "panic", p, "stack", string(debug.Stack()))
			*err = status.Error(codes.Internal, "internal error")
		}
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
			defer recovered(info.FullMethod, &err)
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
			defer recovered(info.FullMethod, &err)
			return h(srv, &guardedStream{ServerStream: ss, logger: logger, self: self})
		}),
	}
}

// guardedStream checks each message batch a peer sends before protoactor reads it.
type guardedStream struct {
	grpc.ServerStream
	logger *slog.Logger
	self   func() string
}

func (s *guardedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if rm, ok := m.(*remote.RemoteMessage); ok {
		if b := rm.GetMessageBatch(); b != nil {
			if err := checkBatch(b, s.self()); err != nil {
				s.logger.Warn("actor remoting: refused a peer's message batch; its stream ends", "reason", err)
				return status.Error(codes.PermissionDenied, "message refused")
			}
		}
	}
	return nil
}
