package upstream

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// Send writes the request and returns before the engine answered; ReadHead then reads the
// head. A reader that enabled wakes is woken from its wait for the head as from its wait
// for the body: by its deadline, or by Wake while half a head has arrived, and what
// arrived is kept, so the head and the body read whole afterwards and the connection goes
// back to the pool. The body may not be read before the head.
func TestSendThenReadHeadWoken(t *testing.T) {
	half, rest := make(chan struct{}), make(chan struct{})
	s := startRaw(t, func(_ int, c *net.TCPConn, rd *bufio.Reader) {
		if !readRawRequest(rd) {
			return
		}
		writeInSteps(t, c, []chan struct{}{half, rest}, []string{
			"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Type: text/ev",
			"ent-stream\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nhello\n\r\n0\r\n\r\n",
		})
	})
	c := newClient(t, Options{})
	resp, err := c.Send(context.Background(), postTo(s.base()))
	if err != nil {
		t.Fatal(err)
	}
	if resp.HeadRead() {
		t.Fatal("HeadRead is true before ReadHead")
	}
	if _, err := resp.Next(); !errors.Is(err, errHeadPending) {
		t.Fatalf("Next before the head: %v; want errHeadPending", err)
	}
	resp.EnableWake()

	// The reader's deadline passes with nothing arrived.
	resp.SetWakeAt(time.Now().Add(-time.Second))
	if err := resp.ReadHead(); !errors.Is(err, ErrWoken) {
		t.Fatalf("ReadHead after the deadline: %v; want ErrWoken", err)
	}

	// An interim response and half of the final head arrive; the wait for the rest is
	// woken from another goroutine.
	close(half)
	resp.SetWakeAt(time.Time{})
	go resp.Wake()
	if err := resp.ReadHead(); !errors.Is(err, ErrWoken) {
		t.Fatalf("ReadHead woken with half a head: %v; want ErrWoken", err)
	}
	if !resp.Woken() {
		t.Fatal("Woken is false after a Wake")
	}

	close(rest)
	resp.SetWakeAt(time.Time{})
	for {
		err := resp.ReadHead()
		if err == nil {
			break
		}
		if !errors.Is(err, ErrWoken) { // a Wake that came after the half head was read
			t.Fatalf("ReadHead: %v", err)
		}
		resp.Woken()
		resp.SetWakeAt(time.Time{})
	}
	if !resp.HeadRead() || resp.Status != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("head: read %v, status %d, content type %q", resp.HeadRead(), resp.Status, resp.Header.Get("Content-Type"))
	}
	if err := resp.ReadHead(); err != nil {
		t.Fatalf("ReadHead once the head is read: %v; want nil", err)
	}
	body, err := readAll(resp, 0)
	if err != nil || string(body) != "hello\n" {
		t.Fatalf("body: %q, %v; want %q", body, err, "hello\n")
	}
	if idle := c.idleConns(s.base()); len(idle) != 1 {
		t.Fatalf("%d idle connections after the body, want 1", len(idle))
	}
}

// Cancelling the request's context while ReadHead waits fails the response with the
// context's error, as Do does: a wake is never mistaken for it.
func TestSendCancelledWhileReadingHead(t *testing.T) {
	s := startRaw(t, func(_ int, c *net.TCPConn, rd *bufio.Reader) {
		readRawRequest(rd)
		<-t.Context().Done()
	})
	c := newClient(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := c.Send(ctx, postTo(s.base()))
	if err != nil {
		t.Fatal(err)
	}
	resp.EnableWake()
	go cancel()
	err = resp.ReadHead()
	for errors.Is(err, ErrWoken) {
		err = resp.ReadHead()
	}
	var ue *Error
	if !errors.As(err, &ue) || ue.Op != OpReadHead || ue.Sent != SentAll || !errors.Is(err, context.Canceled) {
		t.Fatalf("ReadHead after cancel: %v; want a head read error with context.Canceled, the request sent whole", err)
	}
	if err := resp.ReadHead(); !errors.Is(err, context.Canceled) {
		t.Fatalf("ReadHead again: %v; want the same error", err)
	}
	resp.Close()
}

// foreignDeadlineConn is a connection whose reads fail with a deadline error that nobody set: a
// dialler's own deadline, say.
type foreignDeadlineConn struct{ net.Conn }

func (foreignDeadlineConn) Read([]byte) (int, error) {
	return 0, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
}

// A deadline error that is not the reader's (no Wake pending, its own time not come) is the
// connection's failure, not a wake: ReadHead fails rather than report ErrWoken for ever.
func TestReadHeadForeignDeadlineIsAFailure(t *testing.T) {
	s := startRaw(t, func(_ int, c *net.TCPConn, rd *bufio.Reader) {
		readRawRequest(rd)
		<-t.Context().Done()
	})
	c := newClient(t, Options{Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		nc, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return foreignDeadlineConn{nc}, nil
	}})
	resp, err := c.Send(context.Background(), postTo(s.base()))
	if err != nil {
		t.Fatal(err)
	}
	resp.EnableWake()
	resp.SetWakeAt(time.Now().Add(time.Hour))
	err = resp.ReadHead()
	var ue *Error
	if errors.Is(err, ErrWoken) || !errors.As(err, &ue) || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("ReadHead: %v; want the connection's deadline error, not a wake", err)
	}
	resp.Close()
}

// QuickSend is true only where Send cannot outlast the dial timeout: a plaintext replica
// and a body that goes out with the head in one write.
func TestQuickSend(t *testing.T) {
	for _, c := range []struct {
		base string
		body int
		more int
		want bool
	}{
		{"http://engine:8000", 200, 0, true},
		{"http://engine:8000", inlineBody, 0, true},
		{"http://engine:8000", inlineBody - 10, 11, false}, // the parts count together
		{"http://engine:8000", inlineBody + 1, 0, false},
		{"https://engine:8443", 200, 0, false}, // a TLS handshake only the context bounds
	} {
		req := &Request{Method: "POST", Base: c.base, Path: "/v1/chat/completions", Body: make([]byte, c.body)}
		if c.more > 0 {
			req.More = [][]byte{make([]byte, c.more)}
		}
		if got := req.QuickSend(); got != c.want {
			t.Errorf("%s with a body of %d+%d bytes: QuickSend %v, want %v", c.base, c.body, c.more, got, c.want)
		}
	}
}
