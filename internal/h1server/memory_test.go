package h1server

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
)

// These tests look inside the server from the handler, which runs on its connection's
// goroutine, the only one that touches the read and write buffers: no race.

// Once a request's body is read whole, its connection holds no read buffer while the
// handler goes on (a long stream after its request came in costs none); a request without
// a body holds none from the handler's start.
func TestNoReadBufferAfterBody(t *testing.T) {
	type seen struct {
		body    string
		holding bool
	}
	got := make(chan seen, 1)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("reading the body: %v", err)
		}
		got <- seen{string(b), w.(*response).c.br != nil}
	}))
	big := strings.Repeat("x", 20<<10) // more than the read buffer holds
	c := dialRaw(t, ts.addr)
	for _, tt := range []struct{ name, req, body string }{
		{"no body", get("/"), ""},
		{"Content-Length", "POST / HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\n\r\nhello", "hello"},
		{"long Content-Length", "POST / HTTP/1.1\r\nHost: test\r\nContent-Length: 20480\r\n\r\n" + big, big},
		{"chunked", "POST / HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", "hello"},
	} {
		c.send(tt.req)
		s := recv(t, got, "the handler")
		if s.body != tt.body {
			t.Errorf("%s: body of %d bytes, want %d", tt.name, len(s.body), len(tt.body))
		}
		if s.holding {
			t.Errorf("%s: the handler runs with a read buffer held after the body was read", tt.name)
		}
		c.response("POST")
	}
}

// A kept-alive connection waiting for its next request holds no read buffer, whether its
// last request's body was read by the handler, dropped after it, or absent.
func TestNoReadBufferWhileIdle(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/read" {
			io.Copy(io.Discard, r.Body)
		}
	}))
	c := dialRaw(t, ts.addr)
	idle := make(chan bool, 1)
	watch(t, hookIdle, c.LocalAddr().String(), func(c *conn) {
		if c.state.Load() == stateIdle { // not the wait for the connection's first request
			idle <- c.br != nil
		}
	})
	for _, req := range []string{
		"POST /read HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\n\r\nhello",
		"POST /ignore HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\n\r\nhello",
		get("/none"),
	} {
		c.send(req)
		c.response("POST")
		if recv(t, idle, "the connection to wait for its next request") {
			t.Errorf("after %q the idle connection holds a read buffer", strings.SplitN(req, "\r\n", 2)[0])
		}
	}
}

// A streaming handler holds a write buffer only between a write and the flush that sends
// it: waiting between two events it holds none.
func TestNoWriteBufferBetweenFlushes(t *testing.T) {
	type step struct {
		what    string
		holding bool
	}
	steps := make(chan []step, 1)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rw := w.(*response)
		var s []step
		note := func(what string) { s = append(s, step{what, rw.out != nil}) }
		io.WriteString(w, "event 1\n")
		w.(http.Flusher).Flush()
		note("after the first flush (the head's)")
		io.WriteString(w, "event 2\n")
		http.NewResponseController(w).Flush()
		note("after a flush")
		w.Write(bytes.Repeat([]byte("x"), 10<<10))
		note("after a write larger than the buffer")
		io.WriteString(w, "event 3\n")
		w.(http.Flusher).Flush()
		note("after the last flush")
		steps <- s
	}))
	_, body, _ := do(t, newClient(t), newRequest(t, "GET", ts.url("/"), nil))
	if want := "event 1\nevent 2\n" + strings.Repeat("x", 10<<10) + "event 3\n"; body != want {
		t.Errorf("body of %d bytes, want %d", len(body), len(want))
	}
	for _, s := range recv(t, steps, "the handler") {
		if s.holding {
			t.Errorf("%s the handler holds a write buffer", s.what)
		}
	}
}
