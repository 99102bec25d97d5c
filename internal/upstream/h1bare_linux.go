//go:build linux

package upstream

import (
	"io"
	"net"
	"os"
	"syscall"

	"github.com/fencegate/fencegate/internal/sockio"
)

// initBare prepares the reads of a connection without TLS that wait holding no buffer.
// initPeek must have set raw.
func (c *conn) initBare() {
	if c.raw == nil {
		return
	}
	c.bare = func(fd uintptr) bool {
		c.take()
		// A raw read: the socket is non-blocking, so the call cannot wait (internal/sockio).
		n, errno := sockio.Read(fd, c.buf)
		switch {
		case errno == syscall.EAGAIN:
			// Nothing yet: the buffer goes back while the poller waits for the engine,
			// and the next call, once the socket is readable, takes one.
			c.release()
			return false
		case errno != 0:
			c.bareErr = &net.OpError{Op: "read", Net: "tcp", Source: c.nc.LocalAddr(),
				Addr: c.nc.RemoteAddr(), Err: os.NewSyscallError("read", errno)}
		case n == 0:
			c.bareErr = io.EOF
		default:
			c.bareN = n
		}
		return true
	}
}

// fillBare is fill for a connection with nothing unread: the socket is read with the
// runtime's poller (the connection's deadlines, and so its wakes, apply as to any read),
// into a buffer taken only when the engine has sent something. Errors are those of a
// net.Conn's Read: io.EOF for the engine's FIN, a *net.OpError otherwise.
func (c *conn) fillBare() (int, error) {
	c.r, c.w = 0, 0
	c.bareN, c.bareErr = 0, nil
	err := c.raw.Read(c.bare)
	c.take() // a wake or a close ends the wait with the buffer given back
	if err != nil {
		return 0, err
	}
	c.w = c.bareN
	return c.bareN, c.bareErr
}
