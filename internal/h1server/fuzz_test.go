package h1server

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// echo answers with the request's method, path and body length, and names the method in
// a header so that the reader of the answers knows which has no body (HEAD).
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	n, err := io.Copy(io.Discard, r.Body)
	w.Header().Set("X-Method", r.Method)
	fmt.Fprintf(w, "%s %s %d", r.Method, r.URL.Path, n)
	if err != nil {
		io.WriteString(w, " (body cut short)")
	}
})

// FuzzServe writes arbitrary bytes to a connection of a running server, then shuts the
// client's side down and reads all that comes back. Whatever the bytes, the server must
// not panic, and must answer with nothing but well-formed HTTP/1.x responses, one after
// another, none of them after one that says the connection closes.
func FuzzServe(f *testing.F) {
	for _, seed := range []string{
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
		"POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a\r\nX-Big: " + strings.Repeat("b", 8<<10) + "\r\n\r\n",
		"GET / HTTP/1.0\r\n\r\n",
		"GET /k HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /k2 HTTP/1.0\r\n\r\n",
		"HEAD /h HTTP/1.1\r\nHost: a\r\n\r\nGET /after-head HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST /e HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
		"POST /x HTTP/1.1\r\nHost: a\r\nExpect: other\r\n\r\n",
		"GET /c HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\nGET /never HTTP/1.1\r\nHost: a\r\n\r\n",
		"POST /short HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc",
		"\x00\x01\x02junk\r\n\r\n",
	} {
		f.Add([]byte(seed))
	}
	ts := startServer(f, echo, func(s *Server) { s.MaxHeaderBytes = 1 << 10 })
	f.Fuzz(func(t *testing.T, in []byte) {
		// The client shuts its side down first, so each run leaves its port in TIME_WAIT
		// for a minute; thousands of runs a second would use up the ephemeral ports of
		// one address and stall the fuzzer. Each run dials from the next loopback address.
		n := fuzzSource.Add(1)
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 1, byte(n/254%254+1), byte(n%254+1))}}
		nc, err := d.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		c := nc.(*net.TCPConn)
		defer c.Close()
		c.SetDeadline(time.Now().Add(failAfter))
		wrote := make(chan struct{})
		go func() { // while the answers are read: the server may stop reading first
			defer close(wrote)
			c.Write(in)
			c.CloseWrite()
		}()
		out, err := io.ReadAll(c)
		if err != nil && !isReset(err) { // a reset: the server closed with input unread
			t.Fatalf("reading the answers: %v (read so far: %q)", err, out)
		}
		<-wrote
		checkResponses(t, out)
		if log := ts.log.String(); strings.Contains(log, "panic") {
			t.Fatalf("the server panicked on %q:\n%s", in, log)
		}
	})
}

var fuzzSource atomic.Uint32 // which loopback address the next run dials from

// checkResponses checks that out is a sequence of whole HTTP/1.x responses.
func checkResponses(t *testing.T, out []byte) {
	t.Helper()
	br := bufio.NewReader(bytes.NewReader(out))
	for i := 1; ; i++ {
		if _, err := br.Peek(1); err == io.EOF {
			return
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d is malformed: %v\nall the server sent: %q", i, err, out)
		}
		if resp.ProtoMajor != 1 {
			t.Fatalf("response %d is %s", i, resp.Proto)
		}
		method := resp.Header.Get("X-Method")
		if method == "HEAD" {
			// No body follows, whatever the length the head declares; ReadResponse,
			// told of no request, would take one.
			continue
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("response %d (%s) has a malformed body: %v\nall the server sent: %q", i, resp.Status, err, out)
		}
		if method != "" && !bytes.HasPrefix(body, []byte(method+" ")) {
			t.Fatalf("response %d to a %s has body %q", i, method, body)
		}
		if resp.Close && resp.StatusCode >= 200 {
			if rest, _ := io.ReadAll(br); len(rest) > 0 {
				t.Fatalf("response %d says the connection closes, yet %q follows", i, rest)
			}
			return
		}
	}
}
