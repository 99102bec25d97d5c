package h1server

import (
	"net/http"
	"strings"
	"testing"
)

// Requests that cannot be served are refused with the status and text net/http's server
// writes, and the connection closes after the refusal (what follows on it cannot be
// trusted to start a request).
func TestRefusals(t *testing.T) {
	tests := []struct {
		name, request string
		status        int
		body          string // net/http's text for the refusal
	}{
		{"header block over MaxHeaderBytes",
			"GET / HTTP/1.1\r\nHost: test\r\nX-Big: " + strings.Repeat("a", 16<<10) + "\r\n\r\n",
			431, "431 Request Header Fields Too Large"},
		{"HTTP/1.1 without Host", "GET / HTTP/1.1\r\n\r\n",
			400, "400 Bad Request: missing required Host header"},
		{"two Host fields", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
			400, "400 Bad Request"}, // http.ReadRequest's own refusal
		{"malformed Host", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n",
			400, "400 Bad Request: malformed Host header"},
		{"garbage request line", "\x00\x01 not a request \x7f\r\n\r\n",
			400, "400 Bad Request"},
		{"head cut short by the client's close", "GET / HTTP/1.1\r\nHost: test\r\n",
			400, "400 Bad Request"},
		{"HTTP/2.0 request line", "GET / HTTP/2.0\r\nHost: test\r\n\r\n",
			505, "505 HTTP Version Not Supported: unsupported protocol version"},
		{"unknown transfer coding", "POST / HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: gzip\r\n\r\n",
			501, "Unsupported transfer encoding"},
		{"two Transfer-Encoding fields", "POST / HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
			501, "Unsupported transfer encoding"},
		{"unknown expectation", "POST / HTTP/1.1\r\nHost: test\r\nExpect: something\r\nContent-Length: 3\r\n\r\nabc",
			417, ""},
	}
	ran := make(chan string, len(tests))
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran <- r.Method + " " + r.RequestURI
	}), func(s *Server) { s.MaxHeaderBytes = 4 << 10 })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := dialRaw(t, ts.addr)
			c.send(tt.request)
			if tt.name == "head cut short by the client's close" {
				c.CloseWrite()
			}
			resp, body := c.response("GET")
			if resp.StatusCode != tt.status || body != tt.body {
				t.Errorf("got %d %q, want %d %q", resp.StatusCode, body, tt.status, tt.body)
			}
			if !resp.Close {
				t.Error("the refusal does not say the connection closes")
			}
			c.expectClosed()
		})
	}
	select {
	case req := <-ran:
		t.Errorf("the handler ran for refused request %q", req)
	default:
	}
}
