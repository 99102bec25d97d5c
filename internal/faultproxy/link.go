package faultproxy

import (
	"net"
	"sync"
)

// link is one accepted client connection and the connection the proxy dialled to the
// target for it, with one pipe per direction between them.
type link struct {
	p      *Proxy
	client *net.TCPConn
	done   chan struct{} // closed when the link ends; every pipe goroutine returns on it

	mu       sync.Mutex
	target   *net.TCPConn // nil until dialled
	up, down *pipe        // nil until dialled
	ended    bool
	finished int // directions whose end of stream has been passed on
}

func newLink(p *Proxy, client *net.TCPConn) *link {
	return &link{p: p, client: client, done: make(chan struct{})}
}

// run dials the target and starts a pipe for each direction. If the target
// cannot be dialled the client is reset, so it sees the failure as a dead upstream
// (connection reset) rather than a clean, empty close.
func (l *link) run() {
	defer l.p.wg.Done()
	conn, err := l.p.dialer.DialContext(l.p.ctx, "tcp", l.p.target)
	if err != nil {
		l.p.count(func(s *Stats) { s.DialFailed++ })
		l.end(true)
		return
	}
	target := conn.(*net.TCPConn)
	up, down, ok := l.attach(target)
	if !ok {
		// Reset or Close ended the link while it was dialling.
		_ = target.SetLinger(0)
		_ = target.Close()
		return
	}
	l.p.wg.Add(4)
	go up.read()
	go up.write()
	go down.read()
	go down.write()
}

// attach records the dialled target connection and makes the link's pipes, unless the
// link has already ended.
func (l *link) attach(target *net.TCPConn) (up, down *pipe, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return nil, nil, false
	}
	l.target = target
	l.up = newPipe(l, Upstream, l.client, target)
	l.down = newPipe(l, Downstream, target, l.client)
	return l.up, l.down, true
}

// pending returns the bytes read but not yet settled in each direction.
func (l *link) pending() (up, down int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.up == nil {
		return 0, 0
	}
	return l.up.pending.Load(), l.down.pending.Load()
}

// finishDirection records that one direction's end of stream has been passed on; once both
// have, the link is over and both connections are closed.
func (l *link) finishDirection() {
	l.mu.Lock()
	l.finished++
	both := l.finished == 2
	l.mu.Unlock()
	if both {
		l.end(false)
	}
}

// end closes both connections, with a TCP reset (linger 0) when reset is true, and
// removes the link from the proxy. It reports whether this call ended the link; later
// calls do nothing.
func (l *link) end(reset bool) bool {
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		return false
	}
	l.ended = true
	close(l.done) // before closing the connections, so pipes see their errors as expected
	conns := []*net.TCPConn{l.client}
	if l.target != nil {
		conns = append(conns, l.target)
	}
	l.mu.Unlock()

	for _, c := range conns {
		if reset {
			_ = c.SetLinger(0)
		}
		_ = c.Close()
	}
	l.p.forget(l)
	return true
}
