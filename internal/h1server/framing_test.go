package h1server

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"
)

// payload is n bytes that are not all alike, so that a byte lost, doubled or moved shows.
func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}

// A handler that writes a short body and returns: the whole body is known when the head
// goes out, so the response carries its Content-Length (net/http does the same for a
// body that fits its buffer), and its type is sniffed.
func TestShortBodyHasContentLength(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello, world")
	}))
	resp, body, _ := do(t, newClient(t), newRequest(t, "GET", ts.url("/"), nil))
	if body != "hello, world" {
		t.Errorf("body %q, want %q", body, "hello, world")
	}
	if resp.ContentLength != 12 || len(resp.TransferEncoding) != 0 {
		t.Errorf("Content-Length %d, Transfer-Encoding %q; want 12 and none", resp.ContentLength, resp.TransferEncoding)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
		t.Errorf("Content-Type %q, want the sniffed text/plain; charset=utf-8", ct)
	}
	if resp.Header.Get("Date") == "" {
		t.Error("no Date header (RFC 9110 §6.6.1: an origin server with a clock sends one)")
	}
}

// A handler that flushes before it ends sends its head before the body's length is known:
// HTTP/1.1 frames the body in chunks (RFC 9112 §7.1), through either flush API.
func TestFlushedBodyIsChunked(t *testing.T) {
	flushes := map[string]func(http.ResponseWriter){
		"Flusher":            func(w http.ResponseWriter) { w.(http.Flusher).Flush() },
		"ResponseController": func(w http.ResponseWriter) { http.NewResponseController(w).Flush() },
	}
	for name, flush := range flushes {
		t.Run(name, func(t *testing.T) {
			ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, "first,")
				flush(w)
				io.WriteString(w, "second,")
				flush(w)
				io.WriteString(w, "third")
			}))
			resp, body, _ := do(t, newClient(t), newRequest(t, "GET", ts.url("/"), nil))
			if body != "first,second,third" {
				t.Errorf("body %q, want %q", body, "first,second,third")
			}
			if len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" || resp.ContentLength != -1 {
				t.Errorf("Transfer-Encoding %q, Content-Length %d; want chunked and none", resp.TransferEncoding, resp.ContentLength)
			}
		})
	}
}

// Bodies larger than the write buffer, in one Write or in many, arrive whole and in order.
// Their type is sniffed from their first bytes, as net/http sniffs them, whether or not
// those bytes came in a write larger than the buffer.
func TestLargeBodies(t *testing.T) {
	for _, size := range []int{10 << 10, 100 << 10} {
		for _, writeSize := range []int{size, 100, 1000} {
			t.Run(fmt.Sprintf("%d_in_writes_of_%d", size, writeSize), func(t *testing.T) {
				want := payload(size)
				ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					for p := want; len(p) > 0; {
						n := min(writeSize, len(p))
						if _, err := w.Write(p[:n]); err != nil {
							t.Errorf("Write: %v", err)
							return
						}
						p = p[n:]
					}
				}))
				resp, body, _ := do(t, newClient(t), newRequest(t, "GET", ts.url("/"), nil))
				if !bytes.Equal([]byte(body), want) {
					t.Errorf("body of %d bytes differs from the %d written", len(body), len(want))
				}
				if ct, want := resp.Header.Get("Content-Type"), http.DetectContentType(want); ct != want {
					t.Errorf("Content-Type %q, want %q as sniffed from the body", ct, want)
				}
			})
		}
	}
}

// A body sent with a Content-Encoding is not sniffed: its bytes say nothing of the type
// of what they encode (net/http, issue 31753).
func TestEncodedBodyIsNotSniffed(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Write([]byte("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"))
	}))
	req := newRequest(t, "GET", ts.url("/"), nil)
	req.Header.Set("Accept-Encoding", "gzip") // asked for explicitly: the Transport leaves the body encoded
	resp, _, _ := do(t, newClient(t), req)
	if ct, ok := resp.Header["Content-Type"]; ok {
		t.Errorf("Content-Type %q on an encoded body, want none", ct)
	}
}

// A HEAD response has no body (RFC 9110 §9.3.2) but the header fields a GET would get,
// its Content-Length among them, as net/http sends it; the connection stays usable.
func TestHeadHasNoBody(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "a body HEAD does not get")
	}))
	c := dialRaw(t, ts.addr)
	c.send("HEAD / HTTP/1.1\r\nHost: test\r\n\r\n")
	resp, body := c.response("HEAD")
	if body != "" {
		t.Errorf("HEAD response has body %q", body)
	}
	if cl := resp.Header.Get("Content-Length"); cl != "24" {
		t.Errorf("Content-Length %q, want 24, what a GET would get", cl)
	}
	// Had the server sent the body anyway, it would be read here as the next response.
	c.send(get("/again"))
	if resp, body := c.response("GET"); resp.StatusCode != 200 || body != "a body HEAD does not get" {
		t.Errorf("the request after HEAD got %d %q", resp.StatusCode, body)
	}
}

// A 204 has no body (RFC 9110 §15.3.5): the handler's Write says so with
// http.ErrBodyNotAllowed, and the response has no Content-Length, even one the handler
// set (a proxy copies it from upstream), as net/http drops it.
func TestNoContentRefusesBody(t *testing.T) {
	writeErr := make(chan error, 1)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "11")
		w.WriteHeader(http.StatusNoContent)
		_, err := io.WriteString(w, "not allowed")
		writeErr <- err
	}))
	c := dialRaw(t, ts.addr)
	c.send(get("/"))
	resp, body := c.response("GET")
	if resp.StatusCode != http.StatusNoContent || body != "" {
		t.Errorf("got %d with body %q, want 204 and none", resp.StatusCode, body)
	}
	if _, ok := resp.Header["Content-Length"]; ok {
		t.Errorf("a 204 with Content-Length %q (RFC 9110 §8.6: must not)", resp.Header.Get("Content-Length"))
	}
	if err := recv(t, writeErr, "the handler's Write"); err != http.ErrBodyNotAllowed {
		t.Errorf("Write on a 204 returned %v, want http.ErrBodyNotAllowed", err)
	}
	// Nothing of the refused body follows: the connection carries the next request.
	c.send(get("/"))
	if resp, _ := c.response("GET"); resp.StatusCode != http.StatusNoContent {
		t.Errorf("second request got %d", resp.StatusCode)
	}
}

// A Content-Length the handler sets is the response's, even when it flushes: no chunking,
// and writing past it fails with http.ErrContentLength.
func TestHandlerContentLength(t *testing.T) {
	overflow := make(chan error, 1)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "11")
		io.WriteString(w, "hello")
		w.(http.Flusher).Flush()
		io.WriteString(w, " world")
		_, err := io.WriteString(w, "!")
		overflow <- err
	}))
	resp, body, _ := do(t, newClient(t), newRequest(t, "GET", ts.url("/"), nil))
	if body != "hello world" || resp.ContentLength != 11 || len(resp.TransferEncoding) != 0 {
		t.Errorf("body %q, Content-Length %d, Transfer-Encoding %q; want \"hello world\", 11, none",
			body, resp.ContentLength, resp.TransferEncoding)
	}
	if err := recv(t, overflow, "the handler's last Write"); err != http.ErrContentLength {
		t.Errorf("writing past the Content-Length returned %v, want http.ErrContentLength", err)
	}
}

// Every kind of response framing leaves the connection in step for the next request:
// one client connection carries them all (HTTP/1.1 persistence, RFC 9112 §9.3).
func TestConnectionReused(t *testing.T) {
	big := payload(100 << 10)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/short":
			io.WriteString(w, "short")
		case "/flushed":
			io.WriteString(w, "a")
			w.(http.Flusher).Flush()
			io.WriteString(w, "b")
		case "/big":
			w.Write(big)
		case "/declared":
			w.Header().Set("Content-Length", "3")
			io.WriteString(w, "abc")
		case "/nocontent":
			w.WriteHeader(http.StatusNoContent)
		case "/empty":
		}
	}))
	client := newClient(t)
	paths := []string{"/short", "/flushed", "/big", "/declared", "/nocontent", "/empty", "/short"}
	for i, path := range paths {
		for _, method := range []string{"GET", "HEAD"} {
			_, _, reused := do(t, client, newRequest(t, method, ts.url(path), nil))
			if first := i == 0 && method == "GET"; reused == first {
				t.Errorf("%s %s: connection reused %v, want %v", method, path, reused, !first)
			}
		}
	}
	// The client also posts bodies over it.
	for _, body := range []string{"", "x", string(payload(20 << 10))} {
		req := newRequest(t, "POST", ts.url("/empty"), bytes.NewReader([]byte(body)))
		if _, _, reused := do(t, client, req); !reused {
			t.Errorf("POST of %d bytes: a new connection", len(body))
		}
	}
}
