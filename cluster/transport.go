package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Mux carries the Raft traffic of every partition over one TCP listener. Each connection
// starts with a 5-byte header, muxMagic then the partition number (u32, big-endian); the
// listener hands the connection to that partition's stream layer, and from then on it is an
// ordinary hashicorp/raft NetworkTransport connection.
type Mux struct {
	ln     net.Listener
	logger *slog.Logger

	mu     sync.Mutex
	layers map[uint32]*streamLayer
	closed bool
	wg     sync.WaitGroup
}

const (
	muxMagic         = 'R'
	muxHeaderTimeout = 5 * time.Second
)

// ListenMux listens on addr for Raft traffic.
func ListenMux(addr string, logger *slog.Logger) (*Mux, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("raft listener on %s: %w", addr, err)
	}
	m := &Mux{ln: ln, logger: logger, layers: map[uint32]*streamLayer{}}
	m.wg.Add(1)
	go m.acceptLoop()
	return m, nil
}

// Addr is the listener's address.
func (m *Mux) Addr() net.Addr { return m.ln.Addr() }

// Layer returns partition p's stream layer (created on first use). advertise is the address
// other nodes dial to reach this node's Raft listener.
func (m *Mux) Layer(p uint32, advertise net.Addr) raft.StreamLayer {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.layers[p]; ok {
		return l
	}
	l := &streamLayer{p: p, addr: advertise, conns: make(chan net.Conn), closed: make(chan struct{})}
	m.layers[p] = l
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

// route reads a connection's header and hands it to its partition.
func (m *Mux) route(conn net.Conn) {
	var hdr [5]byte
	_ = conn.SetReadDeadline(time.Now().Add(muxHeaderTimeout))
	if _, err := io.ReadFull(conn, hdr[:]); err != nil || hdr[0] != muxMagic {
		m.logger.Warn("raft connection with a bad header", "remote", conn.RemoteAddr(), "error", err)
		conn.Close()
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	p := binary.BigEndian.Uint32(hdr[1:])
	m.mu.Lock()
	l, ok := m.layers[p]
	m.mu.Unlock()
	if !ok {
		m.logger.Warn("raft connection for a partition not hosted here", "partition", p, "remote", conn.RemoteAddr())
		conn.Close()
		return
	}
	select {
	case l.conns <- conn:
	case <-l.closed:
		conn.Close()
	}
}

// streamLayer is one partition's view of the mux, as raft.StreamLayer.
type streamLayer struct {
	p      uint32
	addr   net.Addr
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
	conn, err := net.DialTimeout("tcp", string(address), timeout)
	if err != nil {
		return nil, err
	}
	hdr := binary.BigEndian.AppendUint32([]byte{muxMagic}, l.p)
	_ = conn.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := conn.Write(hdr); err != nil {
		conn.Close()
		return nil, fmt.Errorf("raft mux header to %s: %w", address, err)
	}
	_ = conn.SetWriteDeadline(time.Time{})
	return conn, nil
}
