package upstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/failover"
)

// The tests drive the real client returned by NewClient against real servers on loopback,
// and classify the error exactly as the gateway receives it: from Do, or from reading the
// response body. Faults the loopback cannot produce on demand (a kernel timeout, an
// unreachable host) are injected through the DialFunc, in the form the net package gives
// them.

const requestBody = `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`

// firstEvent is the first body bytes every streaming engine here sends before failing.
const firstEvent = "data: 1\n\n"

func expectFailure(t *testing.T, what string, err error, class failover.FailureClass, reason failover.EndReason, dial bool) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", what)
	}
	f := ClassifyError(err)
	if f.Class != class || f.Reason != reason || f.Dial != dial {
		t.Fatalf("%s: %v classified as {%v %s dial=%v}, want {%v %s dial=%v}",
			what, err, f.Class, f.Reason, f.Dial, class, reason, dial)
	}
}

func post(ctx context.Context, t *testing.T, c *http.Client, rawURL string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, strings.NewReader(requestBody))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return c.Do(req)
}

// readFirstEvent reads exactly the first event of a streamed body.
func readFirstEvent(t *testing.T, body io.Reader) {
	t.Helper()
	buf := make([]byte, len(firstEvent))
	if _, err := io.ReadFull(body, buf); err != nil || string(buf) != firstEvent {
		t.Fatalf("first event %q, %v", buf, err)
	}
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// rawEngine accepts one connection on loopback, reads the whole request from it, and hands
// the connection to serve, which decides how it ends. release unblocks a serve that waits
// for the test; it is also called when the test ends.
func rawEngine(t *testing.T, serve func(c *net.TCPConn, release <-chan struct{})) (addr string, release func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	released := make(chan struct{})
	release = sync.OnceFunc(func() { close(released) })
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		c := conn.(*net.TCPConn)
		// The whole request is consumed first: closing a socket with unread input would
		// send a reset where the test wants a FIN.
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			c.Close()
			return
		}
		io.Copy(io.Discard, req.Body)
		serve(c, released)
	}()
	t.Cleanup(func() {
		release()
		ln.Close()
		<-done
	})
	return ln.Addr().String(), release
}

// streamHeadAndFirstEvent writes a chunked SSE response head and the first event.
func streamHeadAndFirstEvent(c net.Conn) {
	fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n",
		len(firstEvent), firstEvent)
}

// reset closes c with a RST instead of a FIN.
func reset(c *net.TCPConn) {
	c.SetLinger(0)
	c.Close()
}

// streamEngine is an engine that streams the first event and then stays silent, alive,
// until the client goes away or the test ends.
func streamEngine(t *testing.T) string {
	t.Helper()
	released := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, firstEvent)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-released:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(released) }) // runs first
	return srv.URL
}

// faultConn is a dialed connection whose reads fail with err once the test sets it, the way
// the kernel or the net package would fail them.
type faultConn struct {
	net.Conn
	mu  sync.Mutex
	err error
}

func (c *faultConn) failReads(err error) {
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
}

func (c *faultConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

// faultDialer dials for real and wraps each connection in a faultConn, handed to the test
// on the returned channel.
func faultDialer() (DialFunc, <-chan *faultConn) {
	conns := make(chan *faultConn, 1)
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		fc := &faultConn{Conn: c}
		conns <- fc
		return fc, nil
	}
	return dial, conns
}

func dialError(addr string, err error) *net.OpError {
	tcp, _ := net.ResolveTCPAddr("tcp", addr)
	return &net.OpError{Op: "dial", Net: "tcp", Addr: tcp, Err: err}
}

func failingDial(err error) DialFunc {
	return func(_ context.Context, _, addr string) (net.Conn, error) { return nil, dialError(addr, err) }
}

// A dial that fails, however it fails, means the request never reached the engine: dead,
// and marked as a dial failure.
func TestClassifyDialFailures(t *testing.T) {
	live := streamEngine(t)
	for _, tc := range []struct {
		name   string
		url    string
		dial   DialFunc
		reason failover.EndReason
	}{
		{"refused", "http://" + closedAddr(t) + "/v1/chat/completions", nil, "connection_refused"},
		{"dial deadline passed", live, func(ctx context.Context, network, addr string) (net.Conn, error) {
			ctx, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
			defer cancel()
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}, "dial_timeout"},
		{"connect ETIMEDOUT", live, failingDial(os.NewSyscallError("connect", syscall.ETIMEDOUT)), "dial_timeout"},
		{"connect EHOSTUNREACH", live, failingDial(os.NewSyscallError("connect", syscall.EHOSTUNREACH)), "dial_failed"},
		{"connect ENETUNREACH", live, failingDial(os.NewSyscallError("connect", syscall.ENETUNREACH)), "dial_failed"},
		{"connect unknown error", live, failingDial(errors.New("no route")), "dial_failed"},
		{"dns not found", "http://engine.invalid:8000/v1/chat/completions",
			failingDial(&net.DNSError{Err: "no such host", Name: "engine.invalid", IsNotFound: true}), "dns_failed"},
		{"dns timeout", "http://engine.invalid:8000/v1/chat/completions",
			failingDial(&net.DNSError{Err: "i/o timeout", Name: "engine.invalid", IsTimeout: true}), "dns_failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewClient(time.Second, tc.dial)
			resp, err := post(context.Background(), t, c, tc.url)
			if err == nil {
				resp.Body.Close()
			}
			expectFailure(t, "Do", err, failover.Dead, tc.reason, true)
		})
	}
}

// A reset or a FIN from the engine proves it stopped: dead, whether it comes before the
// response or in the middle of the body.
func TestClassifyEngineResetOrClosed(t *testing.T) {
	c := NewClient(time.Second, nil)

	t.Run("reset before response", func(t *testing.T) {
		addr, _ := rawEngine(t, func(c *net.TCPConn, _ <-chan struct{}) { reset(c) })
		resp, err := post(context.Background(), t, c, "http://"+addr+"/v1/chat/completions")
		if err == nil {
			resp.Body.Close()
		}
		expectFailure(t, "Do", err, failover.Dead, "connection_reset", false)
	})

	t.Run("closed before response", func(t *testing.T) {
		addr, _ := rawEngine(t, func(c *net.TCPConn, _ <-chan struct{}) { c.Close() })
		resp, err := post(context.Background(), t, c, "http://"+addr+"/v1/chat/completions")
		if err == nil {
			resp.Body.Close()
		}
		expectFailure(t, "Do", err, failover.Dead, "connection_closed", false)
	})

	t.Run("reset mid-body", func(t *testing.T) {
		addr, release := rawEngine(t, func(c *net.TCPConn, released <-chan struct{}) {
			streamHeadAndFirstEvent(c)
			<-released // the client has read the first event
			reset(c)
		})
		resp, err := post(context.Background(), t, c, "http://"+addr+"/v1/chat/completions")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		readFirstEvent(t, resp.Body)
		release()
		_, err = io.ReadAll(resp.Body)
		expectFailure(t, "body", err, failover.Dead, "connection_reset", false)
	})

	t.Run("closed mid-body", func(t *testing.T) {
		addr, _ := rawEngine(t, func(c *net.TCPConn, _ <-chan struct{}) {
			streamHeadAndFirstEvent(c)
			c.Close() // a FIN with the chunked body unfinished
		})
		resp, err := post(context.Background(), t, c, "http://"+addr+"/v1/chat/completions")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		readFirstEvent(t, resp.Body)
		_, err = io.ReadAll(resp.Body)
		expectFailure(t, "body", err, failover.Dead, "connection_closed", false)
	})
}

type unknownError struct{}

func (unknownError) Error() string { return "something no one anticipated" }

// A read that fails on an established connection without proof that the engine stopped is
// uncertain: the engine may still be decoding on the other side.
func TestClassifyReadFailuresMidBody(t *testing.T) {
	target := streamEngine(t) + "/v1/chat/completions"
	for _, tc := range []struct {
		name   string
		err    error // what the failing read reports inside its *net.OpError
		reason failover.EndReason
	}{
		{"ETIMEDOUT", os.NewSyscallError("read", syscall.ETIMEDOUT), "tcp_timeout"},
		{"EHOSTUNREACH", os.NewSyscallError("read", syscall.EHOSTUNREACH), "host_unreachable"},
		{"ENETUNREACH", os.NewSyscallError("read", syscall.ENETUNREACH), "network_unreachable"},
		{"read deadline", os.ErrDeadlineExceeded, "timeout"},
		{"unknown", unknownError{}, "transport_error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dial, conns := faultDialer()
			c := NewClient(time.Second, dial)
			resp, err := post(context.Background(), t, c, target)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			readFirstEvent(t, resp.Body)
			fc := <-conns
			fc.failReads(&net.OpError{Op: "read", Net: "tcp", Source: fc.LocalAddr(), Addr: fc.RemoteAddr(), Err: tc.err})
			_, err = io.ReadAll(resp.Body)
			if !errors.Is(err, tc.err) {
				t.Fatalf("body error %v does not carry the injected %v", err, tc.err)
			}
			expectFailure(t, "body", err, failover.Uncertain, tc.reason, false)
		})
	}
}

// expiringCtx ends the way a context deadline does (Err is context.DeadlineExceeded), at
// the moment the test calls expire, so no wall-clock timing is involved.
type expiringCtx struct {
	context.Context
	done   chan struct{}
	expire func()
}

func newExpiringCtx() *expiringCtx {
	c := &expiringCtx{Context: context.Background(), done: make(chan struct{})}
	c.expire = sync.OnceFunc(func() { close(c.done) })
	return c
}

func (c *expiringCtx) Done() <-chan struct{} { return c.done }

func (c *expiringCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// The request's deadline passing while the body is read is uncertain: the engine was still
// connected and may still be decoding.
func TestClassifyDeadlineWhileReadingBody(t *testing.T) {
	target := streamEngine(t) + "/v1/chat/completions"
	ctx := newExpiringCtx()
	defer ctx.expire()
	resp, err := post(ctx, t, NewClient(time.Second, nil), target)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	readFirstEvent(t, resp.Body)
	ctx.expire()
	_, err = io.ReadAll(resp.Body)
	expectFailure(t, "body", err, failover.Uncertain, "timeout", false)
}

// timeoutError is a net.Error that reports a timeout, as a third-party transport might.
type timeoutError struct{}

func (timeoutError) Error() string   { return "stalled" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// notTimeoutError is a net.Error that is not a timeout.
type notTimeoutError struct{}

func (notTimeoutError) Error() string   { return "broken" }
func (notTimeoutError) Timeout() bool   { return false }
func (notTimeoutError) Temporary() bool { return false }

func TestClassifyErrorValues(t *testing.T) {
	const addr = "10.0.0.7:8000"
	read := func(err error) error { return &net.OpError{Op: "read", Net: "tcp", Err: err} }
	write := func(err error) error { return &net.OpError{Op: "write", Net: "tcp", Err: err} }
	urlErr := func(err error) error {
		return &url.Error{Op: "Post", URL: "http://" + addr + "/v1/chat/completions", Err: err}
	}
	type want struct {
		class  failover.FailureClass
		reason failover.EndReason
		dial   bool
	}
	dead := func(reason failover.EndReason) want { return want{failover.Dead, reason, false} }
	dialed := func(reason failover.EndReason) want { return want{failover.Dead, reason, true} }
	uncertain := func(reason failover.EndReason) want { return want{failover.Uncertain, reason, false} }
	for _, tc := range []struct {
		name string
		err  error
		want want
	}{
		// The engine closed a kept-alive connection as the gateway reused it (net/http's
		// unexported errServerClosedIdle, as Do returns it).
		{"server closed idle connection", urlErr(errors.New("http: server closed idle connection")), dead("connection_closed")},
		// The request never reached the engine.
		{"bare ECONNREFUSED", syscall.ECONNREFUSED, dialed("connection_refused")},
		{"refused in url.Error", urlErr(dialError(addr, os.NewSyscallError("connect", syscall.ECONNREFUSED))), dialed("connection_refused")},
		{"dial i/o timeout", urlErr(dialError(addr, os.ErrDeadlineExceeded)), dialed("dial_timeout")},
		{"dial context deadline", dialError(addr, context.DeadlineExceeded), dialed("dial_timeout")},
		{"dial ETIMEDOUT wrapped", fmt.Errorf("connect: %w", dialError(addr, os.NewSyscallError("connect", syscall.ETIMEDOUT))), dialed("dial_timeout")},
		{"dial EHOSTUNREACH", urlErr(dialError(addr, os.NewSyscallError("connect", syscall.EHOSTUNREACH))), dialed("dial_failed")},
		{"dial ENETUNREACH", dialError(addr, os.NewSyscallError("connect", syscall.ENETUNREACH)), dialed("dial_failed")},
		{"dial unknown", dialError(addr, errors.New("odd")), dialed("dial_failed")},
		{"dial canceled", dialError(addr, context.Canceled), dialed("dial_failed")},
		{"bare DNS error", &net.DNSError{Err: "no such host", Name: "engine", IsNotFound: true}, dialed("dns_failed")},
		{"DNS in dial in url.Error", urlErr(dialError(addr, &net.DNSError{Err: "i/o timeout", Name: "engine", IsTimeout: true})), dialed("dns_failed")},

		// The engine reset or closed the connection.
		{"read ECONNRESET", urlErr(read(os.NewSyscallError("read", syscall.ECONNRESET))), dead("connection_reset")},
		{"write EPIPE", fmt.Errorf("writing request: %w", write(os.NewSyscallError("write", syscall.EPIPE))), dead("connection_reset")},
		{"bare ECONNRESET", syscall.ECONNRESET, dead("connection_reset")},
		{"EOF", io.EOF, dead("connection_closed")},
		{"unexpected EOF", io.ErrUnexpectedEOF, dead("connection_closed")},
		{"EOF in url.Error", urlErr(io.EOF), dead("connection_closed")},
		{"transport connection broken", urlErr(fmt.Errorf("net/http: HTTP/1.x transport connection broken: %w", io.EOF)), dead("connection_closed")},
		{"unexpected EOF wrapped", fmt.Errorf("reading body: %w", io.ErrUnexpectedEOF), dead("connection_closed")},

		// Nothing proves the engine stopped.
		{"context deadline", context.DeadlineExceeded, uncertain("timeout")},
		{"context deadline wrapped", fmt.Errorf("reading body: %w", context.DeadlineExceeded), uncertain("timeout")},
		{"context deadline in url.Error", urlErr(context.DeadlineExceeded), uncertain("timeout")},
		{"read deadline", read(os.ErrDeadlineExceeded), uncertain("timeout")},
		{"net.Error timeout", timeoutError{}, uncertain("timeout")},
		{"net.Error timeout deep in url.Error", urlErr(fmt.Errorf("proxy: %w", timeoutError{})), uncertain("timeout")},
		{"read ETIMEDOUT", read(os.NewSyscallError("read", syscall.ETIMEDOUT)), uncertain("tcp_timeout")},
		{"ETIMEDOUT in url.Error", urlErr(read(os.NewSyscallError("read", syscall.ETIMEDOUT))), uncertain("tcp_timeout")},
		{"read EHOSTUNREACH", urlErr(read(os.NewSyscallError("read", syscall.EHOSTUNREACH))), uncertain("host_unreachable")},
		{"write EHOSTUNREACH", write(os.NewSyscallError("write", syscall.EHOSTUNREACH)), uncertain("host_unreachable")},
		{"read ENETUNREACH", fmt.Errorf("stream: %w", read(os.NewSyscallError("read", syscall.ENETUNREACH))), uncertain("network_unreachable")},
		{"unknown", errors.New("weird"), uncertain("transport_error")},
		{"unknown in url.Error", urlErr(unknownError{}), uncertain("transport_error")},
		{"net.Error not a timeout", notTimeoutError{}, uncertain("transport_error")},
		{"closed locally", read(net.ErrClosed), uncertain("transport_error")},
		{"ECONNABORTED", read(os.NewSyscallError("read", syscall.ECONNABORTED)), uncertain("transport_error")},
		{"context canceled", context.Canceled, uncertain("transport_error")},
	} {
		f := ClassifyError(tc.err)
		if got := (want{f.Class, f.Reason, f.Dial}); got != tc.want {
			t.Errorf("%s: %v classified as %+v, want %+v", tc.name, tc.err, got, tc.want)
		}
	}
}

func TestClassifyStatus(t *testing.T) {
	for status, want := range map[int]failover.FailureClass{
		429: failover.Overloaded, 503: failover.Overloaded, 500: failover.Dead, 502: failover.Dead,
		400: failover.Rejected, 404: failover.Rejected, 422: failover.Rejected, 204: failover.Dead, 302: failover.Dead,
		424: failover.Dead, // TGI: generation failed in the engine
	} {
		if f := ClassifyStatus(status); f.Class != want {
			t.Errorf("status %d → %v, want %v", status, f.Class, want)
		}
	}
	if ClassifyStatus(http.StatusInternalServerError).Reason != "engine_status_500" {
		t.Fatal("reason must carry the status")
	}
}

// The client's own errors classify by their cause, as the table of docs/design.md §3 says,
// and Unsent says whether any byte of the request can have reached the engine.
func TestClassifyClientErrors(t *testing.T) {
	const addr = "10.0.0.7:8000"
	own := func(op Op, reused bool, sent Sent, err error) error {
		return &Error{Op: op, Addr: addr, Reused: reused, Sent: sent, Err: err}
	}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	type want struct {
		class        failover.FailureClass
		reason       failover.EndReason
		dial, unsent bool
	}
	for _, tc := range []struct {
		name string
		err  error
		want want
	}{
		{"dial refused", own(OpDial, false, SentNothing, dialError(addr, os.NewSyscallError("connect", syscall.ECONNREFUSED))),
			want{failover.Dead, "connection_refused", true, true}},
		{"TLS handshake failed", own(OpDial, false, SentNothing, fmt.Errorf("tls handshake: %w", errors.New("x509: unknown authority"))),
			want{failover.Dead, "dial_failed", true, true}},
		{"TLS handshake reset", own(OpDial, false, SentNothing, fmt.Errorf("tls handshake: %w", reset)),
			want{failover.Dead, "dial_failed", true, true}},
		{"context ended before the dial", own(OpDial, false, SentNothing, context.DeadlineExceeded),
			want{failover.Dead, "dial_timeout", true, true}},
		{"invalid request", fmt.Errorf("%w: path %q", ErrInvalidRequest, "x"), want{failover.Dead, "invalid_request", false, true}},
		{"write reset, nothing sent", own(OpWrite, true, SentNothing, os.NewSyscallError("write", syscall.EPIPE)),
			want{failover.Dead, "connection_reset", false, true}},
		{"write reset, part sent", own(OpWrite, false, SentPart, os.NewSyscallError("write", syscall.ECONNRESET)),
			want{failover.Dead, "connection_reset", false, false}},
		{"reused connection closed before the head", own(OpReadHead, true, SentAll, errors.Join(ErrServerClosedIdle, io.EOF)),
			want{failover.Dead, "connection_closed", false, false}},
		{"reused connection reset before the head", own(OpReadHead, true, SentAll, errors.Join(ErrServerClosedIdle, reset)),
			want{failover.Dead, "connection_closed", false, false}},
		{"fresh connection closed before the head", own(OpReadHead, false, SentAll, io.EOF),
			want{failover.Dead, "connection_closed", false, false}},
		{"closed mid-body", own(OpReadBody, false, SentAll, io.ErrUnexpectedEOF), want{failover.Dead, "connection_closed", false, false}},
		{"reset mid-body", own(OpReadBody, true, SentAll, reset), want{failover.Dead, "connection_reset", false, false}},
		{"malformed head", own(OpReadHead, false, SentAll, &ProtocolError{What: "bad status line"}),
			want{failover.Uncertain, "malformed_response", false, false}},
		{"malformed chunk", own(OpReadBody, false, SentAll, &ProtocolError{What: "bad chunk size"}),
			want{failover.Uncertain, "malformed_response", false, false}},
		{"context deadline mid-body", own(OpReadBody, false, SentAll, context.DeadlineExceeded),
			want{failover.Uncertain, "timeout", false, false}},
		{"context cancelled while writing", own(OpWrite, false, SentPart, context.Canceled),
			want{failover.Uncertain, "transport_error", false, false}},
		{"ETIMEDOUT mid-body", own(OpReadBody, false, SentAll, &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ETIMEDOUT)}),
			want{failover.Uncertain, "tcp_timeout", false, false}},
		{"EHOSTUNREACH mid-body", own(OpReadBody, false, SentAll, &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.EHOSTUNREACH)}),
			want{failover.Uncertain, "host_unreachable", false, false}},
		{"net/http dial error is unsent", dialError(addr, os.NewSyscallError("connect", syscall.ECONNREFUSED)),
			want{failover.Dead, "connection_refused", true, true}},
		{"net/http read error is not", io.ErrUnexpectedEOF, want{failover.Dead, "connection_closed", false, false}},
	} {
		f := ClassifyError(tc.err)
		if got := (want{f.Class, f.Reason, f.Dial, f.Unsent}); got != tc.want {
			t.Errorf("%s: %v classified as %+v, want %+v", tc.name, tc.err, got, tc.want)
		}
	}
}
