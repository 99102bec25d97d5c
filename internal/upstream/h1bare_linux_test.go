//go:build linux

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

// A reader waiting on an engine that has sent nothing more gives its connection's buffer
// back before it waits (an open, quiet stream holds none), and what the engine sends next
// is read whole into the buffer it then takes. A Wake during such a wait ends it as it
// ends any read, and the reader goes on.
func TestQuietStreamHoldsNoBuffer(t *testing.T) {
	const second = "data: second\n\n"
	next := make(chan struct{})
	s := startRaw(t, func(_ int, c *net.TCPConn, rd *bufio.Reader) {
		if !readRawRequest(rd) {
			return
		}
		streamHeadAndFirstEvent(c)
		select {
		case <-next:
		case <-t.Context().Done():
			return
		}
		fmt.Fprintf(c, "%x\r\n%s\r\n0\r\n\r\n", len(second), second)
	})
	puts := make(chan struct{}, 64)
	testHookBufPut = func() { puts <- struct{}{} }
	t.Cleanup(func() { testHookBufPut = nil })

	c := newClient(t, Options{})
	resp, err := c.Do(context.Background(), postTo(s.base()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Close()
	resp.EnableWake()
	readFirstEvent(t, resp)
	for len(puts) > 0 { // the waits for the head, before the engine answered
		<-puts
	}

	// Woken while it waits without a buffer: the read ends, the connection is intact.
	type result struct {
		b   string
		err error
	}
	got := make(chan result, 1)
	// read reads once in another goroutine, bounded by a wake a minute away so that a
	// reader that never gives its buffer back fails the test instead of hanging it;
	// awaitPut waits for the buffer to go back during that read.
	read := func() {
		resp.SetWakeAt(time.Now().Add(time.Minute))
		go func() {
			b, err := resp.Next()
			got <- result{string(b), err}
		}()
	}
	awaitPut := func() {
		select {
		case <-puts:
		case r := <-got:
			t.Fatalf("the read ended (%q, %v) without giving its buffer back first", r.b, r.err)
		}
	}
	read()
	awaitPut() // the buffer went back before the wait
	resp.Wake()
	if r := <-got; !errors.Is(r.err, ErrWoken) || r.b != "" {
		t.Fatalf("woken wait: %q, %v; want ErrWoken", r.b, r.err)
	}
	if !resp.Woken() {
		t.Fatal("Woken is false after a Wake")
	}

	read()
	awaitPut()
	close(next)
	if r := <-got; r.err != nil || r.b != second {
		t.Fatalf("after the wait: %q, %v; want %q", r.b, r.err, second)
	}
	resp.SetWakeAt(time.Time{})
	if b, err := resp.Next(); err != io.EOF {
		t.Fatalf("end of the body: %q, %v; want io.EOF", b, err)
	}
	if idle := c.idleConns(s.base()); len(idle) != 1 || idle[0].buf != nil {
		t.Fatalf("idle connections %d; want 1 holding no buffer", len(idle))
	}
}
