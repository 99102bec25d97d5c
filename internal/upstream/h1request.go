package upstream

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/net/http/httpguts"
)

// Request is one HTTP/1.1 request to a replica.
type Request struct {
	Method string // "POST", "GET", …
	// Base is the replica's base URL, "http://host[:port]" or "https://host[:port]", as the
	// configuration validates it. Connections are pooled per Base.
	Base string
	Path string // the origin-form target: "/v1/chat/completions", with any query
	// Header holds the fields to send. Host, Content-Length, Transfer-Encoding, Connection,
	// Keep-Alive, TE, Trailer and Upgrade are the client's to write and are refused here.
	Header http.Header
	// Pass is a header passed on as well, without a copy (the client's request header):
	// its fields are sent except those Skip names and those Header sets. Skip's keys are
	// canonical names, as Pass's are.
	Pass http.Header
	Skip map[string]bool
	// Body is sent with its Content-Length (also when empty, for POST, PUT and PATCH).
	Body []byte
	// More are further parts of the body, sent after Body in order, as if joined: a body
	// held as slices of a larger one (a client's request with one member replaced) is
	// written with one writev instead of being copied into one slice first.
	More [][]byte
	// Close asks the engine to close the connection after the response, and the client
	// never pools it.
	Close bool
}

// QuickSend reports whether Send returns within the dial timeout whatever the engine
// does: the replica is plaintext (a TLS handshake is bounded by the context alone) and the
// request goes out in one write, its body (at most 16 KiB) copied after its head, which
// fits an idle connection's socket buffer, so Send does not wait on the engine reading it.
func (req *Request) QuickSend() bool {
	return strings.HasPrefix(req.Base, "http://") && req.bodySize() <= inlineBody
}

// bodySize is the length of Body and More together.
func (req *Request) bodySize() int {
	n := len(req.Body)
	for _, p := range req.More {
		n += len(p)
	}
	return n
}

// target is what a Base says about where and how to connect.
type target struct {
	addr string // host:port to dial
	host string // the Host header
	tls  bool
}

// parseBase splits a base URL without allocating when it names its port.
func parseBase(base string) (target, error) {
	var t target
	host, ok := strings.CutPrefix(base, "http://")
	port := ":80"
	if !ok {
		host, ok = strings.CutPrefix(base, "https://")
		port, t.tls = ":443", true
	}
	host = strings.TrimSuffix(host, "/")
	if !ok || host == "" || strings.ContainsAny(host, "/?#@ \t\r\n") {
		return t, fmt.Errorf("%w: base URL %q is not http(s)://host[:port]", ErrInvalidRequest, base)
	}
	t.host, t.addr = host, host
	if i, j := strings.LastIndexByte(host, ':'), strings.LastIndexByte(host, ']'); i <= j {
		t.addr = host + port
	}
	return t, nil
}

// headers the client writes itself; a request that sets one is refused rather than
// written with two framings.
var ownHeaders = [...]string{"Host", "Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "Te", "Trailer", "Upgrade"}

// appendHead appends the request line and header of req to b.
func appendHead(b []byte, req *Request, host string) ([]byte, error) {
	if !httpguts.ValidHeaderFieldName(req.Method) {
		return b, fmt.Errorf("%w: method %q", ErrInvalidRequest, req.Method)
	}
	if !validTarget(req.Path) {
		return b, fmt.Errorf("%w: path %q", ErrInvalidRequest, req.Path)
	}
	b = append(b, req.Method...)
	b = append(b, ' ')
	b = append(b, req.Path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\n"...)
	var err error
	for name, values := range req.Header {
		if b, err = appendField(b, name, values); err != nil {
			return b, err
		}
	}
	for name, values := range req.Pass {
		if _, set := req.Header[name]; set || req.Skip[name] {
			continue
		}
		if b, err = appendField(b, name, values); err != nil {
			return b, err
		}
	}
	if req.Body != nil || len(req.More) > 0 || req.Method == http.MethodPost || req.Method == http.MethodPut || req.Method == http.MethodPatch {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(req.bodySize()), 10)
		b = append(b, "\r\n"...)
	}
	if req.Close {
		b = append(b, "Connection: close\r\n"...)
	}
	return append(b, "\r\n"...), nil
}

// appendField appends the lines of one header field, refusing what may not be sent.
func appendField(b []byte, name string, values []string) ([]byte, error) {
	if !httpguts.ValidHeaderFieldName(name) {
		return b, fmt.Errorf("%w: header name %q", ErrInvalidRequest, name)
	}
	for _, own := range ownHeaders {
		if len(name) == len(own) && strings.EqualFold(name, own) {
			return b, fmt.Errorf("%w: header %s is written by the client", ErrInvalidRequest, own)
		}
	}
	for _, v := range values {
		if !httpguts.ValidHeaderFieldValue(v) {
			return b, fmt.Errorf("%w: value of header %s", ErrInvalidRequest, name)
		}
		b = append(b, name...)
		b = append(b, ": "...)
		b = append(b, v...)
		b = append(b, "\r\n"...)
	}
	return b, nil
}

// validTarget accepts an origin-form target: a "/" then visible ASCII only.
func validTarget(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] <= ' ' || p[i] >= 0x7f {
			return false
		}
	}
	return true
}

// writeBufs pools the buffers requests are written from. A body up to inlineBody is
// copied after the head and the two go out in one write; a larger one is written from the
// caller's slice, after the head.
var writeBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// buildRequest writes req's head, and its body when it goes out in the same write
// (inline), into a buffer of writeBufs, which the caller gives back with putWriteBuffer.
func buildRequest(req *Request, host string, inline bool) (*[]byte, []byte, error) {
	wb := writeBufs.Get().(*[]byte)
	head, err := appendHead((*wb)[:0], req, host)
	if err != nil {
		putWriteBuffer(wb)
		return nil, nil, err
	}
	if inline {
		head = append(head, req.Body...)
		for _, p := range req.More {
			head = append(head, p...)
		}
	}
	*wb = head
	return wb, head, nil
}

// putWriteBuffer gives a write buffer back to writeBufs, unless a large body grew it.
func putWriteBuffer(wb *[]byte) {
	if cap(*wb) <= maxPooledWB {
		*wb = (*wb)[:0]
		writeBufs.Put(wb)
	}
}

const (
	inlineBody  = 16 << 10
	maxPooledWB = 64 << 10
)
