package cluster

import (
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
)

// What a peer may send: the router's messages, as protobuf, with every index in range.
func TestCheckBatch(t *testing.T) {
	const self = "a:1"
	router := &actor.PID{Address: self, Id: "router"}
	future := &actor.PID{Address: self, Id: "future$b"}
	batchTo := func(to *actor.PID, types []string, e *remote.MessageEnvelope) *remote.MessageBatch {
		return &remote.MessageBatch{TypeNames: types, Targets: []*actor.PID{to}, Senders: []*actor.PID{router}, Envelopes: []*remote.MessageEnvelope{e}}
	}
	batch := func(types []string, e *remote.MessageEnvelope) *remote.MessageBatch {
		if types[0] == "shardkeeper.route.Forward" || strings.HasPrefix(types[0], "actor.S") || strings.HasPrefix(types[0], "actor.W") {
			return batchTo(router, types, e)
		}
		return batchTo(future, types, e)
	}
	forward := []string{"shardkeeper.route.Forward"}
	for _, c := range []struct {
		name string
		b    *remote.MessageBatch
		want string // "" accepted, else part of the error
	}{
		{"a forward", batch(forward, &remote.MessageEnvelope{TypeId: 0, Target: 0, Sender: 1}), ""},
		{"a reply", batch([]string{"shardkeeper.route.ForwardReply"}, &remote.MessageEnvelope{}), ""},
		{"a dead letter answer", batch([]string{"actor.DeadLetterResponse"}, &remote.MessageEnvelope{}), ""},
		{"a system message", batch([]string{"actor.Stop"}, &remote.MessageEnvelope{}), "not accepted"},
		{"a watch", batch([]string{"actor.Watch"}, &remote.MessageEnvelope{}), "not accepted"},
		{"another serializer", batch(forward, &remote.MessageEnvelope{SerializerId: 99}), "serializer"},
		{"JSON", batch(forward, &remote.MessageEnvelope{SerializerId: 1}), "serializer"},
		{"type out of range", batch(forward, &remote.MessageEnvelope{TypeId: 3}), "type index"},
		{"negative type", batch(forward, &remote.MessageEnvelope{TypeId: -1}), "type index"},
		{"target out of range", batch(forward, &remote.MessageEnvelope{Target: 1}), "target index"},
		{"sender out of range", batch(forward, &remote.MessageEnvelope{Sender: 2}), "sender index"},
		{"no targets", &remote.MessageBatch{TypeNames: forward, Envelopes: []*remote.MessageEnvelope{{}}}, "target index"},
		{"a forward to relay elsewhere", batchTo(&actor.PID{Address: "b:2", Id: "router"}, forward, &remote.MessageEnvelope{}), "may not be sent"},
		{"a forward to a future", batchTo(future, forward, &remote.MessageEnvelope{}), "may not be sent"},
		{"a reply to the router", batchTo(router, []string{"shardkeeper.route.ForwardReply"}, &remote.MessageEnvelope{}), "may not be sent"},
		{"a dead letter answer to another process", batchTo(&actor.PID{Address: self, Id: "partition-3"}, []string{"actor.DeadLetterResponse"}, &remote.MessageEnvelope{}), "may not be sent"},
	} {
		err := checkBatch(c.b, self)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error about %q", c.name, err, c.want)
		}
	}
}
