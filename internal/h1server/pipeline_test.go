package h1server

import (
	"io"
	"net/http"
	"testing"
)

// Requests pipelined in one write are answered one after another, in the order they came
// (RFC 9112 §9.3.2).
func TestPipelinedRequestsAnsweredInOrder(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.URL.Path)
	}))
	c := dialRaw(t, ts.addr)
	c.send(get("/first") + "POST /second HTTP/1.1\r\nHost: test\r\nContent-Length: 3\r\n\r\nabc" + get("/third"))
	for _, want := range []string{"/first", "/second", "/third"} {
		if resp, body := c.response("GET"); resp.StatusCode != 200 || body != want {
			t.Fatalf("got %d %q, want 200 %q", resp.StatusCode, body, want)
		}
	}
}
