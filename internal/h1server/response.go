package h1server

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
)

// response is the http.ResponseWriter of one request.
//
// What the handler writes is held in a buffer taken from a pool at its first write and
// given back at the flush that sends it: a stream that waits between two events holds
// none. The head is not sent before the first flush or the end of the handler, so that a
// response the handler ends without flushing goes out with its Content-Length; a flushed
// one is chunked (HTTP/1.0: delimited by the connection's close).
type response struct {
	c   *conn
	req *http.Request

	header      http.Header
	status      int
	wroteHeader bool // the handler's status is set
	committed   bool // the head has been sent
	chunked     bool
	closeAfter  bool  // the connection closes after this response
	declared    int64 // the Content-Length the handler set (-1: none)
	written     int64 // body bytes the handler wrote
	head        bool  // a HEAD request: the body is counted, not sent
	http11      bool

	// out holds what goes to the client at the next flush. Once the head is sent and the
	// response is chunked, the body starts at chunkRoom, leaving room for the chunk's size
	// line; before that, at 0.
	out *[]byte
	err error // the first failed write: the connection closes after this response
}

// chunkRoom is the room kept before a chunk's data for its size line (up to 16 hex
// digits and CRLF).
const chunkRoom = 18

// sniffLen is how much of a body http.DetectContentType looks at.
const sniffLen = 512

// writeBufferSize is the buffer a handler's writes gather in between two flushes; a write
// that does not fit goes out on its own.
const writeBufferSize = 4 << 10

var writePool = sync.Pool{New: func() any { b := make([]byte, 0, writeBufferSize); return &b }}

func newResponse(c *conn, req *http.Request) *response {
	return &response{c: c, req: req, header: make(http.Header), declared: -1,
		head: req.Method == http.MethodHead, http11: req.ProtoAtLeast(1, 1)}
}

func (w *response) Header() http.Header { return w.header }

func (w *response) WriteHeader(code int) {
	if w.wroteHeader {
		return
	}
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		w.writeInformational(code)
		return
	}
	w.wroteHeader = true
	w.status = code
	if cl := field(w.header, "Content-Length"); cl != "" {
		if v, err := strconv.ParseInt(cl, 10, 64); err == nil && v >= 0 {
			w.declared = v
		} else {
			w.c.s.log().Warn("h1server: invalid Content-Length set by the handler; ignored", "content_length", cl)
			delete(w.header, "Content-Length")
		}
	}
}

// writeInformational sends a 1xx head at once, with the headers set so far.
func (w *response) writeInformational(code int) {
	if w.committed || w.err != nil {
		return
	}
	b := w.statusLine(nil, code)
	b = w.appendHeaders(b)
	b = append(b, "\r\n"...)
	w.send(b)
}

// bodyAllowed reports whether the status lets the response have a body.
func (w *response) bodyAllowed() bool {
	return !(w.status >= 100 && w.status <= 199 || w.status == http.StatusNoContent || w.status == http.StatusNotModified)
}

func (w *response) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !w.bodyAllowed() {
		return 0, http.ErrBodyNotAllowed
	}
	w.written += int64(len(p))
	if w.declared != -1 && w.written > w.declared {
		return 0, http.ErrContentLength
	}
	if w.head {
		return len(p), nil
	}
	if w.err != nil {
		return 0, w.err
	}
	out := w.buffer()
	if len(*out)+len(p)+7 <= cap(*out) { // 7: the chunk's CRLF and, at the end, the last chunk
		*out = append(*out, p...)
		return len(p), nil
	}
	// It does not fit: what is held goes out, then p on its own.
	if !w.committed {
		w.commit(false, p)
	} else {
		w.flushOut(false)
	}
	if w.err != nil {
		return 0, w.err
	}
	if w.chunked {
		var size [chunkRoom]byte
		line := append(strconv.AppendInt(size[:0], int64(len(p)), 16), '\r', '\n')
		bufs := [][]byte{line, p, crlf}
		_, err := w.c.wr.WriteBuffers(bufs)
		w.fail(err)
	} else {
		_, err := w.c.wr.Write(p)
		w.fail(err)
	}
	if w.err != nil {
		return 0, w.err
	}
	return len(p), nil
}

var crlf = []byte("\r\n")

// buffer returns the write buffer, taking one if the response holds none.
func (w *response) buffer() *[]byte {
	if w.out == nil {
		w.out = writePool.Get().(*[]byte)
		if w.committed && w.chunked {
			*w.out = (*w.out)[:chunkRoom]
		}
	}
	return w.out
}

// releaseBuffer gives the write buffer back (one grown past twice its size is dropped).
func (w *response) releaseBuffer() {
	if w.out == nil {
		return
	}
	putWriteBuffer(w.out)
	w.out = nil
}

// putWriteBuffer gives b back to the pool (one grown past twice its size is dropped).
func putWriteBuffer(b *[]byte) {
	if cap(*b) <= 2*writeBufferSize {
		*b = (*b)[:0]
		writePool.Put(b)
	}
}

func (w *response) Flush() { w.FlushError() }

// FlushError sends what the handler wrote, the head first if it has not gone out.
func (w *response) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.err != nil {
		return w.err
	}
	if !w.committed {
		w.commit(false, nil)
	} else {
		w.flushOut(false)
	}
	return w.err
}

// SetReadDeadline and SetWriteDeadline are what http.ResponseController calls.
func (w *response) SetReadDeadline(t time.Time) error  { return w.c.nc.SetReadDeadline(t) }
func (w *response) SetWriteDeadline(t time.Time) error { return w.c.nc.SetWriteDeadline(t) }

// fail records the first write error: the request's context is cancelled (the client is
// gone or stalled, as net/http's server does), and the connection closes after it.
func (w *response) fail(err error) {
	if err == nil || w.err != nil {
		return
	}
	w.err = err
	w.closeAfter = true
	w.c.mu.Lock()
	cancel := w.c.cancel
	w.c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// send writes b to the client.
func (w *response) send(b []byte) {
	if w.err != nil {
		return
	}
	_, err := w.c.wr.Write(b)
	w.fail(err)
}

// flushOut sends the held body, framed (last: with the end of a chunked body), and gives
// the buffer back.
func (w *response) flushOut(last bool) {
	if w.out == nil {
		if last && w.chunked {
			w.send([]byte("0\r\n\r\n"))
		}
		return
	}
	out := *w.out
	start := 0
	if w.chunked {
		start = chunkRoom
		if n := len(out) - chunkRoom; n > 0 {
			var size [chunkRoom]byte
			line := append(strconv.AppendInt(size[:0], int64(n), 16), '\r', '\n')
			start -= len(line)
			copy(out[start:], line)
			out = append(out, '\r', '\n')
		}
		if last {
			out = append(out, "0\r\n\r\n"...)
		}
	}
	*w.out = out
	if len(out) > start {
		w.send(out[start:])
	}
	w.releaseBuffer()
}

// commit sends the head and what the handler wrote so far, framed: with the length of
// the whole body when the handler has ended (final) or set it, chunked otherwise, or for
// an HTTP/1.0 client delimited by the connection's close. next is the write that does not
// fit the buffer and goes out after the head, if that is what commits.
func (w *response) commit(final bool, next []byte) {
	w.committed = true
	var body []byte
	if w.out != nil {
		body = *w.out
	}
	h := w.header
	if !w.bodyAllowed() {
		// No framing on a response without a body (RFC 9110 §8.6, §15.3.5), nor a type on
		// a 304: net/http drops them, whatever the handler set (a proxy copies them).
		delete(h, "Content-Length")
		delete(h, "Transfer-Encoding")
		if w.status == http.StatusNotModified {
			delete(h, "Content-Type")
		}
	}
	if final && w.declared == -1 && w.bodyAllowed() && field(h, "Transfer-Encoding") == "" {
		// A HEAD response says the length a GET would get (RFC 9110 §9.3.2), as net/http
		// does when the handler wrote something.
		n := int64(len(body))
		if w.head {
			n = w.written
		}
		if !w.head || n > 0 {
			w.declared = n
			h["Content-Length"] = []string{strconv.FormatInt(n, 10)}
		}
	}
	// The type is sniffed from the body's first bytes, those held and those of the write
	// that commits (net/http sniffs the first write that reaches the wire), unless the
	// body is encoded (its bytes then say nothing of the type; net/http, issue 31753).
	if _, ok := h["Content-Type"]; !ok && w.bodyAllowed() && field(h, "Content-Encoding") == "" {
		sniff := body
		if len(sniff) < sniffLen && len(next) > 0 {
			sniff = append(sniff[:len(sniff):len(sniff)], next[:min(len(next), sniffLen-len(sniff))]...)
		}
		if len(sniff) > 0 {
			h["Content-Type"] = []string{http.DetectContentType(sniff)}
		}
	}
	if strings.EqualFold(field(h, "Connection"), "close") || w.req.Close || w.c.s.shutdown.Load() {
		w.closeAfter = true
	}
	delete(h, "Transfer-Encoding")
	switch {
	case !w.bodyAllowed() || w.head || w.declared != -1:
	case w.http11:
		w.chunked = true
	default:
		w.closeAfter = true // an HTTP/1.0 client reads to the close
	}
	if !w.http11 && !w.closeAfter && !keepAlive10(w.req) {
		w.closeAfter = true
	}
	if w.closeAfter && !httpguts.HeaderValuesContainsToken(h["Connection"], "close") {
		delete(h, "Connection") // a handler's keep-alive would say the opposite (net/http drops it too)
	}

	b := writePool.Get().(*[]byte)
	head := w.statusLine((*b)[:0], w.status)
	head = w.appendHeaders(head)
	if _, ok := h["Date"]; !ok {
		head = append(head, "Date: "...)
		head = time.Now().UTC().AppendFormat(head, http.TimeFormat)
		head = append(head, "\r\n"...)
	}
	if w.chunked {
		head = append(head, "Transfer-Encoding: chunked\r\n"...)
	}
	if w.closeAfter {
		if field(h, "Connection") == "" {
			head = append(head, "Connection: close\r\n"...)
		}
	} else if !w.http11 {
		head = append(head, "Connection: keep-alive\r\n"...)
	}
	head = append(head, "\r\n"...)
	if len(body) > 0 && !w.head && w.bodyAllowed() {
		if w.chunked {
			head = strconv.AppendInt(head, int64(len(body)), 16)
			head = append(head, "\r\n"...)
			head = append(head, body...)
			head = append(head, "\r\n"...)
		} else {
			head = append(head, body...)
		}
	}
	if final && w.chunked {
		head = append(head, "0\r\n\r\n"...)
	}
	*b = head
	w.releaseBuffer() // the body is in head now
	w.send(head)
	putWriteBuffer(b)
}

// keepAlive10 reports whether an HTTP/1.0 request asked to keep its connection.
func keepAlive10(r *http.Request) bool {
	return httpguts.HeaderValuesContainsToken(r.Header["Connection"], "keep-alive")
}

func (w *response) statusLine(b []byte, code int) []byte {
	if w.http11 {
		b = append(b, "HTTP/1.1 "...)
	} else {
		b = append(b, "HTTP/1.0 "...)
	}
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, ' ')
	if text := http.StatusText(code); text != "" {
		b = append(b, text...)
	} else {
		b = append(b, "status code "...)
		b = strconv.AppendInt(b, int64(code), 10)
	}
	return append(b, "\r\n"...)
}

// appendHeaders writes the handler's header fields, sorted by name as net/http writes
// them; a field with an invalid name is left out and a line break in a value becomes a
// space, so that no value can start a field of its own.
func (w *response) appendHeaders(b []byte) []byte {
	var keysArr [16]string
	keys := keysArr[:0]
	for k := range w.header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !httpguts.ValidHeaderFieldName(k) {
			continue
		}
		for _, v := range w.header[k] {
			b = append(b, k...)
			b = append(b, ": "...)
			start := len(b)
			b = append(b, strings.TrimSpace(v)...)
			for i := start; i < len(b); i++ {
				if b[i] == '\r' || b[i] == '\n' {
					b[i] = ' '
				}
			}
			b = append(b, "\r\n"...)
		}
	}
	return b
}

// finish ends the response after its handler returned. keep: the connection can carry
// another request; linger: it closes with a body left unread, so it must be closed as
// closeWriteAndWait does, or the client may lose the answer to the reset.
func (w *response) finish(body *requestBody) (keep, linger bool) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	// What the handler left of the body is read, up to a bound, only when the connection
	// could otherwise carry another request, and before the head goes out, so that the
	// head can say the connection closes if the rest is too long to drop.
	closing := w.closeAfter || w.err != nil || w.req.Close || w.c.s.shutdown.Load() ||
		strings.EqualFold(field(w.header, "Connection"), "close")
	if !body.done {
		if !closing {
			if d := w.c.s.ReadHeaderTimeout; d > 0 {
				w.c.nc.SetReadDeadline(time.Now().Add(d))
			}
		}
		if closing || !body.discardRest() {
			w.closeAfter, linger = true, true
		}
	}
	if !w.committed {
		w.commit(true, nil)
	} else {
		w.flushOut(true)
	}
	w.c.nc.SetWriteDeadline(time.Time{})
	if w.declared != -1 && !w.head && w.bodyAllowed() && w.written != w.declared {
		w.closeAfter = true // fewer bytes than declared: the client waits for the rest
	}
	if w.err != nil || w.closeAfter {
		return false, linger && w.err == nil
	}
	w.c.releaseReader()
	return true, false
}

var _ interface {
	http.ResponseWriter
	http.Flusher
	FlushError() error
} = (*response)(nil)

// field is h.Get(key) for a key already in canonical form, as every key the server reads
// is: without Get's canonicalization of the key, a few hundred instructions a call, on
// every request's path. The fields the server parses and those handlers set through
// Header's methods are stored under canonical keys, so the two find the same values.
func field(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}
