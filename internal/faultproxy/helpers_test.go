package faultproxy

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// guard bounds every blocking step of a test so that a broken feature fails the test
// instead of hanging it. It is never used to wait for something to happen.
const guard = 10 * time.Second

// copyResult is how one connection of a testServer ended.
type copyResult struct {
	echoed int64 // bytes the server received (and echoed)
	err    error // nil when the client closed its sending side
}

// testServer is an echo server on loopback. Each connection it accepts is handed to the
// test on accepted, and how it ended is reported on ended.
type testServer struct {
	ln       net.Listener
	accepted chan *net.TCPConn
	ended    chan copyResult
	wg       sync.WaitGroup

	mu    sync.Mutex
	conns map[*net.TCPConn]struct{}
}

// startEcho starts an echo server and closes it when the test ends.
func startEcho(t *testing.T) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	s := &testServer{
		ln:       ln,
		accepted: make(chan *net.TCPConn, 64),
		ended:    make(chan copyResult, 64),
		conns:    make(map[*net.TCPConn]struct{}),
	}
	s.wg.Add(1)
	go s.acceptLoop()
	t.Cleanup(s.close)
	return s
}

func (s *testServer) addr() string { return s.ln.Addr().String() }

func (s *testServer) acceptLoop() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		conn := c.(*net.TCPConn)
		s.mu.Lock()
		s.conns[conn] = struct{}{}
		s.mu.Unlock()
		s.accepted <- conn
		s.wg.Add(1)
		go s.echo(conn)
	}
}

func (s *testServer) echo(conn *net.TCPConn) {
	defer s.wg.Done()
	n, err := io.Copy(conn, conn)
	if err == nil {
		_ = conn.CloseWrite()
	}
	s.ended <- copyResult{echoed: n, err: err}
}

// close stops the server and waits for its goroutines. It may be called more than once.
func (s *testServer) close() {
	_ = s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// startProxy starts a proxy to target and closes it when the test ends, failing the test
// if the proxy recorded a failure of its own.
func startProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := Start(target)
	if err != nil {
		t.Fatalf("Start(%s): %v", target, err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

// dial connects to addr and closes the connection when the test ends.
func dial(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	conn := c.(*net.TCPConn)
	if err := conn.SetDeadline(time.Now().Add(guard)); err != nil {
		t.Fatalf("set deadline: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func send(t *testing.T, conn net.Conn, s string) {
	t.Helper()
	if _, err := io.WriteString(conn, s); err != nil {
		t.Fatalf("write %q: %v", s, err)
	}
}

// expect reads exactly len(want) bytes and fails unless they are want.
func expect(t *testing.T, conn net.Conn, want string) {
	t.Helper()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(conn, got); err != nil {
		t.Fatalf("read %d bytes (want %q): %v (got %q)", len(want), want, err, got)
	}
	if string(got) != want {
		t.Fatalf("read %q, want %q", got, want)
	}
}

// await waits until cond holds for p's stats.
func await(t *testing.T, p *Proxy, what string, cond func(Stats) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), guard)
	defer cancel()
	if err := p.Await(ctx, cond); err != nil {
		t.Fatalf("waiting until %s: %v", what, err)
	}
}

// receive takes one value from ch, failing the test if none comes within the guard.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(guard):
		t.Fatalf("no %s", what)
		panic("unreachable")
	}
}

// isReset reports whether err is a TCP connection reset.
func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET)
}
