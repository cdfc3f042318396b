package fakenear

import (
	"net"
	"os"
	"sync"
	"time"
)

// delayListener hands out connections whose bytes travel through a delay line in each
// direction: latency is modelled as one-way network delay, not as a pause in a handler, so a
// request is handled only once its bytes "arrived", and the bytes of one connection keep their
// order whatever the jitter (each chunk is released no earlier than the one before it), while
// two connections, each with its own delays, may deliver in another order than they sent.
type delayListener struct {
	net.Listener
	delay func() time.Duration
}

func (l *delayListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return newDelayConn(c, l.delay), nil
}

type chunk struct {
	data []byte
	at   time.Time // when it is released
}

// delayConn is one connection behind the delay line. A pump goroutine reads the socket and
// queues what arrives with its release time; Read hands it out once released. Write queues
// and returns at once (like a socket buffer); a writer goroutine sends each chunk at its
// release time, and Close closes the socket only after the queue is sent.
type delayConn struct {
	net.Conn
	delay func() time.Duration

	mu         sync.Mutex
	in         []chunk
	inErr      error
	lastIn     time.Time
	readDL     time.Time
	inChanged  chan struct{} // closed and replaced whenever in, inErr or readDL change
	out        []chunk
	lastOut    time.Time
	closing    bool
	outChanged chan struct{}
}

func newDelayConn(c net.Conn, delay func() time.Duration) *delayConn {
	d := &delayConn{Conn: c, delay: delay, inChanged: make(chan struct{}), outChanged: make(chan struct{})}
	go d.pump()
	go d.send()
	return d
}

// release returns when a chunk sent now arrives: after its delay, and not before the previous
// chunk of the same direction (FIFO).
func release(last *time.Time, d time.Duration) time.Time {
	at := time.Now().Add(d)
	if at.Before(*last) {
		at = *last
	}
	*last = at
	return at
}

func (d *delayConn) pump() {
	buf := make([]byte, 32<<10)
	for {
		n, err := d.Conn.Read(buf)
		d.mu.Lock()
		if n > 0 {
			d.in = append(d.in, chunk{data: append([]byte(nil), buf[:n]...), at: release(&d.lastIn, d.delay())})
		}
		if err != nil {
			d.inErr = err
		}
		close(d.inChanged)
		d.inChanged = make(chan struct{})
		d.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// Read returns released bytes, the socket's error once every chunk before it was read, or
// os.ErrDeadlineExceeded once the read deadline passed (net/http relies on deadlines to stop
// its background reads).
func (d *delayConn) Read(p []byte) (int, error) {
	for {
		d.mu.Lock()
		var wait time.Duration = -1
		if len(d.in) > 0 {
			c := &d.in[0]
			if wait = time.Until(c.at); wait <= 0 {
				n := copy(p, c.data)
				if c.data = c.data[n:]; len(c.data) == 0 {
					d.in = d.in[1:]
				}
				d.mu.Unlock()
				return n, nil
			}
		} else if d.inErr != nil {
			err := d.inErr
			d.mu.Unlock()
			return 0, err
		}
		dl, changed := d.readDL, d.inChanged
		d.mu.Unlock()
		if !dl.IsZero() {
			until := time.Until(dl)
			if until <= 0 {
				return 0, os.ErrDeadlineExceeded
			}
			if wait < 0 || until < wait {
				wait = until
			}
		}
		if wait < 0 {
			<-changed
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}

func (d *delayConn) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closing {
		return 0, net.ErrClosed
	}
	d.out = append(d.out, chunk{data: append([]byte(nil), p...), at: release(&d.lastOut, d.delay())})
	close(d.outChanged)
	d.outChanged = make(chan struct{})
	return len(p), nil
}

// send writes the queued chunks at their release times, then closes the socket once Close was
// called and nothing is left to send.
func (d *delayConn) send() {
	for {
		d.mu.Lock()
		if len(d.out) == 0 {
			if d.closing {
				d.mu.Unlock()
				d.Conn.Close()
				return
			}
			changed := d.outChanged
			d.mu.Unlock()
			<-changed
			continue
		}
		c := d.out[0]
		d.out = d.out[1:]
		d.mu.Unlock()
		if wait := time.Until(c.at); wait > 0 {
			time.Sleep(wait) // the modelled network delay itself, not a synchronization
		}
		if _, err := d.Conn.Write(c.data); err != nil {
			d.mu.Lock()
			d.out, d.closing = nil, true
			d.mu.Unlock()
		}
	}
}

// Close lets the queued bytes go out, then closes the socket.
func (d *delayConn) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closing {
		return nil
	}
	d.closing = true
	close(d.outChanged)
	d.outChanged = make(chan struct{})
	return nil
}

func (d *delayConn) SetDeadline(t time.Time) error {
	return d.SetReadDeadline(t)
}

func (d *delayConn) SetReadDeadline(t time.Time) error {
	d.mu.Lock()
	d.readDL = t
	close(d.inChanged)
	d.inChanged = make(chan struct{})
	d.mu.Unlock()
	return nil
}

// SetWriteDeadline is accepted and ignored: writes never block here.
func (d *delayConn) SetWriteDeadline(time.Time) error { return nil }
