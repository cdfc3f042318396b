package actors

import "context"

// Caller runs a request on an actor wherever its partition is led: the Runtime calls the
// actors of this node, the cluster's router those of any node (forwarding to the leader of
// the actor's partition). Services hold one to reach their own actors and each other's.
type Caller interface {
	Call(ctx context.Context, kind, id string, req Request) ([]byte, error)
}

var _ Caller = (*Runtime)(nil)
