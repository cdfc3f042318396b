package crash

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/shardkeeper/shardkeeper/test/proc"
)

// Messages a process on the network sends to a node's actor remoting port — calls protoactor
// leaves unimplemented, a batch with an unknown serializer, out-of-range indexes, a Stop for
// the router — are refused: the node neither crashes nor loses its router, and serves as
// before.
func TestForgedRemoteMessagesAreRefused(t *testing.T) {
	n := proc.StartReady(t, proc.Config{Bin: proc.Build(t, "./cmd/shardkeeper"), Command: []string{"serve"},
		Flags: []string{"--partitions", "4"}})
	conn, err := grpc.Dial(n.RemoteAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := remote.NewRemotingClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	if _, err := client.ListProcesses(ctx, &remote.ListProcessesRequest{}); err == nil {
		t.Error("ListProcesses answered")
	}
	if _, err := client.GetProcessDiagnostics(ctx, &remote.GetProcessDiagnosticsRequest{}); err == nil {
		t.Error("GetProcessDiagnostics answered")
	}
	router := &actor.PID{Address: n.RemoteAddr, Id: "router"}
	for name, b := range map[string]*remote.MessageBatch{
		"unknown serializer": {TypeNames: []string{"shardkeeper.route.Forward"}, Targets: []*actor.PID{router},
			Envelopes: []*remote.MessageEnvelope{{SerializerId: 77, MessageData: []byte{1}}}},
		"type index out of range": {TypeNames: []string{}, Targets: []*actor.PID{router},
			Envelopes: []*remote.MessageEnvelope{{TypeId: 5}}},
		"target index out of range": {TypeNames: []string{"shardkeeper.route.Forward"},
			Envelopes: []*remote.MessageEnvelope{{Target: 9}}},
		"stop the router": {TypeNames: []string{"actor.Stop"}, Targets: []*actor.PID{router},
			Envelopes: []*remote.MessageEnvelope{{}}},
	} {
		stream, err := client.Receive(ctx)
		if err != nil {
			t.Fatalf("%s: open the stream: %v", name, err)
		}
		if err := stream.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: b}}); err != nil {
			t.Fatalf("%s: send: %v", name, err)
		}
		if _, err := stream.Recv(); err == nil || !strings.Contains(err.Error(), "PermissionDenied") {
			t.Errorf("%s: the stream answered %v, want PermissionDenied", name, err)
		}
	}

	// The node is alive and its router serves: a request is forwarded by the router actor
	// locally too (one node), so a stopped router would fail it.
	if !n.Running() {
		t.Fatal("the node died")
	}
	resp, err := http.Post(n.URL("/v1/nonces"), "application/json", strings.NewReader(`{"org_id":"acme"}`))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("after the forged messages: %v %v", resp, err)
	}
	resp.Body.Close()
}
