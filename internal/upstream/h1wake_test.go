package upstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// A reader that enabled wakes is woken from its wait on the engine by Wake, from any
// goroutine, or by the deadline of SetWakeAt; the read ends with ErrWoken and the response
// is intact: what the engine sends next, even the rest of a chunk-size line it had begun,
// is read as if nothing had happened. Once the body is over, the connection goes back to
// the pool without a deadline, and a late Wake does not reach it: the next request on it
// is answered.
func TestResponseWake(t *testing.T) {
	const second = "data: second\n\n"
	half, rest := make(chan struct{}), make(chan struct{})
	s := startRaw(t, func(_ int, c *net.TCPConn, rd *bufio.Reader) {
		if !readRawRequest(rd) {
			return
		}
		streamHeadAndFirstEvent(c)
		// The chunk-size line unfinished, then its end and the chunk.
		if !writeInSteps(t, c, []chan struct{}{half, rest},
			[]string{fmt.Sprintf("%x", len(second)), fmt.Sprintf("\r\n%s\r\n0\r\n\r\n", second)}) {
			return
		}
		if readRawRequest(rd) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	c := newClient(t, Options{})
	resp, err := c.Do(context.Background(), postTo(s.base()))
	if err != nil {
		t.Fatal(err)
	}
	resp.EnableWake()
	readFirstEvent(t, resp)
	buf := make([]byte, 8<<10)

	// Woken from another goroutine: before the read or during it, the read ends.
	go resp.Wake()
	if n, err := resp.Read(buf); n != 0 || !errors.Is(err, ErrWoken) {
		t.Fatalf("read while woken: %d, %v; want 0, ErrWoken", n, err)
	}
	if !resp.Woken() {
		t.Fatal("Woken is false after a Wake")
	}
	if resp.Woken() {
		t.Fatal("Woken reported one Wake twice")
	}

	// The reader's own deadline, passed; then half a chunk-size line arrives and the wait
	// for the rest is woken too.
	resp.SetWakeAt(time.Now().Add(-time.Second))
	if _, err := resp.Read(buf); !errors.Is(err, ErrWoken) {
		t.Fatalf("read after the deadline: %v; want ErrWoken", err)
	}
	close(half)
	resp.SetWakeAt(time.Time{})
	go resp.Wake()
	for {
		n, err := resp.Read(buf)
		if errors.Is(err, ErrWoken) {
			break
		}
		if n != 0 || err != nil {
			t.Fatalf("read of half a chunk-size line: %q, %v", buf[:n], err)
		}
	}
	resp.Woken()

	// Nothing is lost: the rest of the body reads whole.
	resp.SetWakeAt(time.Time{})
	close(rest)
	body, err := readAll(resp, 8<<10)
	if err != nil || string(body) != second {
		t.Fatalf("after the wakes: %q, %v; want %q", body, err, second)
	}
	if idle := c.idleConns(s.base()); len(idle) != 1 {
		t.Fatalf("%d idle connections after the body, want 1", len(idle))
	}

	// A late wake after the end: the pooled connection is not touched.
	resp.Wake()
	resp2, err := c.Do(context.Background(), postTo(s.base()))
	if err != nil {
		t.Fatal(err)
	}
	if body, err := readAll(resp2, 64); err != nil || string(body) != "ok" {
		t.Fatalf("next request on the pooled connection: %q, %v", body, err)
	}
	if n := s.accepted.Load(); n != 1 {
		t.Fatalf("%d connections accepted, want 1 (the first reused)", n)
	}
}

// Without EnableWake, a read deadline is the connection's failure, as before: nothing but
// a reader that asked for wakes ever sees ErrWoken.
func TestResponseWithoutWakeFailsOnDeadline(t *testing.T) {
	s := startRaw(t, func(_ int, c *net.TCPConn, rd *bufio.Reader) {
		if readRawRequest(rd) {
			streamHeadAndFirstEvent(c)
			io.Copy(io.Discard, rd)
		}
	})
	c := newClient(t, Options{})
	resp, err := c.Do(context.Background(), postTo(s.base()))
	if err != nil {
		t.Fatal(err)
	}
	readFirstEvent(t, resp)
	resp.cn.nc.SetReadDeadline(time.Now().Add(-time.Second))
	_, err = resp.Read(make([]byte, 8<<10))
	if err == nil || errors.Is(err, ErrWoken) {
		t.Fatalf("read past a deadline without wakes: %v; want the connection's error", err)
	}
	if resp.cn != nil {
		t.Fatal("the connection was kept after a failed read")
	}
}
