package sim

import (
	"net"
	"sync"
)

// connSet tracks every connection accepted during one listening period, so
// a crash can reset all of them at once, including connections a handler
// has hijacked (net/http forgets those).
type connSet struct {
	mu     sync.Mutex
	conns  map[*trackedConn]struct{}
	closed bool
}

func newConnSet() *connSet {
	return &connSet{conns: make(map[*trackedConn]struct{})}
}

// add tracks c, or reports false once the set has been reset: a connection
// accepted in the instant of a crash must die too.
func (s *connSet) add(c *trackedConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *connSet) remove(c *trackedConn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// resetAll resets every tracked connection and refuses new ones.
func (s *connSet) resetAll() {
	s.mu.Lock()
	s.closed = true
	conns := make([]*trackedConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.reset()
	}
}

// trackedConn removes itself from its set when closed.
type trackedConn struct {
	net.Conn
	set *connSet
}

func (c *trackedConn) Close() error {
	c.set.remove(c)
	return c.Conn.Close()
}

// reset closes c so that the peer sees a TCP RST rather than an orderly
// FIN: SO_LINGER with a zero timeout makes close() abort the connection.
func (c *trackedConn) reset() {
	resetConn(c.Conn)
	c.set.remove(c)
}

// resetConn aborts conn with an RST when it is a TCP connection and closes
// it in any case.
func resetConn(conn net.Conn) {
	if tc, ok := conn.(*trackedConn); ok {
		tc.reset()
		return
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0) // best effort: a failed SetLinger still closes below
	}
	_ = conn.Close()
}

// trackingListener wraps every accepted connection into set.
type trackingListener struct {
	net.Listener
	set *connSet
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, set: l.set}
	if !l.set.add(tc) {
		resetConn(c)
		return nil, net.ErrClosed
	}
	return tc, nil
}
