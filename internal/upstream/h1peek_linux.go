//go:build linux

package upstream

import (
	"net"
	"syscall"

	"github.com/fencegate/fencegate/internal/sockio"
)

// initPeek prepares the look at an idle socket, when the connection is over one.
func (c *conn) initPeek(tcp net.Conn) {
	sc, ok := tcp.(syscall.Conn)
	if !ok {
		return
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return
	}
	c.raw = raw
	c.peek = func(fd uintptr) bool {
		// MSG_PEEK leaves any byte where it is; MSG_DONTWAIT makes an idle socket answer
		// EAGAIN at once instead of blocking.
		// A raw call, which does not allocate the peer's address as syscall.Recvfrom does.
		n, errno := sockio.Peek(fd, c.peekBuf[:])
		c.peekDead = errno != syscall.EAGAIN || n > 0
		return true
	}
}

// idleBroken reports whether an idle connection has been closed or reset by the engine,
// or holds bytes no request asked for, so that it must not carry a request: one recv
// that does not wait and does not consume. The engine's FIN or reset usually arrives well
// before the gateway reuses the connection (llama.cpp's server closes after every stream;
// uvicorn closes connections idle for 5 s); looking first keeps such a connection from
// taking a request the engine will never answer. It narrows the race, it cannot close it:
// a close that crosses the request on the wire still ends in ErrServerClosedIdle.
func (c *conn) idleBroken() bool {
	if c.raw == nil {
		return false
	}
	if err := c.raw.Read(c.peek); err != nil {
		return true
	}
	return c.peekDead
}
