package upstream

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"testing"
)

// The response parser is fuzzed three ways: the whole client against an engine that sends
// arbitrary bytes, cut into reads at arbitrary places and read with buffers of arbitrary
// size, must reach the same result as with the bytes in one read (the split of the input
// never changes what is parsed); where both it and net/http's parser accept a response,
// they must agree on its status and body (two parsers that frame one stream differently
// is how responses are smuggled); and the chunked decoder alone, fed piecewise or in
// place, against net/http's chunked reader. The seeds run as ordinary tests.

// responseSeeds are well-formed and malformed responses: framing, limits, status lines,
// chunk sizes and extensions, trailers.
var responseSeeds = []string{
	"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n9\r\ndata: 1\n\n\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n9;name=value\r\ndata: 1\n\n\r\n3 ; a=\"b c\"\r\nabc\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Usage\r\n\r\n3\r\nabc\r\n0\r\nX-Usage: 12\r\nX-Other: y\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: CHUNKED\r\nContent-Length: 99\r\n\r\n00000003\r\nabc\r\n000\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello and more",
	"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 200 \r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.0 200 OK\r\n\r\nuntil the close",
	"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
	"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nContent-Length: 14\r\n\r\n{\"error\":\"no\"}",
	"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
	"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
	"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n",
	"HTTP/1.1 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 1\r\n\r\nx",
	"HTTP/1.1 2000 OK\r\n\r\n",
	"HTTP/1.1 099 Low\r\n\r\n",
	"HTTP/1.2 200 OK\r\n\r\n",
	"HTTP/2 200\r\n\r\n",
	"http/1.1 200 OK\r\n\r\n",
	"HTTP/1.1 200 OK\r\nX-A: b\r\n c\r\n\r\n",
	"HTTP/1.1 200 OK\r\nX-A : b\r\n\r\n",
	"HTTP/1.1 200 OK\r\nX-A: b\rc\r\n\r\n",
	"HTTP/1.1 200 OK\r\nX-A: b\x00c\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nhello",
	"HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\nhello",
	"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;\x01\r\nabc\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nbad trailer\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nab",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + strings.Repeat("1\r\nx\r\n", 50) + "0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;" + strings.Repeat("e", maxChunkLine) + "\r\nx\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\n" + strings.Repeat("X-A: b\r\n", 101) + "\r\n",
	"HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", 33<<10) + "\r\n\r\n",
	"HTTP/1.1 101 Switching Protocols\r\n\r\n",
	strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", 6) + "HTTP/1.1 200 OK\r\n\r\n",
	"",
	"\r\n",
	"HTTP/1.1 200 OK\r\nContent-Len",
}

// outcome is what the client made of one response.
type outcome struct {
	status int
	body   []byte
	err    error
	pooled bool
	unread int // bytes of the script the client never read from the connection
}

// playResponse has the client send a POST to an engine that answers script, step bytes
// per read, and reads the body with a buffer of readSize bytes.
func playResponse(script []byte, step, readSize int) outcome {
	mc := &memConn{script: script, step: step}
	c, err := New(Options{Dial: func(context.Context, string, string) (net.Conn, error) { return mc, nil }})
	if err != nil {
		panic(err)
	}
	defer c.CloseIdle()
	const base = "http://engine.test"
	resp, err := c.Do(context.Background(), postTo(base))
	if err != nil {
		return outcome{err: err, unread: len(mc.script)}
	}
	body, err := readAll(resp, readSize)
	resp.Close()
	return outcome{status: resp.Status, body: body, err: err, pooled: c.pool.count(base) == 1, unread: len(mc.script)}
}

// netHTTPResponse parses script with net/http, skipping 1xx responses as its transport does.
func netHTTPResponse(script []byte) (int, []byte, error) {
	br := bufio.NewReader(bytes.NewReader(script))
	req, _ := http.NewRequest(http.MethodPost, "http://engine.test/v1/chat/completions", nil)
	for {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return 0, nil, err
		}
		if resp.StatusCode >= 200 || resp.StatusCode == 101 {
			body, err := io.ReadAll(resp.Body)
			return resp.StatusCode, body, err
		}
	}
}

func FuzzParseResponse(f *testing.F) {
	for i, s := range responseSeeds {
		f.Add([]byte(s), uint8(i), uint16(i*131))
		f.Add([]byte(s), uint8(i), uint16(0))
	}
	f.Fuzz(func(t *testing.T, script []byte, step uint8, readSize uint16) {
		whole := playResponse(script, len(script)+1, 32<<10)
		size := int(readSize) % (16<<10 + 1) // 0: Next, in the connection's buffer
		cut := playResponse(script, int(step)%64+1, size)
		if (whole.err == nil) != (cut.err == nil) {
			t.Fatalf("in one read: %v; cut into reads of %d: %v", whole.err, int(step)%64+1, cut.err)
		}
		if whole.err == nil {
			// Bytes after the body that no request asked for keep a connection out of the
			// pool when they were read with the body. Those a read did not reach stay in
			// the socket, where the pool's look at an idle connection finds them (memConn
			// cannot be looked at): only then may the two runs pool differently.
			pooledAlike := whole.pooled == cut.pooled || (whole.pooled && whole.unread > 0) || (cut.pooled && cut.unread > 0)
			if whole.status != cut.status || !bytes.Equal(whole.body, cut.body) || !pooledAlike {
				t.Fatalf("in one read: %d %q pooled %v; cut: %d %q pooled %v",
					whole.status, whole.body, whole.pooled, cut.status, cut.body, cut.pooled)
			}
		} else {
			if a, b := ClassifyError(whole.err), ClassifyError(cut.err); a != b {
				t.Fatalf("in one read: %v (%+v); cut: %v (%+v)", whole.err, a, cut.err, b)
			}
			if !bytes.HasPrefix(whole.body, cut.body) && !bytes.HasPrefix(cut.body, whole.body) {
				t.Fatalf("bodies before the error differ: %q and %q", whole.body, cut.body)
			}
		}
		if len(whole.body) > len(script) {
			t.Fatalf("a body of %d bytes from %d bytes", len(whole.body), len(script))
		}
		if whole.err != nil {
			return
		}
		status, body, err := netHTTPResponse(script)
		if err == nil && (status != whole.status || !bytes.Equal(body, whole.body)) {
			t.Fatalf("net/http reads %d %q, the client %d %q", status, body, whole.status, whole.body)
		}
	})
}

// decodeChunked runs the chunked decoder over data: given step bytes at a time (the
// unused rest carried, as the connection's buffer carries a split line), writing into
// out buffers of outSize; or, with inPlace, each step decoded in its own buffer.
func decodeChunked(data []byte, step, outSize int, inPlace bool) (out []byte, done bool, err error) {
	d := bodyDecoder{kind: bodyChunked, lim: headLimits{maxBytes: 32 << 10, maxFields: 100}}
	var pending []byte
	for len(data) > 0 || len(pending) > 0 {
		k := min(step, len(data))
		pending = append(pending, data[:k]...)
		data = data[k:]
		for {
			var n, used int
			if inPlace {
				buf := append([]byte(nil), pending...)
				n, used, err = d.decode(buf, buf)
				out = append(out, buf[:n]...)
			} else {
				buf := make([]byte, outSize)
				n, used, err = d.decode(buf, pending)
				out = append(out, buf[:n]...)
			}
			pending = pending[used:]
			if err != nil || d.done {
				return out, d.done, err
			}
			if n == 0 && used == 0 {
				break
			}
		}
		if k == 0 {
			break // nothing more to come, and the rest does not decode
		}
	}
	return out, d.done, nil
}

var chunkedSeeds = []string{
	"9\r\ndata: 1\n\n\r\n0\r\n\r\n",
	"3;a=b\r\nabc\r\n0\r\n\r\n",
	"3 ;a=\"b\"\r\nabc\r\n0\r\nX-T: 1\r\n\r\n",
	"A\r\n0123456789\r\n0\r\n\r\n",
	"000001\r\nx\r\n0\r\n\r\n",
	"3\r\nabcd\r\n",
	"3\nabc\r\n",
	"g\r\n",
	"\r\n",
	"1\r\nx\r\n",
	"fffffffffffffff\r\n",
	"ffffffffffffffff\r\n",
	"0\r\nbad\r\n\r\n",
	"0\r\n\r\nextra",
}

func FuzzChunkedBody(f *testing.F) {
	for i, s := range chunkedSeeds {
		f.Add([]byte(s), uint8(i), uint8(i*7))
	}
	f.Fuzz(func(t *testing.T, data []byte, step, outSize uint8) {
		whole, wholeDone, wholeErr := decodeChunked(data, len(data)+1, len(data)+1, false)
		for _, inPlace := range []bool{false, true} {
			cut, done, err := decodeChunked(data, int(step)%16+1, int(outSize)%16+1, inPlace)
			if done != wholeDone || (err == nil) != (wholeErr == nil) {
				t.Fatalf("in place %v: done %v, %v; whole: done %v, %v", inPlace, done, err, wholeDone, wholeErr)
			}
			if !bytes.Equal(cut, whole) && (wholeErr == nil || (!bytes.HasPrefix(cut, whole) && !bytes.HasPrefix(whole, cut))) {
				t.Fatalf("in place %v: %q; whole: %q", inPlace, cut, whole)
			}
		}
		if !wholeDone {
			return
		}
		ref, err := io.ReadAll(httputil.NewChunkedReader(bytes.NewReader(data)))
		if err == nil && !bytes.Equal(ref, whole) {
			t.Fatalf("net/http decodes %q, the client %q", ref, whole)
		}
	})
}
