package h1server

import (
	"errors"
	"net"
	"sync"
	"syscall"
)

// LimitListener returns a listener that accepts at most n connections at once from l; past
// it, new connections wait in the kernel's accept queue. It is
// golang.org/x/net/netutil.LimitListener with one difference the server needs: its
// connections still reach their socket (SyscallConn, CloseWrite), so the server can watch
// them for a client that leaves and wait on them holding no buffer. netutil's wrap hides
// both, and a connection the server cannot watch notices a client that left only when a
// write fails.
func LimitListener(l net.Listener, n int) net.Listener {
	return &limitListener{Listener: l, sem: make(chan struct{}, n), done: make(chan struct{})}
}

type limitListener struct {
	net.Listener
	sem       chan struct{}
	closeOnce sync.Once
	done      chan struct{}
}

// acquire waits for room, and reports false once the listener is closed.
func (l *limitListener) acquire() bool {
	select {
	case <-l.done:
		return false
	case l.sem <- struct{}{}:
		return true
	}
}

func (l *limitListener) release() { <-l.sem }

func (l *limitListener) Accept() (net.Conn, error) {
	if !l.acquire() {
		// The listener is closed: let Accept say so, as netutil's does.
		return l.Listener.Accept()
	}
	c, err := l.Listener.Accept()
	if err != nil {
		l.release()
		return nil, err
	}
	return &limitConn{Conn: c, release: l.release}, nil
}

func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

type limitConn struct {
	net.Conn
	releaseOnce sync.Once
	release     func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.releaseOnce.Do(c.release)
	return err
}

var errNoSocket = errors.New("h1server: the connection has no socket")

func (c *limitConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errNoSocket
}

func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errNoSocket
}
