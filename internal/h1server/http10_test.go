package h1server

import (
	"io"
	"net/http"
	"testing"
)

// An HTTP/1.0 client knows no chunked coding (RFC 9112 §7.1: not to be sent to a 1.0
// recipient): a body whose length is not known when the head goes out is delimited by
// the connection's close, and the response says it closes.
func TestHTTP10FlushedBodyEndsAtClose(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "streamed ")
		w.(http.Flusher).Flush()
		io.WriteString(w, "to a 1.0 client")
	}))
	c := dialRaw(t, ts.addr)
	c.send("GET / HTTP/1.0\r\n\r\n")
	resp, body := c.response("GET") // reads the body to the close
	if resp.ProtoMajor != 1 || resp.ProtoMinor != 0 {
		t.Errorf("response is %s, want HTTP/1.0 to a 1.0 client", resp.Proto)
	}
	if len(resp.TransferEncoding) != 0 || resp.ContentLength != -1 {
		t.Errorf("Transfer-Encoding %q, Content-Length %d; want neither", resp.TransferEncoding, resp.ContentLength)
	}
	if !resp.Close {
		t.Error("the response does not say the connection closes")
	}
	if body != "streamed to a 1.0 client" {
		t.Errorf("body %q", body)
	}
}

// An HTTP/1.0 client that asks for keep-alive gets it when the body's length can be sent:
// 'Connection: keep-alive' and Content-Length (RFC 9112 §C.2.2), and its next request is
// answered on the same connection.
func TestHTTP10KeepAlive(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "kept "+r.URL.Path)
	}))
	c := dialRaw(t, ts.addr)
	for _, path := range []string{"/1", "/2"} {
		c.send("GET " + path + " HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
		resp, body := c.response("GET")
		if got := resp.Header.Get("Connection"); got != "keep-alive" {
			t.Errorf("%s: Connection %q, want keep-alive", path, got)
		}
		if resp.ContentLength != int64(len("kept "+path)) || body != "kept "+path {
			t.Errorf("%s: Content-Length %d, body %q", path, resp.ContentLength, body)
		}
	}
	// Without keep-alive the connection closes after the answer, as 1.0 has it.
	c.send("GET /3 HTTP/1.0\r\n\r\n")
	if resp, _ := c.response("GET"); !resp.Close {
		t.Error("a 1.0 request without keep-alive was answered as if kept")
	}
	c.expectClosed()
}
