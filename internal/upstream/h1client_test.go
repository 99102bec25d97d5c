package upstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/failover"
)

// The client is tested against real servers on loopback: net/http's for what engines
// normally send, and rawServer for what they send when they break.

// sseEvents is what sseEngine streams: n events of about 150 bytes, one flush each, then
// [DONE], as vLLM streams a chat completion.
func sseEvents(n int) []string {
	events := make([]string, 0, n+1)
	for i := range n {
		events = append(events, fmt.Sprintf(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"token %03d"},"finish_reason":null}]}`+"\n\n", i))
	}
	return append(events, "data: [DONE]\n\n")
}

// sseEngine is a net/http engine that streams events chunked, flushing after each, and
// counts the connections it accepted. It records the last request it read.
type sseEngine struct {
	srv   *httptest.Server
	conns atomic.Int32
	last  atomic.Pointer[seenRequest]
}

type seenRequest struct {
	method, path, host, body, contentType string
	contentLength                         int64
	close                                 bool
}

func startSSE(t *testing.T, events []string, opts ...func(http.ResponseWriter)) *sseEngine {
	t.Helper()
	e := &sseEngine{}
	e.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		e.last.Store(&seenRequest{method: r.Method, path: r.URL.RequestURI(), host: r.Host, body: string(body),
			contentType: r.Header.Get("Content-Type"), contentLength: r.ContentLength, close: r.Close})
		w.Header().Set("Content-Type", "text/event-stream")
		for _, o := range opts {
			o(w)
		}
		for _, ev := range events {
			io.WriteString(w, ev)
			w.(http.Flusher).Flush()
		}
	}))
	e.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			e.conns.Add(1)
		}
	}
	e.srv.Start()
	t.Cleanup(e.srv.Close)
	return e
}

// A chunked SSE stream arrives whole, whatever the size of the reader's buffer (smaller
// than the connection's, read through it; larger, read straight into it), and the
// connection carries every request in turn.
func TestClientStreamsChunkedSSE(t *testing.T) {
	events := sseEvents(64)
	want := strings.Join(events, "")
	e := startSSE(t, events)
	c := newClient(t, Options{})
	for i, size := range []int{8 << 10, 100, 1, 32 << 10, 4 << 10, 0} {
		resp, err := c.Do(context.Background(), postTo(e.srv.URL))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Status != 200 || resp.Header.Get("content-type") != "text/event-stream" || resp.ContentLength != -1 {
			t.Fatalf("status %d, header %v, length %d", resp.Status, resp.Header, resp.ContentLength)
		}
		body, err := readAll(resp, size)
		if err != nil || string(body) != want {
			t.Fatalf("request %d, buffer %d: body of %d bytes (want %d), %v", i, size, len(body), len(want), err)
		}
		resp.Close()
		if n := c.pool.count(e.srv.URL); n != 1 {
			t.Fatalf("request %d: %d idle connections after the body's end, want 1", i, n)
		}
	}
	if n := e.conns.Load(); n != 1 {
		t.Fatalf("%d connections for 6 sequential requests, want 1", n)
	}
	got := *e.last.Load()
	if want := (seenRequest{method: "POST", path: "/v1/chat/completions", host: strings.TrimPrefix(e.srv.URL, "http://"),
		body: requestBody, contentType: "application/json", contentLength: int64(len(requestBody))}); got != want {
		t.Fatalf("the engine read %+v, want %+v", got, want)
	}
}

// A body with a Content-Length ends after exactly that many bytes and its connection is
// reused; one closed before its end takes its connection with it.
func TestClientContentLength(t *testing.T) {
	payload := strings.Repeat("0123456789", 1000)
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Length", fmt.Sprint(len(payload)))
		io.WriteString(w, payload)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	c := newClient(t, Options{})

	for _, size := range []int{8 << 10, 333, 0} {
		resp, err := c.Do(context.Background(), postTo(srv.URL))
		if err != nil {
			t.Fatal(err)
		}
		if resp.ContentLength != int64(len(payload)) {
			t.Fatalf("ContentLength %d", resp.ContentLength)
		}
		body, err := readAll(resp, size)
		if err != nil || string(body) != payload {
			t.Fatalf("body of %d bytes, %v", len(body), err)
		}
		resp.Close()
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections, want 1", n)
	}

	resp, err := c.Do(context.Background(), postTo(srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := resp.Read(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	resp.Close()
	if _, err := resp.Read(make([]byte, 10)); !errors.Is(err, ErrBodyClosed) {
		t.Fatalf("read after Close: %v", err)
	}
	if n := c.pool.count(srv.URL); n != 0 {
		t.Fatalf("a connection closed mid-body was pooled (%d idle)", n)
	}
	resp, err = c.Do(context.Background(), postTo(srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	resp.Close()
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2: the one closed mid-body is not reused", n)
	}
}

// A response closed before the end of its body closes its connection, even when nothing
// of the body is left in the client's buffer: the rest is still on its way, and the
// engine must see the close to stop. Bytes that come after a body's end, which no request
// asked for, keep the connection out of the pool as well.
func TestClientDropsConnectionsThatCannotCarryAnotherExchange(t *testing.T) {
	for _, tc := range []struct {
		name, rest string
		read       func(*Response) error
	}{
		{"closed mid-body", "hello", func(r *Response) error {
			n, err := r.Read(make([]byte, 8<<10))
			if n != 5 || err != nil {
				return fmt.Errorf("read %d, %v; want the 5 bytes sent", n, err)
			}
			return r.Close()
		}},
		{"bytes after the body", "hello, and more", func(r *Response) error {
			body, err := readAll(r, 8<<10)
			if string(body) != "hello, and" || err != nil {
				return fmt.Errorf("%q, %v", body, err)
			}
			return nil
		}},
		{"closed mid-body after Next", "hello", func(r *Response) error {
			b, err := r.Next()
			if string(b) != "hello" || err != nil {
				return fmt.Errorf("Next: %q, %v; want the 5 bytes sent", b, err)
			}
			return r.Close()
		}},
		{"bytes after the body, read with Next", "hello, and more", func(r *Response) error {
			body, err := readAll(r, 0)
			if string(body) != "hello, and" || err != nil {
				return fmt.Errorf("%q, %v", body, err)
			}
			return r.Close()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			headRead, sawClose := make(chan struct{}), make(chan struct{})
			s := startRaw(t, func(n int, c *net.TCPConn, rd *bufio.Reader) {
				if n > 0 || !readRawRequest(rd) {
					return
				}
				// The head alone first, so that the client's buffer holds nothing else.
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n")
				<-headRead
				io.WriteString(c, tc.rest)
				if _, err := rd.ReadByte(); err == io.EOF {
					close(sawClose)
				}
			})
			c := newClient(t, Options{})
			resp, err := c.Do(context.Background(), postTo(s.base()))
			if err != nil {
				t.Fatal(err)
			}
			close(headRead)
			if err := tc.read(resp); err != nil {
				t.Fatal(err)
			}
			if n := c.pool.count(s.base()); n != 0 {
				t.Fatalf("%d idle connections, want 0", n)
			}
			<-sawClose
		})
	}
}

// A connection is kept only when both sides allow it: a request with Close, a response
// with Connection: close, an HTTP/1.0 response and a body delimited by the close all end
// with the connection closed.
func TestClientKeepAliveOnlyWhenBothAllow(t *testing.T) {
	events := sseEvents(2)
	t.Run("request asks to close", func(t *testing.T) {
		e := startSSE(t, events)
		c := newClient(t, Options{})
		req := postTo(e.srv.URL)
		req.Close = true
		resp, err := c.Do(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := readAll(resp, 8<<10); err != nil {
			t.Fatal(err)
		}
		if !e.last.Load().close {
			t.Fatal("the engine did not see Connection: close")
		}
		if n := c.pool.count(e.srv.URL); n != 0 {
			t.Fatalf("%d idle connections, want 0", n)
		}
	})
	t.Run("response asks to close", func(t *testing.T) {
		e := startSSE(t, events, func(w http.ResponseWriter) { w.Header().Set("Connection", "close") })
		c := newClient(t, Options{})
		resp, err := c.Do(context.Background(), postTo(e.srv.URL))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := readAll(resp, 8<<10); err != nil {
			t.Fatal(err)
		}
		if n := c.pool.count(e.srv.URL); n != 0 {
			t.Fatalf("%d idle connections, want 0", n)
		}
	})
	for _, tc := range []struct{ name, response, body string }{
		{"HTTP/1.0 with a length", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 5\r\n\r\nhello", "hello"},
		{"delimited by the close", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nhello, until the close", "hello, until the close"},
		{"HTTP/1.0 delimited by the close", "HTTP/1.0 200 OK\r\n\r\nold", "old"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startRaw(t, func(_ int, c *net.TCPConn, rd *bufio.Reader) {
				if readRawRequest(rd) {
					io.WriteString(c, tc.response)
					c.Close()
				}
			})
			c := newClient(t, Options{})
			resp, err := c.Do(context.Background(), postTo(s.base()))
			if err != nil {
				t.Fatal(err)
			}
			body, err := readAll(resp, 8<<10)
			if err != nil || string(body) != tc.body {
				t.Fatalf("body %q, %v", body, err)
			}
			if n := c.pool.count(s.base()); n != 0 {
				t.Fatalf("%d idle connections, want 0", n)
			}
		})
	}
}

// readRawRequest reads one request and its body from rd.
func readRawRequest(rd *bufio.Reader) bool {
	req, err := http.ReadRequest(rd)
	if err != nil {
		return false
	}
	_, err = io.Copy(io.Discard, req.Body)
	return err == nil
}

// Interim 1xx responses are skipped; responses that have no body (204, 304, and any
// answer to HEAD) end at their head and keep their connection.
func TestClientInterimAndBodilessResponses(t *testing.T) {
	responses := []string{
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\n",
		"HTTP/1.1 304 Not Modified\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", // to HEAD
	}
	s := startRaw(t, func(_ int, c *net.TCPConn, rd *bufio.Reader) {
		for _, r := range responses {
			if !readRawRequest(rd) {
				return
			}
			io.WriteString(c, r)
		}
	})
	c := newClient(t, Options{})
	for i, want := range []struct {
		status int
		body   string
		length int64
	}{{200, "ok", 2}, {204, "", 7}, {304, "", -1}, {200, "", 10}} {
		req := postTo(s.base())
		if i == 3 {
			req = &Request{Method: http.MethodHead, Base: s.base(), Path: "/health"}
		}
		resp, err := c.Do(context.Background(), req)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		body, err := readAll(resp, 8<<10)
		if err != nil || resp.Status != want.status || string(body) != want.body || resp.ContentLength != want.length {
			t.Fatalf("response %d: %d %q (length %d), %v; want %+v", i, resp.Status, body, resp.ContentLength, err, want)
		}
		resp.Close()
	}
	if n := s.accepted.Load(); n != 1 {
		t.Fatalf("%d connections, want 1", n)
	}
}

// The engine closes a kept-alive connection having read the request (it died, or its
// close crossed the request): the client reports it, marked as such and with the request
// sent, and never sends the request again — not on that connection, not on a new one.
func TestClientNeverResendsOnReusedConnection(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(*net.TCPConn)
	}{
		{"FIN", func(c *net.TCPConn) { c.Close() }},
		{"reset", reset},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startRaw(t, func(n int, c *net.TCPConn, rd *bufio.Reader) {
				if n > 0 {
					c.Close()
					return
				}
				if !readRawRequest(rd) {
					return
				}
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				if !readRawRequest(rd) {
					return
				}
				tc.end(c)
			})
			var dials atomic.Int32
			c := newClient(t, Options{Dial: countingDial(&dials)})
			resp, err := c.Do(context.Background(), postTo(s.base()))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := readAll(resp, 8<<10); err != nil {
				t.Fatal(err)
			}
			resp, err = c.Do(context.Background(), postTo(s.base()))
			if err == nil {
				resp.Close()
				t.Fatal("a request the engine never answered got a response")
			}
			e := ownError(t, err)
			if e.Op != OpReadHead || !e.Reused || e.Sent != SentAll || !errors.Is(err, ErrServerClosedIdle) {
				t.Fatalf("error %v: %+v", err, e)
			}
			expectFailure(t, "Do", err, failover.Dead, "connection_closed", false)
			if ClassifyError(err).Unsent {
				t.Fatal("a request that was written is classified unsent")
			}
			s.close()
			if d, a := dials.Load(), s.accepted.Load(); d != 1 || a != 1 {
				t.Fatalf("%d dials, %d connections accepted: want 1 each", d, a)
			}
		})
	}
}

// An engine that closed an idle connection long before it is reused (llama.cpp's server
// closes after every stream) costs nothing: the pool sees the close and dials anew,
// before writing a byte.
func TestClientSkipsIdleConnectionTheEngineClosed(t *testing.T) {
	s := startRaw(t, func(_ int, c *net.TCPConn, rd *bufio.Reader) {
		if readRawRequest(rd) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			c.Close() // keep-alive offered, and closed anyway
		}
	})
	c := newClient(t, Options{})
	for i := range 2 {
		resp, err := c.Do(context.Background(), postTo(s.base()))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		body, err := readAll(resp, 8<<10)
		if err != nil || string(body) != "ok" {
			t.Fatalf("request %d: %q, %v", i, body, err)
		}
		idle := c.idleConns(s.base())
		if len(idle) != 1 {
			t.Fatalf("%d idle connections, want 1", len(idle))
		}
		if idle[0].raw == nil {
			t.Skip("no look at idle sockets on this platform")
		}
		awaitPeerClose(t, idle[0])
	}
	if n := s.accepted.Load(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
}

// A reset or a FIN on a fresh connection is classified as the engine's, before the
// response and in the middle of the body.
func TestClientResetOrClosedOnFreshConnection(t *testing.T) {
	type want struct {
		op     Op
		reason failover.EndReason
	}
	for _, tc := range []struct {
		name  string
		serve func(*net.TCPConn)
		want  want
	}{
		{"reset before the response", reset, want{OpReadHead, "connection_reset"}},
		{"closed before the response", func(c *net.TCPConn) { c.Close() }, want{OpReadHead, "connection_closed"}},
		{"closed in the head", func(c *net.TCPConn) { io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-"); c.Close() },
			want{OpReadHead, "connection_closed"}},
		{"reset mid-body", func(c *net.TCPConn) { streamHeadAndFirstEvent(c); reset(c) }, want{OpReadBody, "connection_reset"}},
		{"closed mid-body", func(c *net.TCPConn) { streamHeadAndFirstEvent(c); c.Close() }, want{OpReadBody, "connection_closed"}},
		{"closed mid-length", func(c *net.TCPConn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"+firstEvent)
			c.Close()
		}, want{OpReadBody, "connection_closed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startRaw(t, func(_ int, c *net.TCPConn, rd *bufio.Reader) {
				if readRawRequest(rd) {
					tc.serve(c)
				}
			})
			c := newClient(t, Options{})
			resp, err := c.Do(context.Background(), postTo(s.base()))
			if err == nil {
				var body []byte
				body, err = readAll(resp, 8<<10)
				if string(body) != firstEvent {
					t.Fatalf("body %q before the error, want %q", body, firstEvent)
				}
			}
			e := ownError(t, err)
			if e.Op != tc.want.op || e.Reused || e.Sent != SentAll || errors.Is(err, ErrServerClosedIdle) {
				t.Fatalf("error %v: %+v", err, e)
			}
			expectFailure(t, tc.name, err, failover.Dead, tc.want.reason, false)
			if resp != nil {
				if _, err2 := resp.Read(make([]byte, 8)); err2 != err {
					t.Fatalf("a later Read returned %v, want the same error", err2)
				}
			}
		})
	}
}

// A response the client cannot parse is uncertain: the engine behind it may be decoding.
func TestClientMalformedResponses(t *testing.T) {
	many := strings.Repeat("X-A: b\r\n", 101)
	for _, tc := range []struct{ name, response string }{
		{"not HTTP", "SSH-2.0-OpenSSH_9.6\r\n\r\n"},
		{"bad status code", "HTTP/1.1 2000 OK\r\n\r\n"},
		{"HTTP/2 status line", "HTTP/2 200\r\n\r\n"},
		{"too many fields", "HTTP/1.1 200 OK\r\n" + many + "\r\n"},
		{"head too large", "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", 40<<10) + "\r\n\r\n"},
		{"folded header", "HTTP/1.1 200 OK\r\nX-A: b\r\n c\r\nContent-Length: 0\r\n\r\n"},
		{"space before colon", "HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n"},
		{"bare CR", "HTTP/1.1 200 OK\r\nX-A: b\rContent-Length: 0\r\n\r\n"},
		{"conflicting lengths", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"},
		{"negative length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"},
		{"gzip coding", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"},
		{"chunked in HTTP/1.0", "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
		{"bad chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"},
		{"chunk size overflow", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n"},
		{"chunk without CRLF", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n"},
		{"chunk line with bare LF", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n"},
		{"switching protocols", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n"},
		{"six interim responses", strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", 6) + "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startRaw(t, func(_ int, c *net.TCPConn, rd *bufio.Reader) {
				if readRawRequest(rd) {
					io.WriteString(c, tc.response)
					rd.ReadByte() // hold the connection open until the client closes it
				}
			})
			c := newClient(t, Options{})
			resp, err := c.Do(context.Background(), postTo(s.base()))
			if err == nil {
				_, err = readAll(resp, 8<<10)
			}
			var pe *ProtocolError
			if !errors.As(err, &pe) {
				t.Fatalf("%v is not a ProtocolError", err)
			}
			expectFailure(t, tc.name, err, failover.Uncertain, "malformed_response", false)
		})
	}
}

// writeFaultConn fails writes with err once failAfter bytes were written.
type writeFaultConn struct {
	net.Conn
	failAfter int
	err       error
}

func (c *writeFaultConn) Write(p []byte) (int, error) {
	if len(p) <= c.failAfter {
		c.failAfter -= len(p)
		return c.Conn.Write(p)
	}
	n, _ := c.Conn.Write(p[:c.failAfter])
	c.failAfter = 0
	return n, c.err
}

// A failed write says whether any byte of the request went out: only a request of which
// nothing was written is unsent, which makes its rerun free.
func TestClientWriteFailureSaysWhatWasSent(t *testing.T) {
	broken := &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}
	for _, tc := range []struct {
		name      string
		failAfter int
		sent      Sent
	}{
		{"nothing written", 0, SentNothing},
		{"head partly written", 20, SentPart},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startRaw(t, func(_ int, c *net.TCPConn, rd *bufio.Reader) { io.Copy(io.Discard, rd) })
			dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
				nc, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return &writeFaultConn{Conn: nc, failAfter: tc.failAfter, err: broken}, nil
			}
			c := newClient(t, Options{Dial: dial})
			_, err := c.Do(context.Background(), postTo(s.base()))
			e := ownError(t, err)
			if e.Op != OpWrite || e.Sent != tc.sent || e.Reused {
				t.Fatalf("error %v: %+v", err, e)
			}
			f := ClassifyError(err)
			if f.Class != failover.Dead || f.Reason != "connection_reset" || f.Dial || f.Unsent != (tc.sent == SentNothing) {
				t.Fatalf("classified %+v", f)
			}
		})
	}
}

// Cancelling the request's context interrupts Do while it waits for the head, and a Read
// while it waits for the body, at once; the connection is closed, so the engine sees it.
func TestClientCancellation(t *testing.T) {
	t.Run("waiting for the head", func(t *testing.T) {
		got, sawClose := make(chan struct{}), make(chan struct{})
		s := startRaw(t, func(_ int, c *net.TCPConn, rd *bufio.Reader) {
			if readRawRequest(rd) {
				close(got)
				if _, err := rd.ReadByte(); err == io.EOF {
					close(sawClose)
				}
			}
		})
		c := newClient(t, Options{})
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-got; cancel() }()
		_, err := c.Do(ctx, postTo(s.base()))
		e := ownError(t, err)
		if e.Op != OpReadHead || e.Sent != SentAll || !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v: %+v", err, e)
		}
		<-sawClose
	})
	t.Run("waiting for the body", func(t *testing.T) {
		engineSawCancel := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			io.WriteString(w, firstEvent)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			close(engineSawCancel)
		}))
		t.Cleanup(srv.Close)
		c := newClient(t, Options{})
		ctx, cancel := context.WithCancel(context.Background())
		resp, err := c.Do(ctx, postTo(srv.URL))
		if err != nil {
			t.Fatal(err)
		}
		readFirstEvent(t, resp)
		cancel()
		_, err = resp.Read(make([]byte, 8<<10))
		e := ownError(t, err)
		if e.Op != OpReadBody || !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v: %+v", err, e)
		}
		<-engineSawCancel
		if n := c.pool.count(srv.URL); n != 0 {
			t.Fatalf("%d idle connections after a cancel, want 0", n)
		}
	})
	t.Run("deadline while reading the body", func(t *testing.T) {
		target := streamEngine(t)
		c := newClient(t, Options{})
		ctx := newExpiringCtx()
		defer ctx.expire()
		resp, err := c.Do(ctx, postTo(target))
		if err != nil {
			t.Fatal(err)
		}
		readFirstEvent(t, resp)
		ctx.expire()
		_, err = resp.Read(make([]byte, 8<<10))
		expectFailure(t, "body", err, failover.Uncertain, "timeout", false)
	})
	t.Run("writing a body the engine does not read", func(t *testing.T) {
		accepted, done := make(chan struct{}), make(chan struct{})
		s := startRaw(t, func(_ int, c *net.TCPConn, rd *bufio.Reader) {
			close(accepted)
			<-done // reading nothing, so the client's write fills the socket's buffers and waits
		})
		t.Cleanup(func() { close(done) }) // before the server closes
		c := newClient(t, Options{})
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-accepted; cancel() }()
		req := postTo(s.base())
		req.Body = make([]byte, 64<<20) // more than loopback's socket buffers hold
		_, err := c.Do(ctx, req)
		e := ownError(t, err)
		if (e.Op != OpWrite && e.Op != OpDial) || e.Sent == SentAll || !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v: %+v", err, e)
		}
	})
	t.Run("already cancelled", func(t *testing.T) {
		var dials atomic.Int32
		c := newClient(t, Options{Dial: countingDial(&dials)})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := c.Do(ctx, postTo("http://127.0.0.1:9"))
		if e := ownError(t, err); e.Op != OpDial || !errors.Is(err, context.Canceled) || dials.Load() != 0 {
			t.Fatalf("error %v: %+v after %d dials", err, e, dials.Load())
		}
	})
}

// A refused dial is the client's dial failure: dead, free to rerun, nothing sent.
func TestClientDialRefused(t *testing.T) {
	c := newClient(t, Options{})
	_, err := c.Do(context.Background(), postTo("http://"+closedAddr(t)))
	if e := ownError(t, err); e.Op != OpDial || e.Sent != SentNothing {
		t.Fatalf("error %v: %+v", err, e)
	}
	expectFailure(t, "Do", err, failover.Dead, "connection_refused", true)
	if !ClassifyError(err).Unsent {
		t.Fatal("a dial failure is not classified unsent")
	}
}

// An https replica is spoken to over TLS, and its connection is reused too.
func TestClientTLS(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/hold" {
			io.WriteString(w, firstEvent)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		io.WriteString(w, "over tls")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the untrusting client's handshake
	srv.StartTLS()
	t.Cleanup(srv.Close)
	c := newClient(t, Options{TLS: srv.Client().Transport.(*http.Transport).TLSClientConfig})
	for range 2 {
		resp, err := c.Do(context.Background(), postTo(srv.URL))
		if err != nil {
			t.Fatal(err)
		}
		body, err := readAll(resp, 8<<10)
		if err != nil || string(body) != "over tls" {
			t.Fatalf("%q, %v", body, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections, want 1", n)
	}

	// A cancel closes the socket under TLS at once.
	ctx, cancel := context.WithCancel(context.Background())
	req := postTo(srv.URL)
	req.Path = "/hold"
	resp, err := c.Do(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	readFirstEvent(t, resp)
	cancel()
	if _, err := resp.Read(make([]byte, 8<<10)); !errors.Is(err, context.Canceled) {
		t.Fatalf("read after cancel: %v", err)
	}

	untrusted := newClient(t, Options{})
	_, err = untrusted.Do(context.Background(), postTo(srv.URL))
	expectFailure(t, "untrusted certificate", err, failover.Dead, "dial_failed", true)
}

// A request the client would have to write wrongly is refused before anything is dialled.
func TestClientRefusesInvalidRequests(t *testing.T) {
	var dials atomic.Int32
	c := newClient(t, Options{Dial: countingDial(&dials)})
	for _, tc := range []struct {
		name string
		edit func(*Request)
	}{
		{"value with CRLF", func(r *Request) { r.Header.Set("X-A", "b\r\nX-Injected: 1") }},
		{"name with space", func(r *Request) { r.Header["X A"] = []string{"b"} }},
		{"Host", func(r *Request) { r.Header.Set("Host", "elsewhere") }},
		{"Content-Length", func(r *Request) { r.Header.Set("Content-Length", "1") }},
		{"Transfer-Encoding", func(r *Request) { r.Header["transfer-encoding"] = []string{"chunked"} }},
		{"Connection", func(r *Request) { r.Header.Set("Connection", "keep-alive") }},
		{"method", func(r *Request) { r.Method = "GET /x" }},
		{"path without slash", func(r *Request) { r.Path = "v1/chat" }},
		{"path with space", func(r *Request) { r.Path = "/v1/chat completions" }},
		{"base with path", func(r *Request) { r.Base = "http://127.0.0.1:9/v1" }},
		{"base not http", func(r *Request) { r.Base = "ftp://127.0.0.1:9" }},
	} {
		req := postTo("http://127.0.0.1:9")
		tc.edit(req)
		_, err := c.Do(context.Background(), req)
		if !errors.Is(err, ErrInvalidRequest) {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if f := ClassifyError(err); f.Class != failover.Dead || f.Reason != "invalid_request" || !f.Unsent || f.Dial {
			t.Fatalf("%s: classified %+v", tc.name, f)
		}
	}
	if n := dials.Load(); n != 0 {
		t.Fatalf("%d dials for invalid requests", n)
	}
}

// The client runs no goroutine of its own: connections in use or idle cost none. (net/http's
// transport runs two per connection.)
func TestClientRunsNoGoroutinePerConnection(t *testing.T) {
	const n = 8
	s := startRaw(t, func(_ int, c *net.TCPConn, rd *bufio.Reader) {
		for readRawRequest(rd) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
		}
	})
	c := newClient(t, Options{})
	before := runtime.NumGoroutine()
	resps := make([]*Response, n)
	for i := range resps {
		resp, err := c.Do(context.Background(), postTo(s.base()))
		if err != nil {
			t.Fatal(err)
		}
		resps[i] = resp
	}
	if a := s.accepted.Load(); a != n {
		t.Fatalf("%d connections, want %d", a, n)
	}
	// The server runs one goroutine per connection; the client none. (Goroutines of
	// earlier tests may still be ending, so the counts are bounds.)
	busy := runtime.NumGoroutine()
	if busy-before > n {
		t.Fatalf("%d more goroutines with %d connections in use", busy-before, n)
	}
	for _, resp := range resps {
		if body, err := readAll(resp, 8<<10); err != nil || string(body) != "hello" {
			t.Fatalf("%q, %v", body, err)
		}
	}
	if k := c.pool.count(s.base()); k != n {
		t.Fatalf("%d idle connections, want %d", k, n)
	}
	if idle := runtime.NumGoroutine(); idle > busy {
		t.Fatalf("%d goroutines with %d idle connections, %d with them busy", idle, n, busy)
	}
	for range n {
		resp, err := c.Do(context.Background(), postTo(s.base()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := readAll(resp, 8<<10); err != nil {
			t.Fatal(err)
		}
	}
	if a := s.accepted.Load(); a != n {
		t.Fatalf("%d connections after reuse, want %d", a, n)
	}
}

// Large things go through whole: a request body of a long-context prompt (written from the
// caller's slice, after the head), a response head larger than the connection's buffer
// (which shrinks back once the head is read), and a trailer, within the limits and over them.
func TestClientLargeBodiesHeadsAndTrailers(t *testing.T) {
	t.Run("1 MiB request body", func(t *testing.T) {
		e := startSSE(t, sseEvents(1))
		c := newClient(t, Options{})
		req := postTo(e.srv.URL)
		req.Body = []byte(`{"messages":[{"role":"user","content":"` + strings.Repeat("long context ", 80<<10) + `"}]}`)
		resp, err := c.Do(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := readAll(resp, 8<<10); err != nil {
			t.Fatal(err)
		}
		if got := e.last.Load(); got.body != string(req.Body) || got.contentLength != int64(len(req.Body)) {
			t.Fatalf("the engine read %d bytes (Content-Length %d), want %d", len(got.body), got.contentLength, len(req.Body))
		}
	})

	// A body in parts (the client's bytes around a replaced member) reaches the engine
	// joined, under one Content-Length: small, copied after the head; large, written from
	// the parts themselves.
	for _, size := range []int{100, 1 << 20} {
		t.Run(fmt.Sprintf("body of %d bytes in parts", size), func(t *testing.T) {
			e := startSSE(t, sseEvents(1))
			c := newClient(t, Options{})
			whole := `{"messages":[{"role":"user","content":"` + strings.Repeat("x", size) + `"}],"stream":true}`
			cut := strings.LastIndexByte(whole, '}')
			req := postTo(e.srv.URL)
			req.Body = []byte(whole[:cut])
			req.More = [][]byte{nil, []byte(`,"stream_options":{"include_usage":true}`), []byte(whole[cut:])}
			want := whole[:cut] + `,"stream_options":{"include_usage":true}` + whole[cut:]
			resp, err := c.Do(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := readAll(resp, 8<<10); err != nil {
				t.Fatal(err)
			}
			if got := e.last.Load(); got.body != want || got.contentLength != int64(len(want)) {
				t.Fatalf("the engine read %d bytes (Content-Length %d), want %d", len(got.body), got.contentLength, len(want))
			}
		})
	}

	big := strings.Repeat("b", 20<<10)
	responses := []string{
		"HTTP/1.1 200 OK\r\nX-Big: " + big + "\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-T1: a\r\nX-T2: b\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-T1: a\r\nX-T2: b\r\nX-T3: c\r\n\r\n",
	}
	s := startRaw(t, func(_ int, c *net.TCPConn, rd *bufio.Reader) {
		for _, r := range responses {
			if !readRawRequest(rd) {
				return
			}
			io.WriteString(c, r)
		}
	})
	c := newClient(t, Options{MaxHeaderFields: 2})
	for i, r := range responses[:2] {
		resp, err := c.Do(context.Background(), postTo(s.base()))
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		if i == 0 && resp.Header.Get("X-Big") != big {
			t.Fatalf("X-Big of %d bytes", len(resp.Header.Get("X-Big")))
		}
		if n, err := resp.Read(nil); n != 0 || err != nil {
			t.Fatalf("Read(nil): %d, %v", n, err)
		}
		if body, err := readAll(resp, 8<<10); err != nil || string(body) != "ok" {
			t.Fatalf("response %d (%.40q…): %q, %v", i, r, body, err)
		}
		idle := c.idleConns(s.base())
		// The head's larger buffer is gone, and an idle connection holds no buffer at all.
		if len(idle) != 1 || idle[0].buf != nil {
			t.Fatalf("response %d: idle connections %d, buffer %d bytes; want 1 holding none", i, len(idle), len(idle[0].buf))
		}
	}
	resp, err := c.Do(context.Background(), postTo(s.base()))
	if err != nil {
		t.Fatal(err)
	}
	_, err = readAll(resp, 8<<10)
	var pe *ProtocolError
	if !errors.As(err, &pe) || pe.What != "trailer over the header limits" {
		t.Fatalf("a trailer of 3 fields over a limit of 2: %v", err)
	}
}

// A chunk size that arrives on its own, read straight into the caller's buffer, is
// checked there as it is in the connection's.
func TestClientMalformedChunkReadInPlace(t *testing.T) {
	headRead := make(chan struct{})
	s := startRaw(t, func(_ int, c *net.TCPConn, rd *bufio.Reader) {
		if readRawRequest(rd) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
			<-headRead
			io.WriteString(c, "2\r\nok\r\nzz\r\n")
			rd.ReadByte()
		}
	})
	c := newClient(t, Options{})
	resp, err := c.Do(context.Background(), postTo(s.base()))
	if err != nil {
		t.Fatal(err)
	}
	close(headRead)
	body, err := readAll(resp, 8<<10)
	var pe *ProtocolError
	if string(body) != "ok" || !errors.As(err, &pe) {
		t.Fatalf("%q, %v", body, err)
	}
	expectFailure(t, "body", err, failover.Uncertain, "malformed_response", false)
}

// Next hands out bytes in the connection's own buffer, so the connection must not go back
// to the pool, where another request would read into that buffer, while its caller may
// still hold the body's last bytes: it is pooled at the call after them.
func TestNextPoolsTheConnectionOnlyAfterTheLastBytesAreLetGo(t *testing.T) {
	events := sseEvents(3)
	want := strings.Join(events, "")
	e := startSSE(t, events)
	c := newClient(t, Options{})
	resp, err := c.Do(context.Background(), postTo(e.srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	var last []byte
	for len(got) < len(want) {
		b, err := resp.Next()
		if err != nil {
			t.Fatalf("after %q: %v", got, err)
		}
		got, last = append(got, b...), b
	}
	if string(got) != want {
		t.Fatalf("body %q, want %q", got, want)
	}
	if n := c.pool.count(e.srv.URL); n != 0 {
		t.Fatalf("pooled while the caller holds the last bytes %q", last)
	}
	if b, err := resp.Next(); err != io.EOF || len(b) != 0 {
		t.Fatalf("after the body: %q, %v; want io.EOF", b, err)
	}
	if n := c.pool.count(e.srv.URL); n != 1 {
		t.Fatalf("%d idle connections after the body's end was read, want 1", n)
	}
	if b, err := resp.Next(); err != io.EOF || len(b) != 0 {
		t.Fatalf("again after the body: %q, %v; want io.EOF", b, err)
	}

	// Close right after the last bytes, without the call that finds the end, pools it
	// too: the body was read to its end. The engine sends its whole answer in one write,
	// so that the bytes Next returns end the body.
	s := startRaw(t, func(_ int, c *net.TCPConn, rd *bufio.Reader) {
		for readRawRequest(rd) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
		}
	})
	resp, err = c.Do(context.Background(), postTo(s.base()))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := resp.Next(); string(b) != "hello" || err != nil || !bodyRead(resp) {
		t.Fatalf("Next: %q, %v, body read %v; want the whole body at once", b, err, bodyRead(resp))
	}
	if n := c.pool.count(s.base()); n != 0 {
		t.Fatal("pooled while the caller holds the body's bytes")
	}
	resp.Close()
	if n := c.pool.count(s.base()); n != 1 {
		t.Fatalf("%d idle connections after Close of a body read to its end, want 1", n)
	}
}

// Drain reads what is left of a body so that its connection is pooled, without leaving
// its read deadline on the pooled connection; a body longer than it reads, or one the
// engine does not finish in time, keeps the connection out of the pool.
func TestDrain(t *testing.T) {
	release, more := make(chan struct{}), make(chan struct{})
	var requests atomic.Int32
	s := startRaw(t, func(_ int, c *net.TCPConn, rd *bufio.Reader) {
		for readRawRequest(rd) {
			n := requests.Add(1) - 1
			io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
			<-more // the rest after the client read the first chunk
			switch n {
			case 0:
				io.WriteString(c, "3\r\nabc\r\n0\r\n\r\n")
			case 1:
				io.WriteString(c, "a\r\n0123456789\r\n") // and no end in sight
				<-release
				return
			case 2:
				<-release // the rest never comes in time
				return
			}
		}
	})
	t.Cleanup(func() { close(release) }) // before the server's own cleanup, which waits for its handlers
	var deadlines deadlineLog
	c := newClient(t, Options{Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		return &deadlineConn{Conn: nc, log: &deadlines}, err
	}})
	read5 := func() *Response {
		t.Helper()
		resp, err := c.Do(context.Background(), postTo(s.base()))
		if err != nil {
			t.Fatal(err)
		}
		if b, err := resp.Next(); string(b) != "hello" || err != nil {
			t.Fatalf("Next: %q, %v", b, err)
		}
		more <- struct{}{}
		return resp
	}
	resp := read5()
	if err := resp.Drain(1<<10, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	resp.Close()
	idle := c.idleConns(s.base())
	if len(idle) != 1 {
		t.Fatalf("%d idle connections after a drain, want 1", len(idle))
	}
	// The pooled connection keeps no deadline.
	if last, ok := deadlines.last(); !ok || !last.IsZero() {
		t.Fatalf("the pooled connection's read deadline: %v (set: %v), want none", last, ok)
	}

	resp = read5()
	if err := resp.Drain(4, time.Now().Add(time.Minute)); err == nil {
		t.Fatal("drained 10 bytes with a limit of 4")
	}
	resp.Close()
	if n := c.pool.count(s.base()); n != 0 {
		t.Fatalf("%d idle connections after a drain over its limit, want 0", n)
	}

	resp = read5() // a new connection: the last one is closed
	if err := resp.Drain(1<<10, time.Now().Add(10*time.Millisecond)); err == nil {
		t.Fatal("drained a body the engine never finished")
	}
	resp.Close()
	if n := c.pool.count(s.base()); n != 0 {
		t.Fatalf("%d idle connections after a drain that timed out, want 0", n)
	}
}

// deadlineConn records the read deadlines set on a connection.
type deadlineConn struct {
	net.Conn
	log *deadlineLog
}

func (c *deadlineConn) SetReadDeadline(t time.Time) error {
	c.log.add(t)
	return c.Conn.SetReadDeadline(t)
}

type deadlineLog struct {
	mu  sync.Mutex
	all []time.Time
}

func (l *deadlineLog) add(t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, t)
}

// last returns the deadline set last, and whether any was.
func (l *deadlineLog) last() (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.all) == 0 {
		return time.Time{}, false
	}
	return l.all[len(l.all)-1], true
}

// bodyRead reports whether resp's body was read to its end without an error.
func bodyRead(resp *Response) bool { return resp.body.done && resp.err == nil }

// Ended says that the body's end has been read, so that a relay may write its own end with
// the last bytes; Buffered that bytes wait in the connection's buffer. The engine writes
// its head with the first chunk, then the rest only when the test lets it.
func TestEndedAndBuffered(t *testing.T) {
	more := make(chan string)
	s := startRaw(t, func(_ int, c *net.TCPConn, rd *bufio.Reader) {
		if !readRawRequest(rd) {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
		for b := range more {
			io.WriteString(c, b)
		}
	})
	c := newClient(t, Options{})
	resp, err := c.Do(context.Background(), postTo(s.base()))
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Buffered() || resp.Ended() {
		t.Fatalf("after the head: buffered %v, ended %v; want the first chunk buffered, the body not ended", resp.Buffered(), resp.Ended())
	}
	if b, err := resp.Next(); string(b) != "hello" || err != nil {
		t.Fatalf("Next: %q, %v", b, err)
	}
	if resp.Buffered() || resp.Ended() {
		t.Fatalf("after the first chunk: buffered %v, ended %v; want neither", resp.Buffered(), resp.Ended())
	}
	more <- "5\r\nworld\r\n0\r\n\r\n" // the last chunk and the body's end, in one write
	close(more)
	if b, err := resp.Next(); string(b) != "world" || err != nil {
		t.Fatalf("Next: %q, %v", b, err)
	}
	if !resp.Ended() {
		t.Fatal("the body's end came with its last bytes, but Ended is false")
	}
	if b, err := resp.Next(); err != io.EOF || len(b) != 0 {
		t.Fatalf("after the body: %q, %v; want io.EOF", b, err)
	}
	if !resp.Ended() || resp.Buffered() {
		t.Fatalf("after io.EOF: ended %v, buffered %v; want ended, nothing buffered", resp.Ended(), resp.Buffered())
	}

	// A body closed before its end did not end.
	half := startRaw(t, func(_ int, c *net.TCPConn, rd *bufio.Reader) {
		if readRawRequest(rd) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
		}
	})
	resp, err = c.Do(context.Background(), postTo(half.base()))
	if err != nil {
		t.Fatal(err)
	}
	resp.Close()
	if resp.Ended() || resp.Buffered() {
		t.Fatalf("closed half read: ended %v, buffered %v; want neither", resp.Ended(), resp.Buffered())
	}
}
