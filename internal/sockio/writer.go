package sockio

import (
	"errors"
	"net"
	"os"
	"sync"
	"syscall"
)

// Writer writes to one connection. It is safe for concurrent use, as a net.Conn's Write is;
// each call writes all of its bytes or fails.
type Writer struct {
	nc  net.Conn
	raw syscall.RawConn // nil: writes go through nc

	mu sync.Mutex
	// The write in progress, for fn: what is left of it, how much went, the errno that
	// ended it.
	bufs  [][]byte
	one   [1][]byte
	n     int64
	errno syscall.Errno
	fn    func(fd uintptr) bool
}

// NewWriter returns a Writer for nc. raw is nc's socket (its SyscallConn), which the
// caller already has; nil, or off Linux, writes go through nc.
func NewWriter(nc net.Conn, raw syscall.RawConn) *Writer {
	w := &Writer{nc: nc}
	if rawCalls && raw != nil {
		w.raw, w.fn = raw, w.step
	}
	return w
}

// Write writes b.
func (w *Writer) Write(b []byte) (int, error) {
	if w.raw == nil {
		return w.nc.Write(b)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.one[0] = b
	n, err := w.write(w.one[:])
	w.one[0] = nil
	return int(n), err
}

// WriteBuffers writes bufs in order, in one system call where they fit one. bufs itself
// is left as it was.
func (w *Writer) WriteBuffers(bufs [][]byte) (int64, error) {
	if w.raw == nil {
		nb := net.Buffers(bufs)
		return nb.WriteTo(w.nc)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.write(bufs)
}

// write runs fn under the poller: fn writes until all is written, an error, or EAGAIN
// (then the poller waits for room, or for the deadline or a close).
func (w *Writer) write(bufs [][]byte) (int64, error) {
	w.bufs, w.n, w.errno = bufs, 0, 0
	err := w.raw.Write(w.fn)
	n := w.n
	w.bufs = nil
	if err == nil && w.errno != 0 {
		err = os.NewSyscallError(syscallName(len(bufs)), w.errno)
	}
	if err != nil {
		return n, w.opError(err)
	}
	return n, nil
}

// step is fn: one call of the poller's.
func (w *Writer) step(fd uintptr) bool {
	for len(w.bufs) > 0 {
		if len(w.bufs[0]) == 0 {
			w.bufs = w.bufs[1:]
			continue
		}
		n, errno := writeRaw(fd, w.bufs)
		switch errno {
		case 0:
			w.n += int64(n)
			w.consume(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			w.errno = errno
			return true
		}
	}
	return true
}

// consume drops the first n bytes of w.bufs (the slice of slices is w's own view: the
// caller's slices are resliced, never written).
func (w *Writer) consume(n int) {
	for n > 0 && len(w.bufs) > 0 {
		if l := len(w.bufs[0]); n >= l {
			n -= l
			w.bufs = w.bufs[1:]
			continue
		}
		// A partial write of this buffer: the view must not change the caller's slice
		// header, so it moves to the Writer's own.
		w.one[0] = w.bufs[0][n:]
		rest := w.bufs[1:]
		if len(rest) == 0 {
			w.bufs = w.one[:]
			return
		}
		// Rare (a writev cut short inside a buffer that is not the last): copy the view.
		w.bufs = append([][]byte{w.one[0]}, rest...)
		return
	}
}

// opError wraps err as net's Write does: a *net.OpError "write" with the connection's
// addresses (the poller's errors come as "raw-write").
func (w *Writer) opError(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		err = oe.Err
	}
	return &net.OpError{Op: "write", Net: "tcp", Source: w.nc.LocalAddr(), Addr: w.nc.RemoteAddr(), Err: err}
}

func syscallName(bufs int) string {
	if bufs > 1 {
		return "writev"
	}
	return "write"
}
