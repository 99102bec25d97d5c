package upstream

import (
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

var testLimits = headLimits{maxBytes: 32 << 10, maxFields: 100}

// The end of a head is the first empty line, CRLF or bare LF (RFC 9112 §2.2), found
// however the head arrives.
func TestHeadEnd(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"HTTP/1.1 200 OK\r\n\r\nbody", 19},
		{"HTTP/1.1 200 OK\n\nbody", 17},
		{"HTTP/1.1 200 OK\r\nA: b\r\n\r\n", 25},
		{"HTTP/1.1 200 OK\r\nA: b\n\r\n", 24},
		{"HTTP/1.1 200 OK\r\nA: b\r\n", -1},
		{"HTTP/1.1 200 OK\r\nA: b\r\n\r", -1},
		{"HTTP/1.1 200 OK\r\nA: b\r\n\n", 24},
		{"HTTP/1.1 200 OK", -1},
	} {
		if got := headEnd([]byte(tc.in), 0); got != tc.want {
			t.Errorf("headEnd(%q) = %d, want %d", tc.in, got, tc.want)
		}
		// Byte by byte, resuming where the previous call stopped.
		got, from := -1, 0
		for i := 1; i <= len(tc.in) && got < 0; i++ {
			got, from = headEnd([]byte(tc.in[:i]), from), i
		}
		if got != tc.want {
			t.Errorf("headEnd(%q) byte by byte = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// What a head says about the connection and the body (RFC 9112 §6.3, §9.3).
func TestParseHead(t *testing.T) {
	type want struct {
		minor, status int
		fields        Header
		length        int64
		chunked       bool
		mustClose     bool
	}
	for _, tc := range []struct {
		name, in string
		want     want
	}{
		{"SSE", "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n",
			want{1, 200, Header{{"Content-Type", "text/event-stream"}, {"Transfer-Encoding", "chunked"}}, -1, true, false}},
		{"length, values trimmed", "HTTP/1.1 404 Not Found\r\ncontent-length:  12 \r\nX-Empty:\r\n\r\n",
			want{1, 404, Header{{"content-length", "12"}, {"X-Empty", ""}}, 12, false, false}},
		{"no reason", "HTTP/1.1 204\r\n\r\n", want{1, 204, Header{}, -1, false, false}},
		{"HTTP/1.0 never keeps the connection", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n",
			want{0, 200, Header{{"Connection", "keep-alive"}}, -1, false, true}},
		{"Connection: close in a list", "HTTP/1.1 200 OK\r\nConnection: Upgrade, CLOSE\r\n\r\n",
			want{1, 200, Header{{"Connection", "Upgrade, CLOSE"}}, -1, false, true}},
		{"length and chunked: chunked, and the connection closed after", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
			want{1, 200, Header{{"Content-Length", "3"}, {"Transfer-Encoding", "chunked"}}, -1, true, true}},
		{"equal lengths", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 003\r\n\r\n",
			want{1, 200, Header{{"Content-Length", "3"}, {"Content-Length", "003"}}, 3, false, false}},
		{"bare LF", "HTTP/1.1 200 OK\nA: b\n\n", want{1, 200, Header{{"A", "b"}}, -1, false, false}},
		{"obs-text in a value", "HTTP/1.1 200 OK\r\nA: caf\xc3\xa9\r\n\r\n", want{1, 200, Header{{"A", "caf\xc3\xa9"}}, -1, false, false}},
	} {
		h, err := parseHead([]byte(tc.in), testLimits, nil)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		got := want{h.minor, h.status, h.fields, h.contentLength, h.chunked, h.mustClose}
		if got.fields == nil {
			got.fields = Header{}
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestParseHeadRefuses(t *testing.T) {
	for _, in := range []string{
		"HTTP/1.1 200 OK\r\n" + strings.Repeat("A: b\r\n", 101) + "\r\n", // more than maxFields
		"HTTP/1.1 20 OK\r\n\r\n",
		"HTTP/1.1 20x OK\r\n\r\n",
		"HTTP/1.1 200OK\r\n\r\n",
		"HTTP/1.1 200 O\x01K\r\n\r\n",
		"HTTP/1.3 200 OK\r\n\r\n",
		"HTTP/1.1  200 OK\r\n\r\n",
		"ICY 200 OK\r\n\r\n",
		"HTTP/1.1 200 OK\r\n: no name\r\n\r\n",
		"HTTP/1.1 200 OK\r\nNo colon\r\n\r\n",
		"HTTP/1.1 200 OK\r\n\tfolded: x\r\n\r\n",
		"HTTP/1.1 200 OK\r\nA\x7f: b\r\n\r\n",
		"HTTP/1.1 200 OK\r\nA: b\x7f\r\n\r\n",
		"HTTP/1.1 200 OK\r\nA: b\rc\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1 2\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1234567890123456789\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
	} {
		_, err := parseHead([]byte(in), testLimits, nil)
		var pe *ProtocolError
		if !errors.As(err, &pe) {
			t.Errorf("parseHead(%q): %v, want a ProtocolError", in, err)
		}
	}
}

func TestHeaderGetAndHTTP(t *testing.T) {
	h := Header{{"retry-after", "3"}, {"X-A", "1"}, {"x-a", "2"}}
	if h.Get("Retry-After") != "3" || h.Get("X-A") != "1" || h.Get("missing") != "" {
		t.Fatalf("Get on %v", h)
	}
	want := http.Header{"Retry-After": {"3"}, "X-A": {"1", "2"}}
	if got := h.HTTP(); !reflect.DeepEqual(got, want) {
		t.Fatalf("HTTP() = %v, want %v", got, want)
	}
}

// Chunked bodies as RFC 9112 §7.1 writes them: sizes in hex, extensions ignored, the
// trailer read and dropped, CRLF required after sizes and data.
func TestDecodeChunked(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		done           bool
	}{
		{"one chunk", "5\r\nhello\r\n0\r\n\r\n", "hello", true},
		{"hex sizes, both cases", "a\r\n0123456789\r\nB\r\nabcdefghijk\r\n0\r\n\r\n", "0123456789abcdefghijk", true},
		{"extensions", "5;a=b;c\r\nhello\r\n3 \t; q=\"x y\"\r\nabc\r\n0;last\r\n\r\n", "helloabc", true},
		{"leading zeros", "0005\r\nhello\r\n000\r\n\r\n", "hello", true},
		{"trailer", "5\r\nhello\r\n0\r\nX-Usage: 5\r\nX-B: c\r\n\r\n", "hello", true},
		{"unfinished", "5\r\nhello\r\n3\r\nab", "helloab", false},
		{"no terminator yet", "5\r\nhello\r\n0\r\n", "hello", false},
	} {
		for _, inPlace := range []bool{false, true} {
			got, done, err := decodeChunked([]byte(tc.in), len(tc.in), len(tc.in), inPlace)
			if err != nil || string(got) != tc.want || done != tc.done {
				t.Errorf("%s (in place %v): %q done %v, %v; want %q done %v", tc.name, inPlace, got, done, err, tc.want, tc.done)
			}
		}
	}
	for _, in := range []string{
		"5\r\nhelloX\r\n",                     // data not followed by CRLF
		"5\nhello\r\n",                        // size line ended by a bare LF
		"x\r\n",                               // not hex
		"\r\n",                                // no size
		"-5\r\n",                              // sign
		"5 5\r\n",                             // space inside
		"1000000000000000\r\n",                // 16 hex digits
		"5;\x00\r\n",                          // control byte in an extension
		"5\r\nhello\r\n0\r\nno colon\r\n\r\n", // bad trailer
		"1;" + strings.Repeat("e", maxChunkLine) + "\r\nx\r\n0\r\n\r\n", // line too long
	} {
		for _, inPlace := range []bool{false, true} {
			_, _, err := decodeChunked([]byte(in), len(in), len(in), inPlace)
			var pe *ProtocolError
			if !errors.As(err, &pe) {
				t.Errorf("%q (in place %v): %v, want a ProtocolError", in, inPlace, err)
			}
		}
	}
}

// A passed header is written but for the fields Skip names and those the request's own
// Header sets; its fields are checked as the request's own are.
func TestAppendHeadPassesHeader(t *testing.T) {
	req := &Request{Method: "POST", Path: "/v1/chat/completions",
		Header: http.Header{"Accept": {"text/event-stream"}, "X-Request-Id": {"req_1"}},
		Pass: http.Header{"Accept": {"*/*"}, "X-Request-Id": {"client's"}, "Traceparent": {"00-abc-def-01"},
			"Authorization": {"Bearer client"}, "Connection": {"keep-alive"}, "X-Tenant": {"a", "b"}},
		Skip: map[string]bool{"Authorization": true, "Connection": true}, Body: []byte("{}")}
	b, err := appendHead(nil, req, "engine:8000")
	if err != nil {
		t.Fatal(err)
	}
	head := string(b)
	for _, want := range []string{"Accept: text/event-stream\r\n", "X-Request-Id: req_1\r\n", "Traceparent: 00-abc-def-01\r\n",
		"X-Tenant: a\r\nX-Tenant: b\r\n", "Content-Length: 2\r\n"} {
		if !strings.Contains(head, want) {
			t.Errorf("head lacks %q:\n%s", want, head)
		}
	}
	for _, not := range []string{"*/*", "client's", "Authorization", "keep-alive"} {
		if strings.Contains(head, not) {
			t.Errorf("head has %q:\n%s", not, head)
		}
	}
	req.Pass["Transfer-Encoding"] = []string{"chunked"}
	if _, err := appendHead(nil, req, "engine:8000"); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("a passed framing header not skipped: %v, want ErrInvalidRequest", err)
	}
	delete(req.Pass, "Transfer-Encoding")
	req.Pass["X-Bad"] = []string{"a\r\nInjected: 1"}
	if _, err := appendHead(nil, req, "engine:8000"); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("a passed value with CRLF: %v, want ErrInvalidRequest", err)
	}
}
