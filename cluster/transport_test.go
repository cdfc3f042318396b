package cluster

import (
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/shardkeeper/shardkeeper/pki"
)

// A connection meant for another incarnation of this node is refused; one meant for this
// incarnation reaches the stream layer of its partition.
func TestMuxRoutesByPartitionAndRefusesOtherIncarnations(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := ListenMux("127.0.0.1:0", "n1@new", nil, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	addr := m.Addr().String()
	l3 := m.Layer(3, addr).(*streamLayer)
	l4 := m.Layer(4, addr).(*streamLayer)
	if got := string(RaftAddress(addr, "n1@new")); l3.Addr().String() != got {
		t.Fatalf("advertised %s, want %s", l3.Addr(), got)
	}

	accepted := make(chan uint32, 2)
	for _, l := range []*streamLayer{l3, l4} {
		go func() {
			c, err := l.Accept()
			if err == nil {
				accepted <- l.p
				c.Close()
			}
		}()
	}

	// Meant for the old incarnation, or naming no server at all (an address without its
	// server id, as a process that is no member would dial): the listener closes it without
	// handing it over.
	for _, target := range []raft.ServerAddress{RaftAddress(addr, "n1@old"), raft.ServerAddress(addr)} {
		old, err := l3.Dial(target, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = old.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := old.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("read on a refused connection to %s: %v, want EOF", target, err)
		}
		old.Close()
	}

	ok, err := l4.Dial(RaftAddress(addr, "n1@new"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer ok.Close()
	select {
	case p := <-accepted:
		if p != 4 {
			t.Fatalf("connection for partition 4 reached partition %d", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("connection for this incarnation was not accepted")
	}
	select {
	case p := <-accepted:
		t.Fatalf("refused connection reached partition %d", p)
	default:
	}
}

// With TLS, the mux answers only node certificates of its CA, and the dialer talks only to
// the node named in the address it dials.
func TestMuxTLS(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	files, err := pki.WriteNodes(dir, nil, time.Hour, "n1", "n2")
	if err != nil {
		t.Fatal(err)
	}
	client, err := pki.WriteCert(dir, pki.Request{Role: pki.RoleClient, Name: "ops", Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	n1, n2 := loadPeers(t, files["n1"]), loadPeers(t, files["n2"])
	m, err := ListenMux("127.0.0.1:0", "n1@a", n1, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	addr := m.Addr().String()
	l := m.Layer(0, addr).(*streamLayer)
	accepted := make(chan struct{}, 4)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	// n2 reaching n1: accepted.
	from2 := dialer(n2)
	c, err := from2.Dial(RaftAddress(addr, "n1@a"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("a node's connection was not accepted")
	}
	// n2 meaning to reach n3 at this address: n1's certificate is not n3's.
	if _, err := from2.Dial(RaftAddress(addr, "n3@a"), time.Second); err == nil || !strings.Contains(err.Error(), `not "n3"'s`) {
		t.Fatalf("dialed another node than the one named: %v", err)
	}
	// Plain TCP, and TLS with a client-role certificate: refused before any header is read.
	plain := dialer(nil)
	cert, err := tls.LoadX509KeyPair(client.Cert, client.Key)
	if err != nil {
		t.Fatal(err)
	}
	conns := []func() (net.Conn, error){
		func() (net.Conn, error) { return plain.Dial(RaftAddress(addr, "n1@a"), time.Second) },
		func() (net.Conn, error) {
			return tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}})
		},
	}
	for i, dial := range conns {
		c, err := dial()
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = c.Write([]byte("R\x00\x00\x00\x00\x04n1@a"))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatalf("connection %d was answered", i)
		}
		c.Close()
	}
	select {
	case <-accepted:
		t.Fatal("a refused connection reached the partition")
	default:
	}
}

func loadPeers(t *testing.T, f pki.Files) *pki.Peers {
	t.Helper()
	p, err := pki.Load(f, os.ReadFile)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// dialer is a stream layer that only dials (partition 0), as another node's would.
func dialer(peers *pki.Peers) *streamLayer { return &streamLayer{peers: peers} }
