package cluster

import (
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
)

// What a peer may send: the router's messages, as protobuf, with every index in range.
func TestCheckBatch(t *testing.T) {
	pid := &actor.PID{Address: "a:1", Id: "router"}
	batch := func(types []string, e *remote.MessageEnvelope) *remote.MessageBatch {
		return &remote.MessageBatch{TypeNames: types, Targets: []*actor.PID{pid}, Senders: []*actor.PID{pid}, Envelopes: []*remote.MessageEnvelope{e}}
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
	} {
		err := checkBatch(c.b)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error about %q", c.name, err, c.want)
		}
	}
}
