//go:build linux

package upstream

import (
	"errors"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
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
		n, _, err := syscall.Recvfrom(int(fd), c.peekBuf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		c.peekDead = !errors.Is(err, syscall.EAGAIN) || n > 0
		return true
	}
	if tcp != c.nc {
		return // TLS: the socket does not show the bytes it has already decrypted
	}
	c.ready = func(fd uintptr) bool {
		if c.polled {
			// The runtime's poller woke the wait: the socket became readable. (A rare
			// spurious wake costs only a Read that waits.)
			return true
		}
		c.polled = true
		// Readable when a read would not wait: a byte, the engine's FIN or an error. A
		// poll, not a peeking recv: a recv reports a reset once and clears it, and the read
		// that follows must see it to classify it (connection_reset, not _closed). The
		// poll is needed: what arrived before this wait began does not wake it. On nothing
		// yet, false has the runtime's poller wait for the socket and ask again.
		fds := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds[:], 0)
		return n > 0 || (err != nil && !errors.Is(err, unix.EINTR))
	}
}

// waitReadable returns once the socket has something to read, or at once when it cannot
// be watched (TLS, a connection not over a socket).
func (c *conn) waitReadable() {
	if c.ready != nil {
		c.polled = false
		c.raw.Read(c.ready) // an error (the connection closed) is the next Read's to report
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
