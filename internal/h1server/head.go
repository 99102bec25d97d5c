package h1server

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// The common request head is read here without net/http's parser (docs/design.md, "The
// client's server"): http.ReadRequest copies every line, every header name and value
// into strings of their own and canonicalizes through a reader pool — 12 allocations for
// a head of five fields and 36 for the seventeen an OpenAI SDK sends, some 4 and 10 µs
// (docs/performance.md, "The request head read once"), on the path of every request to
// the gateway and again to its agent. readHeadFast copies the head once and cuts the request's strings
// out of that copy.
//
// It takes only the shape it knows to be read alike by both: one HTTP/1.1 request of a
// common method, an origin-form target, the whole head already in the read buffer, every
// line ended by CRLF, fields with valid names and values, one Host, at most one
// Content-Length and none of the fields net/http treats specially (Transfer-Encoding,
// Trailer, Pragma). Anything else it declines, having consumed nothing, and
// http.ReadRequest reads the same bytes: every refusal, every rarer shape and every
// error is still net/http's. FuzzReadHeadFastMatchesReadRequest holds what it returns to
// what http.ReadRequest returns for the same bytes.

// fastMethods are the methods readHeadFast takes; others (CONNECT, PRI, extensions) go
// to net/http.
var fastMethods = [...]string{"GET", "POST", "HEAD", "PUT", "DELETE", "OPTIONS", "PATCH"}

// maxFastFields bounds the fields of a head readHeadFast takes: a head with more is
// unusual, and net/http's reader counts them against its own limits.
const maxFastFields = 100

var crlfcrlf = []byte("\r\n\r\n")

// readHeadFast reads the request head at the start of br's buffer when it has the common
// shape, and returns nil, having consumed nothing, when it has not (see above). It reads
// from the connection only when the buffer is empty, as http.ReadRequest would.
func readHeadFast(br *bufio.Reader) *http.Request {
	if _, err := br.Peek(1); err != nil {
		return nil
	}
	buf, _ := br.Peek(br.Buffered())
	end := bytes.Index(buf, crlfcrlf)
	if end < 0 {
		return nil // the head goes on past what was read
	}
	// One copy; every string of the request is cut out of it. Its lines are cut at CRLF
	// only: a bare CR or LF, which net/http reads in its own way, stays inside a line, and
	// no request line, name or value this reader takes can hold one.
	head := string(buf[:end+2])
	line, rest, _ := strings.Cut(head, "\r\n")
	req := requestLine(line)
	if req == nil {
		return nil
	}
	if !readFields(req, rest) {
		return nil
	}
	if !transfer(req, br) {
		return nil
	}
	br.Discard(end + 4)
	return req
}

// requestLine parses "METHOD /target HTTP/1.1" as http.ReadRequest does, into a new
// request, or returns nil for a line of any other shape.
func requestLine(line string) *http.Request {
	method, rest, ok1 := strings.Cut(line, " ")
	target, proto, ok2 := strings.Cut(rest, " ")
	if !ok1 || !ok2 || proto != "HTTP/1.1" || !strings.HasPrefix(target, "/") {
		return nil
	}
	known := false
	for _, m := range fastMethods {
		if method == m {
			method, known = m, true
			break
		}
	}
	if !known {
		return nil
	}
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return nil
	}
	return &http.Request{Method: method, URL: u, RequestURI: target, Proto: proto, ProtoMajor: 1, ProtoMinor: 1}
}

// readFields parses the head's fields (fields: the lines after the request line, each
// ended by CRLF) into req.Header as net/textproto does — names canonicalized, values
// without the spaces and tabs around them, repeated names in order — and reports false
// for a field this reader leaves to net/http.
func readFields(req *http.Request, fields string) bool {
	n := strings.Count(fields, "\r\n")
	if n > maxFastFields {
		return false
	}
	strs := make([]string, n) // one slice cut into each name's values, as textproto does
	h := make(http.Header, n)
	for fields != "" {
		// Each line ends with CRLF (the head's last one too); a CR without its LF is a
		// line net/http reads in its own way.
		eol := strings.IndexByte(fields, '\r')
		if eol < 0 || eol+1 == len(fields) || fields[eol+1] != '\n' {
			return false
		}
		line := fields[:eol]
		fields = fields[eol+2:]
		colon := strings.IndexByte(line, ':')
		if colon < 0 || !httpguts.ValidHeaderFieldName(line[:colon]) {
			return false // no colon, an empty or invalid name, a folded line
		}
		name, value := line[:colon], trimOWS(line[colon+1:])
		if !httpguts.ValidHeaderFieldValue(value) {
			return false
		}
		key := http.CanonicalHeaderKey(name)
		switch key {
		case "Transfer-Encoding", "Trailer", "Pragma":
			return false
		}
		if vv := h[key]; vv != nil {
			h[key] = append(vv, value)
		} else {
			vv, strs = strs[:1:1], strs[1:]
			vv[0] = value
			h[key] = vv
		}
	}
	if len(h["Host"]) != 1 || len(h["Content-Length"]) > 1 {
		return false
	}
	req.Header = h
	req.Host = h["Host"][0]
	delete(h, "Host") // as http.ReadRequest does: the field is req.Host now
	req.Close = httpguts.HeaderValuesContainsToken(h["Connection"], "close")
	return true
}

// trimOWS removes the spaces and tabs around a field's value, as net/textproto does.
func trimOWS(v string) string {
	i, j := 0, len(v)
	for i < j && (v[i] == ' ' || v[i] == '\t') {
		i++
	}
	for j > i && (v[j-1] == ' ' || v[j-1] == '\t') {
		j--
	}
	return v[i:j]
}

// transfer sets req's body from its Content-Length as net/http does: none without one, a
// reader of exactly that many bytes of br with it. It reports false for a length
// net/http would refuse.
func transfer(req *http.Request, br *bufio.Reader) bool {
	req.Body = http.NoBody
	cl := req.Header["Content-Length"]
	if cl == nil {
		return true
	}
	n, err := strconv.ParseUint(cl[0], 10, 63)
	if err != nil {
		return false
	}
	req.ContentLength = int64(n)
	if n > 0 {
		req.Body = &lengthBody{limitedReader{r: br, n: int64(n)}}
	}
	return true
}

// lengthBody is a body of a declared length, read from the connection's buffer as
// net/http's own is: io.EOF comes with its last bytes, and io.ErrUnexpectedEOF when the
// connection ends before them.
type lengthBody struct {
	limitedReader // the bytes of the body left to read
}

func (b *lengthBody) Read(p []byte) (int, error) {
	n, err := b.limitedReader.Read(p)
	switch {
	case err == io.EOF && b.n > 0:
		err = io.ErrUnexpectedEOF
	case b.n == 0:
		err = io.EOF
	}
	return n, err
}

func (b *lengthBody) Close() error { return nil }
