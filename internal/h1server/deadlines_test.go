package h1server

import (
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// deadlineListener hands out connections that remember the read deadline last set on
// them, so a test can see which deadline a handler's reads run under without waiting for
// one to pass.
type deadlineListener struct{ net.Listener }

func (l deadlineListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &deadlineConn{TCPConn: nc.(*net.TCPConn)}, nil
}

// deadlineConn embeds the *net.TCPConn, so the server still finds its file descriptor.
type deadlineConn struct {
	*net.TCPConn
	mu   sync.Mutex
	read time.Time
}

func (c *deadlineConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.read = t
	c.mu.Unlock()
	return c.TCPConn.SetReadDeadline(t)
}

func (c *deadlineConn) readDeadline() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.read
}

// ReadHeaderTimeout bounds the head alone: once it is read, the handler reads the body
// under no deadline (net/http lifts the head's deadline for the whole request's, which a
// Server without a ReadTimeout does not have). A body that takes longer to arrive than
// the head may must still be read.
func TestReadHeaderTimeoutBoundsOnlyTheHead(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		deadline time.Time
		body     string
	}
	got := make(chan seen, 1)
	ts := startServerOn(t, deadlineListener{ln}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := w.(*response).c.nc.(*deadlineConn).readDeadline()
		b, _ := io.ReadAll(r.Body)
		got <- seen{d, string(b)}
	}), func(s *Server) {
		s.ReadHeaderTimeout = time.Hour // never reached: the test looks at the deadline set
	})
	c := dialRaw(t, ts.addr)
	for i, req := range []string{
		// The connection's first request, then one after an idle wait.
		"POST / HTTP/1.1\r\nHost: test\r\nContent-Length: 4\r\n\r\nbody",
		"POST / HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nbody\r\n0\r\n\r\n",
	} {
		c.send(req)
		s := recv(t, got, "the handler")
		if !s.deadline.IsZero() {
			t.Errorf("request %d: the handler reads under the head's deadline (%v)", i+1, s.deadline)
		}
		if s.body != "body" {
			t.Errorf("request %d: body %q", i+1, s.body)
		}
		if resp, _ := c.response("POST"); resp.StatusCode != 200 {
			t.Errorf("request %d: status %d", i+1, resp.StatusCode)
		}
	}
}

// IdleTimeout closes a kept-alive connection that sends no next request. (Only the
// outcome is checked: the close comes, however long after the timeout.)
func TestIdleTimeoutClosesConnection(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}),
		func(s *Server) { s.IdleTimeout = time.Millisecond })
	c := dialRaw(t, ts.addr)
	c.send(get("/"))
	if resp, _ := c.response("GET"); resp.Close {
		t.Fatal("the connection was not kept alive")
	}
	c.expectClosed()
}

// A head that does not come whole within ReadHeaderTimeout ends the connection without
// an answer, as net/http ends it (a timeout is no request to refuse).
func TestReadHeaderTimeoutClosesStalledHead(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("the handler ran for a head that never came whole")
	}), func(s *Server) { s.ReadHeaderTimeout = time.Millisecond })
	c := dialRaw(t, ts.addr)
	c.send("GET / HTTP/1.1\r\nHost: test\r\n") // and never the blank line
	c.expectClosed()
}
