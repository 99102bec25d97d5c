package gateway_test

import (
	"bytes"
	"context"
	"github.com/fencegate/fencegate/internal/h1server/h1servertest"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// When the engine's answer ends within the read that brings its last events, the gateway
// writes those events and the end of its response to the client in one write, not two.
func TestStreamEndLeavesWithTheLastEvents(t *testing.T) {
	d := &net.Dialer{}
	e := newEnv(t, envOptions{replicas: 1, dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &wholeStreams{Conn: c}, nil
	}})
	writes := &recordedWrites{}
	srv := h1servertest.Serve(recordingListener{listenLoopback(t), writes}, e.gw.Handler())
	t.Cleanup(srv.Close)

	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(streamBody("hello", 5)))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !strings.Contains(string(body), "data: [DONE]") {
		t.Fatalf("answer %q, %v", body, err)
	}
	// Here the whole answer came in one read, so it goes out in one write: net/http then
	// frames it with a Content-Length. Flushed before the handler returned, the events and
	// the body's end would be two writes.
	all := writes.all()
	if len(all) == 0 || !bytes.HasSuffix(all[len(all)-1], []byte("data: [DONE]\n\n")) {
		t.Fatalf("the server's writes %q; want the last to end with [DONE]", all)
	}
	if n := len(all); n != 1 {
		t.Fatalf("%d writes, want 1: %q", n, all)
	}
}

// wholeStreams is a connection to an engine whose reads return a streamed answer whole,
// head to the chunked body's end, however the engine wrote it: what a reader that wakes
// after the engine's last writes finds.
type wholeStreams struct {
	net.Conn
	pending []byte
}

func (c *wholeStreams) Read(p []byte) (int, error) {
	for len(c.pending) == 0 || bytes.Contains(c.pending, []byte("text/event-stream")) && !bytes.HasSuffix(c.pending, []byte("\r\n0\r\n\r\n")) {
		buf := make([]byte, 64<<10)
		n, err := c.Conn.Read(buf)
		c.pending = append(c.pending, buf[:n]...)
		if err != nil {
			if len(c.pending) > 0 {
				break
			}
			return 0, err
		}
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

// listenLoopback opens a listener on a free loopback port.
func listenLoopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}
