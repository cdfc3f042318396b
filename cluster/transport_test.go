package cluster

import (
	"github.com/hashicorp/raft"
	"io"
	"log/slog"
	"testing"
	"time"
)

// A connection meant for another incarnation of this node is refused; one meant for this
// incarnation reaches the stream layer of its partition.
func TestMuxRoutesByPartitionAndRefusesOtherIncarnations(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := ListenMux("127.0.0.1:0", "n1@new", logger)
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
