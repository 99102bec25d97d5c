package h1server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/fencegate/fencegate/internal/sockio"
)

// A connection's state, for Shutdown: it closes idle connections, and new ones after a
// grace, but lets a running request answer.
const (
	stateNew int32 = iota
	stateActive
	stateIdle
)

// conn is one client connection, served by one goroutine.
type conn struct {
	s        *Server
	nc       net.Conn
	wr       *sockio.Writer  // writes nc: every response byte goes through it
	raw      syscall.RawConn // nil for a connection without a file descriptor
	remote   string
	ctx      context.Context // the connection's: what every request's context derives from
	state    atomic.Int32
	accepted int64 // unix seconds

	// br reads the connection; nil while nothing of a request is buffered (see takeReader).
	br  *bufio.Reader
	lim limitedReader

	// watchID is the connection's registration with the hangup watcher (0: none).
	watchID uint64
	peek    [1]byte // the idle wait's look at the socket
	// waitFn is the idle wait's callback, made once; waited: it has looked at the socket.
	waitFn func(fd uintptr) bool
	waited bool

	mu sync.Mutex
	// cancel ends the running request's context (nil between requests).
	cancel context.CancelFunc
	// hungUp: the client sent its FIN or a reset; finPending: its FIN came behind
	// bytes not yet read (a pipelined request), or while no request ran, so the requests
	// before it still run; pipelined: the running request's body is read and the next
	// request is buffered behind it (the FIN then comes behind that one).
	hungUp, finPending, pipelined bool
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{s: s, nc: nc, accepted: time.Now().Unix()}
	if sc, ok := nc.(syscall.Conn); ok {
		if raw, err := sc.SyscallConn(); err == nil {
			c.raw = raw
		}
	}
	if ra := nc.RemoteAddr(); ra != nil {
		c.remote = ra.String()
	}
	c.ctx = context.WithValue(context.Background(), http.LocalAddrContextKey, nc.LocalAddr())
	c.wr = sockio.NewWriter(nc, c.raw)
	c.lim.r = sockio.NewReader(nc, c.raw)
	return c
}

// Test hooks: set by the package's tests before any connection is served, nil otherwise.
var (
	testHookIdle       func(*conn) // a connection waits for its next request (on its goroutine)
	testHookPeerClosed func(*conn) // peerClosed is done (on the hangup watcher's goroutine)
)

// readerPool keeps the connections' read buffers while no request is being read.
var readerPool sync.Pool // of *bufio.Reader

const readBufferSize = 4 << 10

// takeReader gives c a read buffer if it has none.
func (c *conn) takeReader() {
	if c.br != nil {
		return
	}
	if br, _ := readerPool.Get().(*bufio.Reader); br != nil {
		br.Reset(&c.lim)
		c.br = br
		return
	}
	c.br = bufio.NewReaderSize(&c.lim, readBufferSize)
}

// releaseReader gives c's read buffer back unless it holds bytes of a request not yet
// read (a pipelined one).
func (c *conn) releaseReader() {
	if c.br == nil || c.br.Buffered() > 0 {
		return
	}
	c.br.Reset(nil)
	readerPool.Put(c.br)
	c.br = nil
}

// limitedReader reads the connection, at most n bytes while a request's head is read.
type limitedReader struct {
	r io.Reader
	n int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// serve answers the connection's requests one after another until it closes, a response
// asks to close it, or the server shuts down.
func (c *conn) serve() {
	defer c.close()
	defer func() {
		if v := recover(); v != nil && v != http.ErrAbortHandler {
			buf := make([]byte, 64<<10)
			buf = buf[:runtime.Stack(buf, false)]
			c.s.log().Error("h1server: panic serving "+c.remote, "panic", fmt.Sprint(v), "stack", string(buf))
		}
	}()
	if hangups.add(c) {
		defer hangups.remove(c)
	} else if hangups.available() {
		c.s.unwatched.Do(func() {
			c.s.log().Warn("h1server: connections of this listener cannot be watched (no socket behind them): a client that leaves is noticed only when a write to it fails",
				"listener_conn", fmt.Sprintf("%T", c.nc))
		})
	}
	for first := true; ; first = false {
		if !c.awaitRequest(first) {
			return
		}
		req, refusal := c.readRequest()
		if req == nil {
			if refusal != "" {
				c.refuse(refusal)
			}
			return
		}
		keep, linger := c.handle(req)
		if linger {
			c.closeWriteAndWait()
		}
		if !keep || c.s.shutdown.Load() {
			return
		}
	}
}

// awaitRequest waits for the first byte of the next request, holding no read buffer while
// the connection is quiet, and sets the deadline for its head. It reports false when the
// connection should close instead (the client closed or was idle too long, the server
// shuts down).
func (c *conn) awaitRequest(first bool) bool {
	if !first {
		c.state.Store(stateIdle)
		if c.s.shutdown.Load() {
			return false
		}
		if d := c.s.IdleTimeout; d > 0 {
			c.nc.SetReadDeadline(time.Now().Add(d))
		} else {
			c.nc.SetReadDeadline(time.Time{})
		}
	} else if d := c.s.ReadHeaderTimeout; d > 0 {
		c.nc.SetReadDeadline(time.Now().Add(d))
	}
	if c.br == nil || c.br.Buffered() == 0 {
		if testHookIdle != nil {
			testHookIdle(c)
		}
		if err := c.waitReadable(); err != nil {
			return false
		}
	}
	if !first {
		if d := c.s.ReadHeaderTimeout; d > 0 {
			c.nc.SetReadDeadline(time.Now().Add(d))
		} else {
			c.nc.SetReadDeadline(time.Time{})
		}
	}
	c.state.Store(stateActive)
	return true
}

// refusals: the responses to a request that cannot be read, as net/http writes them.
const refusalHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

func statusRefusal(code int, text string) string {
	status := fmt.Sprintf("%d %s", code, http.StatusText(code))
	if text != "" {
		status += ": " + text
	}
	return "HTTP/1.1 " + status + refusalHeaders + status
}

// readRequest reads the next request's head. A nil request comes with the response that
// refuses it, or with none when the connection just ended (the client closed it, the head
// did not come in time).
func (c *conn) readRequest() (*http.Request, string) {
	c.takeReader()
	c.lim.n = c.s.maxHeaderBytes()
	req := readHeadFast(c.br) // the common head (head.go); any other is net/http's to read
	fast := req != nil
	var err error
	if !fast {
		req, err = http.ReadRequest(c.br)
	}
	if err != nil {
		switch {
		case c.lim.n <= 0:
			return nil, statusRefusal(http.StatusRequestHeaderFieldsTooLarge, "")
		case commonReadError(err):
			return nil, ""
		case strings.HasPrefix(err.Error(), "unsupported transfer encoding"),
			strings.HasPrefix(err.Error(), "too many transfer encodings"): // net/http's unsupportedTEError
			return nil, fmt.Sprintf("HTTP/1.1 %d %s%sUnsupported transfer encoding", http.StatusNotImplemented,
				http.StatusText(http.StatusNotImplemented), refusalHeaders)
		}
		return nil, statusRefusal(http.StatusBadRequest, "")
	}
	c.lim.n = math.MaxInt64
	if c.s.ReadHeaderTimeout > 0 {
		// The head is in: its deadline does not bound the body (net/http lifts it too).
		c.nc.SetReadDeadline(time.Time{})
	}
	if req.ProtoMajor != 1 {
		return nil, statusRefusal(http.StatusHTTPVersionNotSupported, "unsupported protocol version")
	}
	// http.ReadRequest has moved the Host field (or an absolute-form target's host) to
	// req.Host and removed it from the header.
	if req.ProtoAtLeast(1, 1) && req.Host == "" && req.Method != "CONNECT" {
		return nil, statusRefusal(http.StatusBadRequest, "missing required Host header")
	}
	if req.Host != "" && !httpguts.ValidHostHeader(req.Host) {
		return nil, statusRefusal(http.StatusBadRequest, "malformed Host header")
	}
	// readHeadFast took no field with an invalid name or value; net/http's reader checks
	// fewer than the server must.
	if !fast {
		if refusal := invalidField(req.Header); refusal != "" {
			return nil, refusal
		}
	}
	req.RemoteAddr = c.remote
	return req, ""
}

// invalidField returns the refusal of a head with a field name or value that is not
// valid, or "" when every field is.
func invalidField(h http.Header) string {
	for k, vv := range h {
		if !httpguts.ValidHeaderFieldName(k) {
			return statusRefusal(http.StatusBadRequest, "invalid header name")
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return statusRefusal(http.StatusBadRequest, "invalid header value")
			}
		}
	}
	return ""
}

// commonReadError is a read that ended the connection rather than a malformed request:
// the client closed it, or it stayed silent past a deadline. A head the client's close
// cut short (io.ErrUnexpectedEOF) is not one: net/http answers it 400.
func commonReadError(err error) bool {
	if errors.Is(err, io.EOF) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "read"
}

// refuse answers a request that could not be read and closes the connection, letting the
// client read the answer before the close (the rest of what it sends is not read).
func (c *conn) refuse(resp string) {
	c.nc.SetWriteDeadline(time.Now().Add(time.Second))
	io.WriteString(c.nc, resp)
	c.closeWriteAndWait()
}

// rstAvoidanceDelay bounds how long a connection closed on the gateway's side while the
// client may still be sending stays half-open, so that the client reads the answer before
// the reset its next bytes would cause (net/http's delay).
const rstAvoidanceDelay = 500 * time.Millisecond

// closeWriteAndWait sends the FIN and waits out the delay, or until the server closes.
// Nothing is read meanwhile: the client's writes stall on a full window instead of being
// read and dropped at the gateway's cost.
func (c *conn) closeWriteAndWait() {
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	t := time.NewTimer(rstAvoidanceDelay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.s.closing():
	}
}

// handle runs the handler for req and finishes its response (see response.finish for what
// it reports).
func (c *conn) handle(req *http.Request) (keep, linger bool) {
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	req = req.WithContext(ctx)
	w := newResponse(c, req)
	body := &requestBody{c: c, w: w, rc: req.Body}
	switch expect := field(req.Header, "Expect"); {
	case strings.EqualFold(expect, "100-continue"):
		body.continueDue = req.ProtoAtLeast(1, 1) && req.ContentLength != 0
	case expect != "":
		body.done = true // not read: the client waits for an answer it will not get
		w.closeAfter = true
		w.WriteHeader(http.StatusExpectationFailed)
		w.finish(body)
		return false, false
	}
	if req.Body == http.NoBody {
		body.done = true
		c.releaseReader()
	}
	req.Body = body
	c.begin(cancel, body.done)
	c.s.Handler.ServeHTTP(w, req)
	c.end()
	cancel()
	return w.finish(body)
}

// begin makes cancel the running request's: a hangup now cancels it. bodyDone: the
// request has no body left to read, so what the read buffer holds is the next request.
func (c *conn) begin(cancel context.CancelFunc, bodyDone bool) {
	c.mu.Lock()
	c.cancel = cancel
	c.pipelined = bodyDone && c.br != nil && c.br.Buffered() > 0
	hungUp := c.hungUp
	if c.finPending && !c.pipelined && !c.unreadBytes() {
		hungUp = true // the FIN that followed this, the last request
	}
	c.mu.Unlock()
	if hungUp {
		cancel()
	}
}

// bodyRead judges, once the running request's body is read whole, a FIN that came while
// the body was unread: with nothing after the body, it was the client leaving, and the
// request is cancelled as net/http's background read, which starts at this point, would
// cancel it.
func (c *conn) bodyRead() {
	c.mu.Lock()
	c.pipelined = c.br != nil && c.br.Buffered() > 0
	cancel := c.cancel
	hangup := c.finPending && !c.pipelined && !c.unreadBytes() && cancel != nil
	if hangup {
		c.hungUp = true
	}
	c.mu.Unlock()
	if hangup {
		cancel()
	}
}

func (c *conn) end() {
	c.mu.Lock()
	c.cancel = nil
	c.mu.Unlock()
}

// peerClosed is the hangup watcher's news: the client sent its FIN (reset: or a reset).
// A FIN behind bytes not yet read (a pipelined request) leaves the request running, as
// net/http does: the client may have sent its last request and shut its side down. The
// read buffer is the connection goroutine's, so a FIN that comes while no request runs
// (the buffer may be filling with the next ones) is left for begin to judge.
func (c *conn) peerClosed(reset bool) {
	if testHookPeerClosed != nil {
		defer testHookPeerClosed(c)
	}
	c.mu.Lock()
	if !reset && (c.cancel == nil || c.pipelined || c.unreadBytes()) {
		c.finPending = true
		c.mu.Unlock()
		return
	}
	c.hungUp = true
	cancel := c.cancel
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

func (c *conn) close() {
	c.state.Store(stateIdle)
	if c.br != nil {
		c.br.Reset(nil)
		readerPool.Put(c.br)
		c.br = nil
	}
	c.nc.Close()
	c.s.trackConn(c, false)
}
