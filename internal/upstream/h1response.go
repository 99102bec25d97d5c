package upstream

import (
	"context"
	"errors"
	"io"
	"strconv"
	"time"
)

// maxInterim bounds the 1xx responses skipped before the final one, as net/http does.
const maxInterim = 5

// Response is an engine's response: its status and header, and its body, read with Read
// until io.EOF. Read and Close belong to one goroutine at a time, the one that called Do or
// one it handed the response to; another goroutine stops a Read by cancelling the
// request's context, or, once EnableWake was called, interrupts it with Wake.
type Response struct {
	Status int
	Header Header
	// ContentLength is the declared length of the body, or -1 when the body is chunked or
	// ends when the engine closes the connection.
	ContentLength int64

	c    *Client
	cn   *conn // nil once the exchange is over: the connection pooled or closed
	ctx  context.Context
	stop func() bool // unregisters the context's AfterFunc
	addr string
	// reuse: neither side asked to close, and the body's end can be told apart from the
	// connection's.
	reuse bool
	body  bodyDecoder
	err   error // returned by every Read once set
	// fields backs Header for the few fields engines send, saving an allocation.
	fields [8]HeaderField
	// wake lets the body's reader be woken from its wait (h1wake.go).
	wake wakeState
	// clearDeadline: Drain set a read deadline, which a pooled connection must not keep.
	clearDeadline bool
	// headPending: Send wrote the request and the final head has not been read yet
	// (ReadHead); received counts the bytes that arrived for it so far and interim the 1xx
	// responses skipped, across the calls a wake cuts short.
	headPending bool
	isHEAD      bool
	received    int
	interim     int
}

// ReadHead reads the response's head, skipping 1xx interim responses, and prepares the
// body's decoder; a response without a body ends the exchange at once. Once the head is
// read it returns nil at once. With EnableWake called, a wait cut short by Wake or the
// deadline of SetWakeAt returns ErrWoken, keeping what arrived of the head, and ReadHead
// may be called again.
func (r *Response) ReadHead() error {
	if !r.headPending {
		return r.err
	}
	if err := r.readHead(); err != nil {
		return err
	}
	r.headPending = false
	return nil
}

// HeadRead reports whether the head has been read (ReadHead returned nil).
func (r *Response) HeadRead() bool { return !r.headPending && r.err == nil }

// readHead is ReadHead's work.
func (r *Response) readHead() error {
	if r.err != nil {
		return r.err
	}
	cn := r.cn
	for ; ; r.interim++ {
		n, err := r.nextHead(&r.received)
		if err != nil {
			switch {
			case r.woke(err):
				return ErrWoken
			case r.received == 0 && cn.reused && closedIdle(err):
				err = errors.Join(ErrServerClosedIdle, err)
			case r.received > 0 && errors.Is(err, io.EOF):
				err = io.ErrUnexpectedEOF
			}
			return r.fail(OpReadHead, SentAll, err)
		}
		h, err := parseHead(cn.buf[cn.r:cn.r+n], r.c.lim, r.fields[:])
		if err != nil {
			return r.fail(OpReadHead, SentAll, err)
		}
		cn.r += n
		if h.status >= 200 {
			r.setHead(h, r.isHEAD)
			return nil
		}
		if h.status == 101 {
			return r.fail(OpReadHead, SentAll, &ProtocolError{What: "101 Switching Protocols to a request that asked for no upgrade"})
		}
		if r.interim == maxInterim {
			return r.fail(OpReadHead, SentAll, &ProtocolError{What: "more than " + strconv.Itoa(maxInterim) + " 1xx responses"})
		}
	}
}

// nextHead reads until the buffer holds a whole head and returns its length. The buffer
// grows, up to the head limit, for a head larger than it.
func (r *Response) nextHead(received *int) (int, error) {
	cn, maxBytes := r.cn, r.c.lim.maxBytes
	scanned := 0
	for {
		b := cn.buffered()
		if n := headEnd(b, scanned); n >= 0 {
			if n > maxBytes {
				break
			}
			return n, nil
		}
		if len(b) >= maxBytes {
			break
		}
		scanned = len(b)
		if cn.r == 0 && cn.w == len(cn.buf) {
			cn.resize(min(2*len(cn.buf), maxBytes))
		}
		n, err := cn.fill()
		*received += n
		if err != nil {
			if n > 0 {
				if m := headEnd(cn.buffered(), scanned); m >= 0 && m <= maxBytes {
					return m, nil
				}
			}
			return 0, err
		}
	}
	return 0, &ProtocolError{What: "response head larger than " + strconv.Itoa(maxBytes) + " bytes"}
}

// setHead takes the final response's head and decides how its body is delimited.
func (r *Response) setHead(h responseHead, isHEAD bool) {
	r.Status, r.Header, r.ContentLength = h.status, h.fields, h.contentLength
	if h.mustClose {
		r.reuse = false
	}
	r.body.lim = r.c.lim
	switch {
	case isHEAD || h.status == 204 || h.status == 304:
		r.body.kind = bodyNone
	case h.chunked:
		r.body.kind = bodyChunked
	case h.contentLength > 0:
		r.body.kind, r.body.remain = bodyLength, h.contentLength
	case h.contentLength == 0:
		r.body.kind = bodyNone
	default:
		r.body.kind = bodyUntilClose
		r.reuse = false
	}
	if cn := r.cn; len(cn.buf) > r.c.opts.ReadBufferSize && cn.w-cn.r <= r.c.opts.ReadBufferSize {
		cn.resize(r.c.opts.ReadBufferSize) // a large head is over; idle connections stay small
	}
	if r.body.kind == bodyNone {
		r.finish()
	}
}

// Read reads body bytes into p, returning io.EOF at the end of the body. It returns
// whatever the connection has, up to len(p), blocking for at most one socket read and
// only when it has nothing yet; so a busy stream comes in batches. When p is at least
// the connection's buffer and that buffer is empty, the socket is read straight into p and
// a chunked body's framing is removed in place: the bytes are not copied on the way.
// When the body ends and the connection may be kept, it goes back to the pool before
// Read returns.
func (r *Response) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if r.headPending {
		return 0, errHeadPending
	}
	if r.cn == nil {
		return 0, io.EOF
	}
	if r.body.done { // Next returned the body's last bytes
		r.finish()
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	cn := r.cn
	for {
		if cn.r < cn.w {
			n, used, err := r.body.decode(p, cn.buffered())
			cn.r += used
			switch {
			case err != nil:
				return n, r.fail(OpReadBody, SentAll, err)
			case r.body.done:
				r.finish()
				return n, io.EOF
			case n > 0:
				return n, nil
			case cn.r < cn.w:
				// An incomplete line waits in the buffer: read the rest after it.
				if _, err := cn.fill(); err != nil {
					return 0, r.readErr(err)
				}
				continue
			}
		}
		if len(p) < len(cn.buf) {
			if _, err := cn.fill(); err != nil {
				return 0, r.readErr(err)
			}
			continue
		}
		// Not bounded by a length body's end: nothing may follow a response before the
		// next request, so bytes that do are found here, and the connection dropped.
		m, rerr := cn.nc.Read(p)
		n := 0
		if m > 0 {
			var used int
			var err error
			n, used, err = r.body.decode(p, p[:m])
			if err != nil {
				return n, r.fail(OpReadBody, SentAll, err)
			}
			if r.body.done {
				if used < m {
					r.reuse = false // bytes after the body that no request asked for
				}
				r.finish()
				return n, io.EOF
			}
			// The start of a line the next read completes waits in the buffer.
			cn.r, cn.w = 0, copy(cn.buf, p[used:m])
		}
		if rerr != nil {
			if n > 0 && r.woke(rerr) {
				return n, nil // the next Read finds the deadline passed and says so
			}
			return n, r.readErr(rerr)
		}
		if n > 0 {
			return n, nil
		}
	}
}

// Next returns the next bytes of the body, decoded in place in the connection's own
// buffer, or io.EOF at its end. The bytes stay valid until the next call of Next, Read or
// Close: a reader that handles what one read brought before it reads again (the request's
// owner) needs no buffer of its own and holds none while it waits for the engine. Like
// Read, it returns whatever the connection has, blocking for at most one socket read and only when it has nothing yet.
// When the body ends within the bytes returned, the connection goes back to the pool at
// the next call (or Close), not before: the bytes returned are in its buffer.
func (r *Response) Next() ([]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	if r.headPending {
		return nil, errHeadPending
	}
	if r.cn == nil {
		return nil, io.EOF
	}
	cn := r.cn
	if r.body.done {
		r.finish()
		return nil, io.EOF
	}
	for {
		if cn.r < cn.w {
			start := cn.r
			n, used, err := r.body.decode(cn.buf[start:], cn.buf[start:cn.w])
			cn.r += used
			switch {
			case err != nil:
				return nil, r.fail(OpReadBody, SentAll, err)
			case n > 0:
				return cn.buf[start : start+n], nil
			case r.body.done:
				r.finish()
				return nil, io.EOF
			}
			// Framing alone, or the start of a line the next read completes.
		}
		if cn.r == 0 && cn.w == len(cn.buf) {
			// Cannot happen: a line longer than the smallest buffer is refused by decode.
			return nil, r.fail(OpReadBody, SentAll, &ProtocolError{What: "chunk line fills the read buffer"})
		}
		m, err := cn.fill()
		if m > 0 {
			continue // an error comes back at the next read
		}
		if err == nil {
			continue
		}
		return nil, r.readErr(err)
	}
}

// Ended reports whether the body's end has been read: the bytes Next or Read returned
// last were its last, and what is left of the exchange (pooling the connection) takes no
// read of the engine. A relay that knows this can write those bytes and its own end of
// the response together.
func (r *Response) Ended() bool { return r.err == nil && (r.cn == nil || r.body.done) }

// Buffered reports whether bytes read from the engine wait in the connection's buffer, so
// that the next Next or Read returns without a read of the socket when they are body
// bytes.
func (r *Response) Buffered() bool { return r.err == nil && r.cn != nil && r.cn.r < r.cn.w }

// Drain reads and drops what is left of the body, at most max bytes and until deadline,
// so that the connection can carry another exchange: it returns nil once the body was read
// to its end (the connection then pooled), else why not (the connection is closed by
// Close). No buffer of the caller's and no timer: the bytes are read in the connection's
// own buffer, under a read deadline that the connection does not keep.
func (r *Response) Drain(max int64, deadline time.Time) error {
	if r.headPending {
		return errHeadPending
	}
	if r.err == nil && r.cn != nil && !r.body.done {
		r.cn.nc.SetReadDeadline(deadline)
		r.clearDeadline = true
	}
	for {
		b, err := r.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if max -= int64(len(b)); max < 0 && !r.body.done {
			return errDrainTooLong
		}
	}
}

// errHeadPending: the body was read before ReadHead returned nil (a caller's mistake).
var errHeadPending = errors.New("upstream: response body read before its head")

// errDrainTooLong: more of the body was left than Drain would read.
var errDrainTooLong = errors.New("upstream: more of the body left than Drain reads")

// readErr is a failed body read: the end of a body delimited by the connection's close,
// or an error.
func (r *Response) readErr(err error) error {
	if r.woke(err) {
		return ErrWoken
	}
	if errors.Is(err, io.EOF) {
		if r.body.kind == bodyUntilClose {
			r.body.done = true
			r.finish()
			return io.EOF
		}
		err = io.ErrUnexpectedEOF
	}
	return r.fail(OpReadBody, SentAll, err)
}

// Close ends the response. Before the end of the body it closes the connection: it is
// never returned to the pool with a response half read, and the engine sees the close.
func (r *Response) Close() error {
	switch {
	case r.cn != nil && r.body.done && r.err == nil:
		r.finish() // Next returned the body's last bytes: the body was read to its end
	case r.cn != nil:
		r.dropConn()
	}
	if r.err == nil {
		r.err = ErrBodyClosed
	}
	return nil
}

// finish ends an exchange whose body was read to its end: the connection goes back to
// the pool if both sides allow it, nothing unread is left in its buffer, and the
// request's context did not end meanwhile (its AfterFunc may have closed it).
func (r *Response) finish() {
	r.detachWake()
	cn := r.cn
	r.cn = nil
	aborted := r.stop != nil && !r.stop()
	if !r.reuse || aborted || cn.r != cn.w {
		cn.close()
		return
	}
	if r.clearDeadline {
		cn.nc.SetReadDeadline(time.Time{})
	}
	cn.r, cn.w = 0, 0
	cn.reused = true
	r.c.pool.put(cn)
}

// fail ends the exchange with an error: the connection is closed, and the error is what
// every later Read returns. When the request's context ended, its error is the cause: the
// connection error is then the context's own doing.
func (r *Response) fail(op Op, sent Sent, err error) error {
	if ctxErr := r.ctx.Err(); ctxErr != nil {
		err = ctxErr
	}
	e := &Error{Op: op, Addr: r.addr, Reused: r.cn.reused, Sent: sent, Err: err}
	r.dropConn()
	r.err = e
	return e
}

func (r *Response) dropConn() {
	r.detachWake()
	if r.stop != nil {
		r.stop()
	}
	r.cn.close()
	r.cn = nil
}
