package cluster

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/shardkeeper/shardkeeper/pki"
)

// tlsGossip is memberlist's network transport with its TCP streams (joins, push-pull state
// exchanges, fallback probes) in mutual TLS: a stream is accepted only from a node
// certificate of the cluster CA, and a stream to a named member only reaches the node that
// certificate names. Packets (UDP) are left to the gossip key.
//
// After the handshake the dialer sends one byte, the stream's kind: a memberlist stream, or
// a probe that proves the listener's identity (see Membership's verification of members),
// to which the listener answers with its gossip signing key (announce, see metasig.go) and
// ends. A release that predates signed gossip ends a probe without a word.
type tlsGossip struct {
	*memberlist.NetTransport
	peers    *pki.Peers
	announce []byte // nil: nothing is announced
	logger   *slog.Logger
	streams  chan net.Conn
	done     chan struct{}
	once     sync.Once
}

const (
	streamMemberlist byte = 'm'
	streamProbe      byte = 'p'
	// gossipHandshakeTimeout bounds a stream's handshake and kind byte, so that a peer that
	// connects and says nothing holds no goroutine for long.
	gossipHandshakeTimeout = 5 * time.Second
)

func newTLSGossip(inner *memberlist.NetTransport, peers *pki.Peers, announce []byte, logger *slog.Logger) *tlsGossip {
	t := &tlsGossip{NetTransport: inner, peers: peers, announce: announce, logger: logger, streams: make(chan net.Conn), done: make(chan struct{})}
	go t.accept()
	return t
}

func (t *tlsGossip) accept() {
	for {
		select {
		case conn := <-t.NetTransport.StreamCh():
			go t.serve(conn)
		case <-t.done:
			return
		}
	}
}

func (t *tlsGossip) serve(conn net.Conn) {
	_ = conn.SetDeadline(time.Now().Add(gossipHandshakeTimeout))
	tc := tls.Server(conn, t.peers.ServerConfig())
	var kind [1]byte
	err := tc.Handshake()
	if err == nil {
		_, err = tc.Read(kind[:])
	}
	if err != nil {
		t.logger.Warn("gossip stream refused", "remote", conn.RemoteAddr(), "error", err)
		conn.Close()
		return
	}
	if kind[0] != streamMemberlist {
		// A probe (or nonsense): the handshake proved this node's id; a probe also learns, in
		// the same session, the key this node signs its gossip with.
		if kind[0] == streamProbe && t.announce != nil {
			_, _ = tc.Write(t.announce)
		}
		tc.Close()
		return
	}
	_ = conn.SetDeadline(time.Time{})
	select {
	case t.streams <- tc:
	case <-t.done:
		tc.Close()
	}
}

func (t *tlsGossip) StreamCh() <-chan net.Conn { return t.streams }

func (t *tlsGossip) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

// DialAddressTimeout reaches the member a.Name (any node when memberlist knows only an
// address, as on join).
func (t *tlsGossip) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return t.dial(a.Addr, a.Name, streamMemberlist, timeout)
}

func (t *tlsGossip) dial(addr, want string, kind byte, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	tc := tls.Client(conn, t.peers.ClientConfig(want))
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("gossip TLS with %s: %w", addr, err)
	}
	_ = conn.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := tc.Write([]byte{kind}); err != nil {
		conn.Close()
		return nil, fmt.Errorf("gossip stream to %s: %w", addr, err)
	}
	_ = conn.SetWriteDeadline(time.Time{})
	return tc, nil
}

// probe proves that the gossip listener at addr holds node id's certificate, and returns the
// signing key it announced in that session: nil from a release that announces none.
func (t *tlsGossip) probe(addr, id string, timeout time.Duration) (ed25519.PublicKey, error) {
	conn, err := t.dial(addr, id, streamProbe, timeout)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(timeout))
	key, err := readAnnouncement(conn)
	if err != nil {
		return nil, fmt.Errorf("gossip probe of %s: %w", addr, err)
	}
	return key, nil
}

func (t *tlsGossip) Shutdown() error {
	t.once.Do(func() { close(t.done) })
	return t.NetTransport.Shutdown()
}
