package sockio

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
)

// Reader reads one connection. Unlike a Writer it is for one goroutine at a time, as a
// connection's reads are.
type Reader struct {
	nc  net.Conn
	raw syscall.RawConn // nil: reads go through nc

	// The read in progress, for fn.
	b     []byte
	n     int
	errno syscall.Errno
	fn    func(fd uintptr) bool
}

// NewReader returns a Reader for nc; raw as for NewWriter.
func NewReader(nc net.Conn, raw syscall.RawConn) *Reader {
	r := &Reader{nc: nc}
	if rawCalls && raw != nil {
		r.raw, r.fn = raw, r.step
	}
	return r
}

// Read reads into b what the socket holds, waiting with the poller when it holds nothing:
// io.EOF at the peer's FIN, a *net.OpError "read" otherwise, as net's Read.
func (r *Reader) Read(b []byte) (int, error) {
	if r.raw == nil {
		return r.nc.Read(b)
	}
	if len(b) == 0 {
		return 0, nil
	}
	r.b, r.n, r.errno = b, 0, 0
	err := r.raw.Read(r.fn)
	n := r.n
	r.b = nil
	if err == nil && r.errno != 0 {
		err = os.NewSyscallError("read", r.errno)
	}
	if err != nil {
		var oe *net.OpError
		if errors.As(err, &oe) {
			err = oe.Err
		}
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: r.nc.LocalAddr(), Addr: r.nc.RemoteAddr(), Err: err}
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (r *Reader) step(fd uintptr) bool {
	n, errno := Read(fd, r.b)
	switch errno {
	case 0:
		r.n = n
	case syscall.EAGAIN:
		return false
	default:
		r.errno = errno
	}
	return true
}
