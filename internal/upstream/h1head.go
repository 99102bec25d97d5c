package upstream

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// HeaderField is one response header line, its name as the engine wrote it.
type HeaderField struct {
	Name, Value string
}

// Header is a response's header fields in the order received. It is a slice rather than
// a map: engines send a handful of fields and the gateway reads one or two of them, so a
// map and canonicalised keys would be work for nothing on every response.
type Header []HeaderField

// Get returns the value of the first field named name (case-insensitive), or "".
func (h Header) Get(name string) string {
	for _, f := range h {
		if strings.EqualFold(f.Name, name) {
			return f.Value
		}
	}
	return ""
}

// HTTP returns the fields as an http.Header, for code written against net/http.
func (h Header) HTTP() http.Header {
	m := make(http.Header, len(h))
	for _, f := range h {
		m.Add(f.Name, f.Value)
	}
	return m
}

// headLimits bound what a response head (and a chunked body's trailer) may hold.
type headLimits struct {
	maxBytes  int // the status line and every header line, terminators included
	maxFields int
}

// responseHead is a parsed status line and header, with what they say about the body.
type responseHead struct {
	minor  int // HTTP/1.<minor>: 0 or 1
	status int
	fields Header
	// contentLength is the declared length of the body, or -1 when none was declared.
	contentLength int64
	chunked       bool
	// mustClose: the connection may not carry another exchange (Connection: close, or a
	// length that only a Transfer-Encoding overrode, which RFC 9112 §6.3 calls a
	// possible smuggling attempt).
	mustClose bool
}

// errNeedMore: the bytes given do not yet hold a whole head.
var errNeedMore = errors.New("need more bytes")

// headEnd returns the length of the head at the start of b — through the empty line that
// ends it, CRLF or bare LF — or -1 when b does not hold all of it. from is where a previous
// call on a prefix of b stopped looking, so a head that arrives in many reads is scanned
// once.
func headEnd(b []byte, from int) int {
	from = max(from-2, 0)
	for {
		i := bytes.IndexByte(b[from:], '\n')
		if i < 0 {
			return -1
		}
		i += from
		switch {
		case i+1 < len(b) && b[i+1] == '\n':
			return i + 2
		case i+2 < len(b) && b[i+1] == '\r' && b[i+2] == '\n':
			return i + 3
		case i+1 >= len(b) || (i+2 >= len(b) && b[i+1] == '\r'):
			return -1
		}
		from = i + 1
	}
}

// parseHead parses the head that is exactly b (headEnd's length). Field names and values
// are substrings of one string copied from b, so the head outlives the read buffer it came
// from at the cost of one allocation. fields is reused for the header when it is large
// enough.
func parseHead(b []byte, lim headLimits, fields Header) (responseHead, error) {
	h := responseHead{contentLength: -1, fields: fields[:0]}
	s := string(b)
	line, rest, err := nextLine(s)
	if err != nil {
		return h, err
	}
	if err := h.parseStatusLine(line); err != nil {
		return h, err
	}
	var transferEncodings int
	for {
		line, rest, err = nextLine(rest)
		if err != nil {
			return h, err
		}
		if line == "" {
			break
		}
		f, err := parseField(line)
		if err != nil {
			return h, err
		}
		if len(h.fields) == lim.maxFields {
			return h, &ProtocolError{What: "more than " + strconv.Itoa(lim.maxFields) + " header fields"}
		}
		h.fields = append(h.fields, f)
		switch {
		case strings.EqualFold(f.Name, "Content-Length"):
			n, ok := parseContentLength(f.Value)
			if !ok {
				return h, &ProtocolError{What: "bad Content-Length " + strconv.Quote(f.Value)}
			}
			if h.contentLength >= 0 && h.contentLength != n {
				return h, &ProtocolError{What: "conflicting Content-Length fields"}
			}
			h.contentLength = n
		case strings.EqualFold(f.Name, "Transfer-Encoding"):
			// Only "chunked" is accepted: the client asks for no other coding, and one it
			// cannot undo would leave the body's end unknown.
			transferEncodings++
			if transferEncodings > 1 || !strings.EqualFold(f.Value, "chunked") {
				return h, &ProtocolError{What: "unsupported Transfer-Encoding " + strconv.Quote(f.Value)}
			}
			h.chunked = true
		case strings.EqualFold(f.Name, "Connection"):
			if hasToken(f.Value, "close") {
				h.mustClose = true
			}
		}
	}
	if h.chunked {
		if h.minor == 0 {
			// An HTTP/1.0 peer cannot send chunked; net/http ignores the field there,
			// which would read the chunk framing as the body. Refuse instead.
			return h, &ProtocolError{What: "Transfer-Encoding in an HTTP/1.0 response"}
		}
		if h.contentLength >= 0 {
			h.contentLength = -1
			h.mustClose = true
		}
	}
	if h.minor == 0 {
		h.mustClose = true // no keep-alive with HTTP/1.0 peers
	}
	return h, nil
}

// parseStatusLine parses "HTTP/1.x NNN reason" (the reason and the space before it may be
// missing, as RFC 9112 §4 lets a client accept).
func (h *responseHead) parseStatusLine(line string) error {
	const proto = "HTTP/1."
	if len(line) < len(proto)+5 || line[:len(proto)] != proto || line[len(proto)+1] != ' ' {
		return &ProtocolError{What: "bad status line " + quoteShort(line)}
	}
	switch line[len(proto)] {
	case '0':
		h.minor = 0
	case '1':
		h.minor = 1
	default:
		return &ProtocolError{What: "unsupported protocol " + quoteShort(line)}
	}
	code, reason := line[len(proto)+2:], ""
	if len(code) > 3 {
		code, reason = code[:3], code[3:]
		if reason[0] != ' ' || !httpguts.ValidHeaderFieldValue(reason) {
			return &ProtocolError{What: "bad status line " + quoteShort(line)}
		}
	}
	status := 0
	for i := 0; i < len(code); i++ {
		c := code[i]
		if c < '0' || c > '9' {
			return &ProtocolError{What: "bad status code " + quoteShort(line)}
		}
		status = status*10 + int(c-'0')
	}
	if len(code) != 3 || status < 100 {
		return &ProtocolError{What: "bad status code " + quoteShort(line)}
	}
	h.status = status
	return nil
}

// nextLine splits the first line off s: LF ends a line, and a CR just before it is part of
// the terminator. A CR anywhere else is refused: some parsers end lines there, and two
// parsers that split a head differently are how responses are smuggled.
func nextLine(s string) (line, rest string, err error) {
	i := strings.IndexByte(s, '\n')
	if i < 0 {
		return "", "", &ProtocolError{What: "unterminated line"} // headEnd guarantees one
	}
	line, rest = s[:i], s[i+1:]
	line = strings.TrimSuffix(line, "\r")
	if strings.IndexByte(line, '\r') >= 0 {
		return "", "", &ProtocolError{What: "bare CR in " + quoteShort(line)}
	}
	return line, rest, nil
}

// parseField parses "name: value". Whitespace before the colon and folded lines (obs-fold)
// are refused, as RFC 9112 §5 allows and net/http's server does.
func parseField(line string) (HeaderField, error) {
	colon := strings.IndexByte(line, ':')
	if colon <= 0 {
		return HeaderField{}, &ProtocolError{What: "bad header line " + quoteShort(line)}
	}
	name := line[:colon]
	if !httpguts.ValidHeaderFieldName(name) {
		return HeaderField{}, &ProtocolError{What: "bad header name " + quoteShort(name)}
	}
	value := strings.Trim(line[colon+1:], " \t")
	if !httpguts.ValidHeaderFieldValue(value) {
		return HeaderField{}, &ProtocolError{What: "bad value of header " + quoteShort(name)}
	}
	return HeaderField{Name: name, Value: value}, nil
}

// parseContentLength accepts a non-negative decimal that fits in an int64, and nothing
// else: no sign, no spaces, no list.
func parseContentLength(v string) (int64, bool) {
	if v == "" || len(v) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// hasToken reports whether the comma-separated list v holds token (case-insensitive).
func hasToken(v, token string) bool {
	for v != "" {
		var item string
		item, v, _ = strings.Cut(v, ",")
		if strings.EqualFold(strings.Trim(item, " \t"), token) {
			return true
		}
	}
	return false
}

// quoteShort quotes s for an error message, cut to 64 bytes: the bytes come from the
// engine and end up in logs.
func quoteShort(s string) string {
	if len(s) > 64 {
		return strconv.Quote(s[:64]) + "…"
	}
	return strconv.Quote(s)
}
