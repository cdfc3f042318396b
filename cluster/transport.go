package cluster

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/shardkeeper/shardkeeper/pki"
)

// Mux carries the Raft traffic of every Raft group over one TCP listener. Each connection
// starts with a header: muxMagic, the group number (u32, big-endian), and the server id
// the dialer means to reach (u8 length, bytes). The listener refuses a connection meant for
// another server id and hands the rest to the group's stream layer; from then on it is an
// ordinary hashicorp/raft NetworkTransport connection.
//
// Why the server id: a node whose disk was wiped comes back on the same address with a new
// server id. Without the check it would answer RPCs meant for its old incarnation — grant
// votes with an empty log in the name of a voter that had acknowledged entries — and break
// Raft's safety. Raft addresses therefore carry the server id: "host:port#serverID" (see
// RaftAddress), and only the incarnation named can answer.
//
// With TLS material (peers), every connection is mutual TLS first: the listener accepts node
// certificates of the cluster CA only, and the dialer accepts only the certificate of the node
// named in the server id it dials, so an address taken over by another node or by anyone
// else is never answered to.
type Mux struct {
	ln       net.Listener
	logger   *slog.Logger
	serverID string
	peers    *pki.Peers // nil: plain TCP

	mu     sync.Mutex
	layers map[uint32]*streamLayer
	closed bool
	wg     sync.WaitGroup
}

const (
	muxMagic         = 'R'
	muxHeaderTimeout = 5 * time.Second
)

// RaftAddress is the Raft address of server id at addr, as kept in Raft configurations.
func RaftAddress(addr, serverID string) raft.ServerAddress {
	return raft.ServerAddress(addr + "#" + serverID)
}

// splitRaftAddress undoes RaftAddress; a plain address has no server id.
func splitRaftAddress(a raft.ServerAddress) (addr, serverID string) {
	s := string(a)
	if i := strings.LastIndexByte(s, '#'); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, ""
}

// ListenMux listens on addr for the Raft traffic of server id serverID, in TLS with peers
// when not nil.
func ListenMux(addr, serverID string, peers *pki.Peers, logger *slog.Logger) (*Mux, error) {
	if len(serverID) > 255 {
		return nil, fmt.Errorf("server id %q is too long", serverID)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("raft listener on %s: %w", addr, err)
	}
	m := &Mux{ln: ln, logger: logger, serverID: serverID, peers: peers, layers: map[uint32]*streamLayer{}}
	m.wg.Add(1)
	go m.acceptLoop()
	return m, nil
}

// Addr is the listener's address.
func (m *Mux) Addr() net.Addr { return m.ln.Addr() }

// Layer returns group g's stream layer (created on first use). advertise is the address
// other nodes dial to reach this node's Raft listener.
func (m *Mux) Layer(g uint32, advertise string) raft.StreamLayer {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.layers[g]; ok {
		select {
		case <-l.closed: // its transport shut down (a group that failed to open): a new one
		default:
			return l
		}
	}
	l := &streamLayer{p: g, addr: raftAddr(RaftAddress(advertise, m.serverID)), peers: m.peers, conns: make(chan net.Conn), closed: make(chan struct{})}
	m.layers[g] = l
	return l
}

// Close stops accepting connections and closes every stream layer.
func (m *Mux) Close() error {
	m.mu.Lock()
	m.closed = true
	for _, l := range m.layers {
		l.close()
	}
	m.mu.Unlock()
	err := m.ln.Close()
	m.wg.Wait()
	return err
}

func (m *Mux) acceptLoop() {
	defer m.wg.Done()
	for {
		conn, err := m.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			m.logger.Warn("raft accept failed", "error", err)
			time.Sleep(10 * time.Millisecond) // e.g. out of file descriptors: do not spin
			continue
		}
		go m.route(conn)
	}
}

// route reads a connection's header and hands it to its group.
func (m *Mux) route(conn net.Conn) {
	var hdr [6]byte
	_ = conn.SetDeadline(time.Now().Add(muxHeaderTimeout))
	if m.peers != nil {
		tc := tls.Server(conn, m.peers.ServerConfig())
		if err := tc.Handshake(); err != nil {
			m.logger.Warn("raft connection refused", "remote", conn.RemoteAddr(), "error", err)
			conn.Close()
			return
		}
		conn = tc
	}
	_, err := io.ReadFull(conn, hdr[:])
	target := make([]byte, hdr[5])
	if err == nil {
		_, err = io.ReadFull(conn, target)
	}
	if err != nil || hdr[0] != muxMagic {
		m.logger.Warn("raft connection with a bad header", "remote", conn.RemoteAddr(), "error", err)
		conn.Close()
		return
	}
	_ = conn.SetDeadline(time.Time{})
	// Every Raft address names its server (RaftAddress): a connection that names none, or
	// another, is not from a member that knows this node.
	if string(target) != m.serverID {
		m.logger.Warn("raft connection not meant for this node's incarnation; refused",
			"target", string(target), "self", m.serverID, "remote", conn.RemoteAddr())
		conn.Close()
		return
	}
	p := binary.BigEndian.Uint32(hdr[1:5])
	m.mu.Lock()
	l, ok := m.layers[p]
	m.mu.Unlock()
	if !ok {
		m.logger.Warn("raft connection for a raft group not hosted here", "group", p, "remote", conn.RemoteAddr())
		conn.Close()
		return
	}
	select {
	case l.conns <- conn:
	case <-l.closed:
		conn.Close()
	}
}

// nodeOf is the node id of a server id, "<node-id>@<incarnation>" (persistence.Store.ServerID).
func nodeOf(serverID string) string {
	if i := strings.LastIndexByte(serverID, '@'); i >= 0 {
		return serverID[:i]
	}
	return serverID
}

// raftAddr is a net.Addr whose String is a RaftAddress, so that raft advertises it.
type raftAddr string

func (a raftAddr) Network() string { return "tcp" }
func (a raftAddr) String() string  { return string(a) }

// streamLayer is one group's view of the mux, as raft.StreamLayer.
type streamLayer struct {
	p      uint32
	addr   net.Addr
	peers  *pki.Peers
	conns  chan net.Conn
	once   sync.Once
	closed chan struct{}
}

func (l *streamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *streamLayer) close() { l.once.Do(func() { close(l.closed) }) }

// Close is called by raft's NetworkTransport on shutdown; the mux owns the real listener.
func (l *streamLayer) Close() error { l.close(); return nil }

func (l *streamLayer) Addr() net.Addr { return l.addr }

func (l *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	addr, target := splitRaftAddress(address)
	if target == "" && l.peers != nil {
		return nil, fmt.Errorf("raft address %s names no server: refused with TLS", address)
	}
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if l.peers != nil {
		tc := tls.Client(conn, l.peers.ClientConfig(nodeOf(target)))
		if err := tc.Handshake(); err != nil {
			conn.Close()
			return nil, fmt.Errorf("raft TLS with %s: %w", address, err)
		}
		conn = tc
	}
	hdr := binary.BigEndian.AppendUint32([]byte{muxMagic}, l.p)
	hdr = append(append(hdr, byte(len(target))), target...)
	if _, err := conn.Write(hdr); err != nil {
		conn.Close()
		return nil, fmt.Errorf("raft mux header to %s: %w", address, err)
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, nil
}
