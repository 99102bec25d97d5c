package upstream

import (
	"net"
	"syscall"
	"time"
)

// conn is one connection to a replica. Between exchanges it sits in the pool; during one,
// it belongs to the goroutine that called Do and then reads the Response, and to no other:
// there is no goroutine per connection, and nothing reads from it behind its owner's back.
type conn struct {
	nc  net.Conn
	key string // the pool's key: the replica's base URL
	// buf holds what was read but not yet used: a response head, a chunk-size line split
	// across reads, the bytes a read brought in after them. Unread bytes are buf[r:w].
	buf  []byte
	r, w int
	// reused: the connection has carried an exchange before this one.
	reused bool
	// abort closes the connection; it is the function context.AfterFunc runs when a
	// request's context ends, made once so that each request does not allocate it. It
	// closes the socket itself, under any TLS: a TLS close first sends its close_notify,
	// which can wait on a peer that reads nothing, and an abort must not wait.
	abort func()

	// raw and peek let the pool look at an idle socket without reading from it (h1peek).
	raw      syscall.RawConn
	peek     func(fd uintptr) bool
	peekBuf  [1]byte
	peekDead bool

	// The pool's, under its mutex.
	idle      bool
	idleTimer *time.Timer
}

// newConn wraps nc, a connection over the socket tcp (nc itself without TLS).
func newConn(nc, tcp net.Conn, key string, bufSize int) *conn {
	c := &conn{nc: nc, key: key, buf: make([]byte, bufSize)}
	c.abort = func() { tcp.Close() }
	c.initPeek(tcp)
	return c
}

// buffered returns the bytes read but not yet used.
func (c *conn) buffered() []byte { return c.buf[c.r:c.w] }

// fill reads once from the connection into the free end of buf, first moving unread
// bytes to its start. The caller ensures there is room.
func (c *conn) fill() (int, error) {
	if c.r > 0 {
		c.w = copy(c.buf, c.buf[c.r:c.w])
		c.r = 0
	}
	n, err := c.nc.Read(c.buf[c.w:])
	c.w += n
	return n, err
}

// resize replaces buf with one of size bytes, keeping the unread ones (which must fit).
func (c *conn) resize(size int) {
	nb := make([]byte, size)
	c.w = copy(nb, c.buf[c.r:c.w])
	c.r = 0
	c.buf = nb
}

// close closes the connection; it is never pooled again.
func (c *conn) close() { c.nc.Close() }
