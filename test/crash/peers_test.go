package crash

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/shardkeeper/shardkeeper/cluster"
	"github.com/shardkeeper/shardkeeper/pki"
	"github.com/shardkeeper/shardkeeper/test/await"
	"github.com/shardkeeper/shardkeeper/test/proc"
)

// A cluster with TLS and a gossip key, attacked from the network by processes that are not
// its nodes: raw Raft RPCs (in the clear, and with a client-role certificate of the cluster
// CA), gossip members (without the key; with it but another CA's node certificate; with it and
// a client certificate) and actor remoting calls. None reaches anything: no rogue is listed or
// becomes a replica, every partition keeps its leader, and the cluster serves as before.
func TestPeerPortsRefuseOutsiders(t *testing.T) {
	key := bytes.Repeat([]byte{5}, 32)
	dir := t.TempDir()
	nodes := proc.StartCluster(t, proc.ClusterConfig{Bin: proc.Build(t, "./cmd/shardkeeper"), Command: []string{"serve"}, N: 3, TLSDir: dir,
		Flags: append(append([]string{}, fastFlags...), "--gossip-key", base64.StdEncoding.EncodeToString(key))})
	for _, n := range nodes {
		n.WaitReady(60 * time.Second)
	}
	waitSettled(t, nodes[0])
	before := clusterView(t, nodes[0])

	// Material an attacker could hold: a client certificate of the cluster CA, and node
	// certificates of its own CA.
	clientFiles, err := pki.WriteCert(dir, pki.Request{Role: pki.RoleClient, Name: "ops", Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	clientCert, err := tls.LoadX509KeyPair(clientFiles.Cert, clientFiles.Key)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := pki.WriteNodes(t.TempDir(), nil, time.Hour, "rogue-ca")
	if err != nil {
		t.Fatal(err)
	}
	withClientCert := &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{clientCert}}

	// Raft: AppendEntries with a higher term, for the real server id of a partition's leader.
	target := nodes[0]
	sid := regexp.MustCompile(`"node_id":"` + target.Config.NodeID + `","server_id":"([^"]+)"`).FindStringSubmatch(target.Output())
	if sid == nil {
		t.Fatal("no server id in the log")
	}
	for name, tc := range map[string]*tls.Config{"plain": nil, "client certificate": withClientCert} {
		trans := raft.NewNetworkTransport(&rawRaftLayer{p: 0, target: sid[1], tls: tc}, 1, 3*time.Second, io.Discard)
		var resp raft.AppendEntriesResponse
		err := trans.AppendEntries(raft.ServerID(sid[1]), raft.ServerAddress(target.RaftAddr), &raft.AppendEntriesRequest{
			RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("attacker"), Addr: []byte("attacker")}, Term: 1 << 20,
			Entries: []*raft.Log{{Index: 1 << 20, Term: 1 << 20, Type: raft.LogCommand, Data: []byte("forged")}},
		}, &resp)
		trans.Close()
		if err == nil {
			t.Errorf("raft (%s): AppendEntries answered: term %d success %v", name, resp.Term, resp.Success)
		}
	}

	// Gossip: rogue members try to join.
	start := func(id string, key []byte, peers *pki.Peers) error {
		m, err := cluster.StartMembership(cluster.MembershipConfig{
			Meta:       cluster.NodeMeta{ID: id, ServerID: id + "@x", Raft: "127.0.0.1:1", Remote: "127.0.0.1:2", HTTP: "127.0.0.1:3", Partitions: partitions},
			GossipAddr: proc.FreeAddr(t), GossipKey: key, Peers: peers, Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Shutdown() })
		return m.Join([]string{target.GossipAddr})
	}
	if err := start("rogue-nokey", nil, nil); err == nil {
		t.Error("a member without the gossip key joined")
	}
	foreignPeers, err := pki.Load(foreign["rogue-ca"], readFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := start("rogue-ca", key, foreignPeers); err == nil {
		t.Error("a member with another CA's certificate joined")
	}
	// With the key and a client certificate: the gossip stream port does not complete the
	// handshake.
	if c, err := tls.Dial("tcp", target.GossipAddr, withClientCert); err == nil {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = c.Write([]byte{'m'})
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Error("the gossip port answered a client certificate")
		}
		c.Close()
	}

	// Actor remoting: in the clear, and with the client certificate.
	for name, creds := range map[string]grpc.DialOption{
		"plain":              grpc.WithTransportCredentials(insecure.NewCredentials()),
		"client certificate": grpc.WithTransportCredentials(credentials.NewTLS(withClientCert)),
	} {
		conn, err := grpc.Dial(target.RemoteAddr, creds)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		stream, err := remote.NewRemotingClient(conn).Receive(ctx)
		if err == nil {
			stop := &remote.MessageBatch{TypeNames: []string{"actor.Stop"}, Targets: []*actor.PID{{Address: target.RemoteAddr, Id: "router"}},
				Envelopes: []*remote.MessageEnvelope{{}}}
			err = stream.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: stop}})
			if err == nil {
				_, err = stream.Recv()
			}
		}
		// Unavailable: the connection failed. (A call that gets past TLS meets the guard,
		// which answers PermissionDenied.)
		if status.Code(err) != codes.Unavailable {
			t.Errorf("remoting (%s): %v, want Unavailable", name, err)
		}
		cancel()
		conn.Close()
	}

	// Nothing changed: the same three members, every partition led, no rogue anywhere.
	time.Sleep(3 * time.Second) // past a reconciler round and a few gossip rounds
	for _, n := range nodes {
		after := clusterView(t, n)
		if len(after.Members) != 3 {
			t.Errorf("%s lists %d members: %+v", n.Config.NodeID, len(after.Members), after.Members)
		}
		for _, m := range after.Members {
			if m.State != "alive" || !strings.HasPrefix(m.NodeID, "n") {
				t.Errorf("%s lists member %+v", n.Config.NodeID, m)
			}
		}
		for i, p := range after.Partitions {
			if p.Leader == "" {
				t.Errorf("%s: partition %d has no leader", n.Config.NodeID, p.ID)
			}
			if !equalSets(p.Replicas, before.Partitions[i].Replicas) {
				t.Errorf("%s: partition %d replicas %v, were %v", n.Config.NodeID, p.ID, p.Replicas, before.Partitions[i].Replicas)
			}
		}
	}
	resp, err := http.Post(nodes[1].URL("/v1/nonces"), "application/json", strings.NewReader(`{"org_id":"acme"}`))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("after the attacks: %v %v", resp, err)
	}
	resp.Body.Close()
}

func readFile(path string) ([]byte, error) { return os.ReadFile(path) }

// rawRaftLayer dials a node's Raft port as the mux's dialers do (header, partition, server
// id), in the clear or with the TLS configuration given.
type rawRaftLayer struct {
	p      uint32
	target string
	tls    *tls.Config
}

func (l *rawRaftLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	conn, err := net.DialTimeout("tcp", string(address), timeout)
	if err != nil {
		return nil, err
	}
	if l.tls != nil {
		tc := tls.Client(conn, l.tls)
		_ = tc.SetDeadline(time.Now().Add(timeout))
		if err := tc.Handshake(); err != nil {
			conn.Close()
			return nil, err
		}
		conn = tc
	}
	hdr := binary.BigEndian.AppendUint32([]byte{'R'}, l.p)
	hdr = append(append(hdr, byte(len(l.target))), l.target...)
	if _, err := conn.Write(hdr); err != nil {
		conn.Close()
		return nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, nil
}
func (l *rawRaftLayer) Accept() (net.Conn, error) { select {} }
func (l *rawRaftLayer) Close() error              { return nil }
func (l *rawRaftLayer) Addr() net.Addr            { return &net.TCPAddr{} }

type clusterState struct {
	Members []struct {
		NodeID string `json:"node_id"`
		State  string `json:"state"`
	} `json:"members"`
	Partitions []struct {
		ID       int      `json:"id"`
		Group    uint32   `json:"group"`
		Leader   string   `json:"leader"`
		Replicas []string `json:"replicas"`
	} `json:"partitions"`
}

func clusterView(t *testing.T, n *proc.Node) clusterState {
	t.Helper()
	resp, err := http.Get(n.URL("/v1/cluster"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s clusterState
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// waitSettled waits until every partition has a leader and three replicas.
func waitSettled(t *testing.T, n *proc.Node) {
	t.Helper()
	await.True(t, 60*time.Second, "every partition led with three replicas", func() bool {
		s := clusterView(t, n)
		for _, p := range s.Partitions {
			if p.Leader == "" || len(p.Replicas) != 3 {
				return false
			}
		}
		return len(s.Partitions) == partitions
	})
}

func equalSets(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]bool{}
	for _, x := range a {
		seen[x] = true
	}
	for _, x := range b {
		if !seen[x] {
			return false
		}
	}
	return true
}
