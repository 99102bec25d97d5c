package upstream

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rawServer is a TCP server on loopback that speaks HTTP/1.1 by hand, so a test can make
// an engine do what net/http's server never would: reset mid-body, close a kept-alive
// connection, answer garbage. handle runs in its own goroutine for each accepted
// connection (numbered from 0) with a reader over it for the requests.
type rawServer struct {
	ln       net.Listener
	accepted atomic.Int32
	requests atomic.Int32

	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func startRaw(t *testing.T, handle func(n int, c *net.TCPConn, rd *bufio.Reader)) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := int(s.accepted.Add(1)) - 1
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				handle(n, c.(*net.TCPConn), bufio.NewReader(c))
			}()
		}
	}()
	t.Cleanup(s.close)
	return s
}

// close stops accepting, closes every connection and waits for the handlers.
func (s *rawServer) close() {
	s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *rawServer) base() string { return "http://" + s.ln.Addr().String() }

// readRequest reads one whole request, counting it; it returns nil when the connection
// ended instead.
func (s *rawServer) readRequest(rd *bufio.Reader) *http.Request {
	req, err := http.ReadRequest(rd)
	if err != nil {
		return nil
	}
	if _, err := io.Copy(io.Discard, req.Body); err != nil {
		return nil
	}
	s.requests.Add(1)
	return req
}

func newClient(t *testing.T, opts Options) *Client {
	t.Helper()
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdle)
	return c
}

func postTo(base string) *Request {
	return &Request{Method: http.MethodPost, Base: base, Path: "/v1/chat/completions",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(requestBody)}
}

// readAll reads r to its end with a buffer of size bytes, as the gateway's reader does;
// size 0 reads with Next, in the connection's own buffer, as the request's owner does.
func readAll(r *Response, size int) ([]byte, error) {
	var out []byte
	if size == 0 {
		for {
			b, err := r.Next()
			out = append(out, b...)
			if err == io.EOF {
				return out, nil
			}
			if err != nil {
				return out, err
			}
		}
	}
	buf := make([]byte, size)
	for {
		n, err := r.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// ownError returns err as the client's *Error, failing the test when it is not one.
func ownError(t *testing.T, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%v (%T) is not an *upstream.Error", err, err)
	}
	return e
}

// idleConns returns the pool's idle connections to base.
func (c *Client) idleConns(base string) []*conn {
	c.pool.mu.Lock()
	defer c.pool.mu.Unlock()
	return append([]*conn(nil), c.pool.idle[base]...)
}

// countingDial dials for real and counts the connections it made.
func countingDial(n *atomic.Int32) DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		n.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
}

// memConn is a connection whose reads return script, step bytes at a time, then io.EOF.
// What is written to it is discarded. It stands for an engine in the fuzz tests.
type memConn struct {
	script []byte
	step   int
	closed bool
}

func (c *memConn) Read(p []byte) (int, error) {
	if c.closed {
		return 0, net.ErrClosed
	}
	if len(c.script) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.step)], c.script)
	c.script = c.script[n:]
	return n, nil
}

func (c *memConn) Write(p []byte) (int, error) {
	if c.closed {
		return 0, net.ErrClosed
	}
	return len(p), nil
}

func (c *memConn) Close() error                     { c.closed = true; return nil }
func (c *memConn) LocalAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2} }
func (c *memConn) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }
func (c *memConn) SetDeadline(time.Time) error      { return nil }
func (c *memConn) SetReadDeadline(time.Time) error  { return nil }
func (c *memConn) SetWriteDeadline(time.Time) error { return nil }

// pipeNet is an in-memory network for tests in a synctest bubble: Dial hands the other
// end of a net.Pipe to Accept, and counts the dials.
type pipeNet struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
	dials  atomic.Int32
}

func newPipeNet() *pipeNet { return &pipeNet{conns: make(chan net.Conn), closed: make(chan struct{})} }

func (p *pipeNet) Dial(ctx context.Context, _, _ string) (net.Conn, error) {
	p.dials.Add(1)
	client, server := net.Pipe()
	select {
	case p.conns <- server:
		return client, nil
	case <-p.closed:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *pipeNet) Accept() (net.Conn, error) {
	select {
	case c := <-p.conns:
		return c, nil
	case <-p.closed:
		return nil, net.ErrClosed
	}
}

func (p *pipeNet) Close() error   { p.once.Do(func() { close(p.closed) }); return nil }
func (p *pipeNet) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }

// writeInSteps writes parts[i] to c once steps[i] is closed, in order, and reports whether
// it wrote them all: it stops when the test ends first.
func writeInSteps(t *testing.T, c net.Conn, steps []chan struct{}, parts []string) bool {
	for i, step := range steps {
		select {
		case <-step:
		case <-t.Context().Done():
			return false
		}
		io.WriteString(c, parts[i])
	}
	return true
}
