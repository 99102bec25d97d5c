package h1server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// waitForHangup is a handler that says it started and then waits for its request's
// context to end, reporting why it ended.
func waitForHangup(started chan<- struct{}, ended chan<- error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-r.Context().Done()
		ended <- r.Context().Err()
	})
}

func skipWithoutWatcher(t *testing.T) {
	if !Available() {
		t.Skip("no hangup watcher on this platform")
	}
}

// A client that leaves while its request runs cancels the request's context, as
// net/http's background read does, whether it closes its connection (FIN) or resets it.
func TestClientLeavingCancelsRequest(t *testing.T) {
	skipWithoutWatcher(t)
	for _, reset := range []bool{false, true} {
		name := map[bool]string{false: "FIN", true: "reset"}[reset]
		t.Run(name, func(t *testing.T) {
			started, ended := make(chan struct{}, 1), make(chan error, 1)
			ts := startServer(t, waitForHangup(started, ended))
			c := dialRaw(t, ts.addr)
			c.send(get("/"))
			recv(t, started, "the handler to start")
			if reset {
				c.SetLinger(0) // Close then sends a reset, not a FIN
			}
			c.Close()
			if err := recv(t, ended, "the request's context to end"); !errors.Is(err, context.Canceled) {
				t.Errorf("context ended with %v, want context.Canceled", err)
			}
		})
	}
}

// A handler streaming to a client that reads nothing, under a write deadline it set:
// once the socket's buffers are full its Write fails with the deadline's error, and its
// request's context is cancelled (net/http cancels it on a failed write too).
func TestWriteDeadlineToStalledClient(t *testing.T) {
	type result struct{ writeErr, ctxErr error }
	done := make(chan result, 1)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if err := rc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
			t.Errorf("SetWriteDeadline: %v", err)
		}
		chunk := payload(64 << 10)
		for {
			_, err := w.Write(chunk)
			if err == nil {
				err = rc.Flush()
			}
			if err != nil {
				done <- result{err, r.Context().Err()}
				return
			}
		}
	}))
	c := dialRaw(t, ts.addr)
	c.send(get("/stream")) // and never read
	res := recv(t, done, "the handler's write to fail")
	if !errors.Is(res.writeErr, os.ErrDeadlineExceeded) {
		t.Errorf("write failed with %v, want os.ErrDeadlineExceeded", res.writeErr)
	}
	if !errors.Is(res.ctxErr, context.Canceled) {
		t.Errorf("request context: %v, want context.Canceled", res.ctxErr)
	}
}

// A client that sends its request with a body and shuts its side at once (its FIN behind
// the body, which the handler has not read yet) has left: the request is cancelled once
// the body is read, as net/http's background read, which starts there, would see the
// end. Whichever comes first, the FIN's news or the body's end, the outcome is the same.
func TestFINBehindUnreadBodyCancelsOnceTheBodyIsRead(t *testing.T) {
	skipWithoutWatcher(t)
	gotBody, ended := make(chan string, 1), make(chan error, 1)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		gotBody <- string(b)
		<-r.Context().Done()
		ended <- r.Context().Err()
	}))
	c := dialRaw(t, ts.addr)
	// Longer than the read buffer, so that the FIN comes while the kernel holds the rest.
	body := strings.Repeat("b", 64<<10)
	c.send(fmt.Sprintf("POST / HTTP/1.1\r\nHost: test\r\nContent-Length: %d\r\n\r\n%s", len(body), body))
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if b := recv(t, gotBody, "the handler to read the body"); b != body {
		t.Fatalf("body of %d bytes, want %d", len(b), len(body))
	}
	if err := recv(t, ended, "the request's context to end"); !errors.Is(err, context.Canceled) {
		t.Errorf("context ended with %v, want context.Canceled", err)
	}
}
