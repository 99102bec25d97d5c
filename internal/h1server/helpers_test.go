package h1server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/syncbuf"
)

// failAfter bounds every wait in these tests. It is only a failure bound: nothing waits
// for it to pass.
const failAfter = 10 * time.Second

// testServer is a Server on a loopback port for one test; it is closed when the test ends.
type testServer struct {
	*Server
	addr string
	log  *syncbuf.Buffer // what the server logged

	served    chan error // Serve's result
	serveOnce sync.Once
	serveErr  error
}

// startServer serves h on 127.0.0.1; configure, if given, sets the Server's fields.
func startServer(t testing.TB, h http.Handler, configure ...func(*Server)) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	return startServerOn(t, ln, h, configure...)
}

func startServerOn(t testing.TB, ln net.Listener, h http.Handler, configure ...func(*Server)) *testServer {
	t.Helper()
	ts := &testServer{Server: &Server{Handler: h}, addr: ln.Addr().String(), log: &syncbuf.Buffer{}, served: make(chan error, 1)}
	ts.Log = slog.New(slog.NewTextHandler(ts.log, nil))
	for _, f := range configure {
		f(ts.Server)
	}
	go func() { ts.served <- ts.Serve(ln) }()
	t.Cleanup(func() {
		ts.Close()
		if err := ts.serveResult(t); !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve returned %v, want http.ErrServerClosed", err)
		}
	})
	return ts
}

// serveResult waits for Serve to return and gives its error.
func (ts *testServer) serveResult(t testing.TB) error {
	t.Helper()
	ts.serveOnce.Do(func() {
		select {
		case ts.serveErr = <-ts.served:
		case <-time.After(failAfter):
			ts.serveErr = errors.New("Serve did not return")
		}
	})
	return ts.serveErr
}

func (ts *testServer) url(path string) string { return "http://" + ts.addr + path }

// recv waits for a value on ch, failing the test if none comes.
func recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(failAfter):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// newClient is a net/http client with a Transport of its own, whose idle connections are
// closed when the test ends.
func newClient(t testing.TB) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: failAfter}
}

// do sends req and reads its whole response; reused reports whether the request went
// over a connection an earlier request used.
func do(t testing.TB, c *http.Client, req *http.Request) (resp *http.Response, body string, reused bool) {
	t.Helper()
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused }}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", req.Method, req.URL, err)
	}
	return resp, string(b), reused
}

func newRequest(t testing.TB, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// rawConn is a client connection the test writes bytes to and reads responses from.
type rawConn struct {
	*net.TCPConn
	t  testing.TB
	br *bufio.Reader
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	tc := nc.(*net.TCPConn)
	tc.SetDeadline(time.Now().Add(failAfter)) // a failure bound on every read and write
	t.Cleanup(func() { tc.Close() })
	return &rawConn{TCPConn: tc, t: t, br: bufio.NewReader(tc)}
}

func (c *rawConn) send(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.TCPConn, s); err != nil {
		c.t.Fatalf("writing to the server: %v", err)
	}
}

// response reads the next response (to a request of the given method) and its body.
func (c *rawConn) response(method string) (*http.Response, string) {
	c.t.Helper()
	resp, err := http.ReadResponse(c.br, &http.Request{Method: method})
	if err != nil {
		c.t.Fatalf("reading a response: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatalf("reading a response's body: %v", err)
	}
	return resp, string(body)
}

// expectClosed checks that the server sends nothing more and closes the connection.
func (c *rawConn) expectClosed() {
	c.t.Helper()
	rest, err := io.ReadAll(c.br)
	if len(rest) > 0 {
		c.t.Errorf("after the last response the server sent %q", rest)
	}
	if err != nil && !isReset(err) { // a reset: the server closed with bytes of ours unread
		c.t.Errorf("waiting for the server to close: %v", err)
	}
}

func isReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }

// get is a minimal HTTP/1.1 GET for raw connections.
func get(path string) string { return "GET " + path + " HTTP/1.1\r\nHost: test\r\n\r\n" }

func headerLines(resp *http.Response, name string) string {
	return strings.Join(resp.Header.Values(name), ", ")
}
