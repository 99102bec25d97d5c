package upstream

import (
	"net"
	"syscall"
	"time"

	"github.com/fencegate/fencegate/internal/sockio"
)

// conn is one connection to a replica. Between exchanges it sits in the pool; during one,
// it belongs to the goroutine that called Do and then reads the Response, and to no other:
// there is no goroutine per connection, and nothing reads from it behind its owner's back.
type conn struct {
	nc  net.Conn
	wr  *sockio.Writer // writes nc
	key string         // the pool's key: the replica's base URL
	// buf holds what was read but not yet used: a response head, a chunk-size line split
	// across reads, the bytes a read brought in after them. Unread bytes are buf[r:w].
	// It is nil while the connection waits on the engine with nothing unread, and while
	// it is idle in the pool (h1buf.go); bufp is set when buf came from bufs.
	buf  []byte
	r, w int
	bufs *bufPool
	bufp *[]byte
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

	// bare reads the socket into a buffer it takes only once the engine has sent
	// something (h1bare); nil when the connection is under TLS or off Linux. bareN and
	// bareErr are what its last call read.
	bare    func(fd uintptr) bool
	bareN   int
	bareErr error

	// The pool's, under its mutex.
	idle      bool
	idleTimer *time.Timer
}

// newConn wraps nc, a connection over the socket tcp (nc itself without TLS).
func newConn(nc, tcp net.Conn, key string, bufs *bufPool) *conn {
	c := &conn{nc: nc, key: key, bufs: bufs}
	c.take()
	c.abort = func() { tcp.Close() }
	c.initPeek(tcp)
	if nc == tcp {
		c.initBare()
		c.wr = sockio.NewWriter(nc, c.raw)
	} else {
		c.wr = sockio.NewWriter(nc, nil) // under TLS: the bytes are the TLS conn's to write
	}
	return c
}

// take gives c a read buffer when it has none.
func (c *conn) take() {
	if c.buf == nil {
		c.bufp = c.bufs.get()
		c.buf = *c.bufp
	}
}

// release gives c's buffer back to the pool when no unread byte is in it.
func (c *conn) release() {
	if c.bufp == nil || c.r != c.w {
		return
	}
	c.bufs.put(c.bufp)
	c.buf, c.bufp = nil, nil
	c.r, c.w = 0, 0
}

// buffered returns the bytes read but not yet used.
func (c *conn) buffered() []byte { return c.buf[c.r:c.w] }

// fill reads once from the connection into the free end of buf, first moving unread
// bytes to its start. The caller ensures there is room. With nothing unread on a
// connection without TLS, it waits for the engine holding no buffer (fillBare).
func (c *conn) fill() (int, error) {
	if c.r == c.w && c.bare != nil {
		return c.fillBare()
	}
	if c.r > 0 {
		c.w = copy(c.buf, c.buf[c.r:c.w])
		c.r = 0
	}
	n, err := c.nc.Read(c.buf[c.w:])
	c.w += n
	return n, err
}

// resize replaces buf with one of size bytes, keeping the unread ones (which must fit).
// A buffer of the pool's size comes from the pool; a larger one (a large response head)
// is the connection's own until the head is read.
func (c *conn) resize(size int) {
	var nb []byte
	var nbp *[]byte
	if size == c.bufs.size {
		nbp = c.bufs.get()
		nb = *nbp
	} else {
		nb = make([]byte, size)
	}
	c.w = copy(nb, c.buf[c.r:c.w])
	c.r = 0
	if c.bufp != nil {
		c.bufs.put(c.bufp)
	}
	c.buf, c.bufp = nb, nbp
}

// close closes the connection; it is never pooled again.
func (c *conn) close() { c.nc.Close() }
