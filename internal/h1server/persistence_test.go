package h1server

import (
	"io"
	"net/http"
	"testing"
)

// A response on a connection that closes after it says so, even when the handler set
// 'Connection: keep-alive' (a proxy may copy it from upstream): a client told keep-alive
// would send its next request into a closing connection. net/http replaces the field too.
func TestClosingResponseOverridesHandlerKeepAlive(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "keep-alive")
		io.WriteString(w, "x")
	}))
	for _, req := range []string{
		"GET / HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n",
		"GET / HTTP/1.0\r\n\r\n",
	} {
		c := dialRaw(t, ts.addr)
		c.send(req)
		if resp, _ := c.response("GET"); !resp.Close {
			t.Errorf("%q: the response does not say the connection closes (Connection: %q)",
				req, resp.Header.Values("Connection"))
		}
		c.expectClosed()
	}
}
