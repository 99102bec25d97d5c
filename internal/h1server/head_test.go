package h1server

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
)

// Heads shaped as clients send them: the OpenAI Python SDK's fields (canonical names,
// seventeen fields), the Anthropic Node SDK's (lower-case names, which net/http
// canonicalizes), curl's, Go's client's, and this gateway's own request to an agent.
var (
	pythonSDKHead = "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAccept-Encoding: gzip, deflate\r\n" +
		"Connection: keep-alive\r\nAccept: application/json\r\nContent-Type: application/json\r\n" +
		"User-Agent: OpenAI/Python 1.99.0\r\nX-Stainless-Lang: python\r\nX-Stainless-Package-Version: 1.99.0\r\n" +
		"X-Stainless-Os: Linux\r\nX-Stainless-Arch: x64\r\nX-Stainless-Runtime: CPython\r\n" +
		"X-Stainless-Runtime-Version: 3.11.7\r\nAuthorization: Bearer sk-test\r\nX-Stainless-Async: false\r\n" +
		"X-Stainless-Retry-Count: 0\r\nX-Stainless-Read-Timeout: 600\r\nContent-Length: 11\r\n\r\n{\"a\":\"b c\"}"
	nodeSDKHead = "POST /v1/messages?beta=true HTTP/1.1\r\nhost: localhost:8080\r\nconnection: keep-alive\r\n" +
		"accept: application/json\r\nanthropic-version: 2023-06-01\r\ncontent-type: application/json\r\n" +
		"user-agent: Anthropic/JS 0.60.0\r\nx-api-key: k\r\nx-stainless-retry-count: 0\r\n" +
		"accept-language: *\r\nsec-fetch-mode: cors\r\naccept-encoding: gzip, deflate\r\ncontent-length: 2\r\n\r\n{}"
	curlHead = "GET /v1/models HTTP/1.1\r\nHost: localhost:8080\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n"
	goHead   = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:9\r\nUser-Agent: Go-http-client/1.1\r\nContent-Length: 3\r\nContent-Type: application/json\r\nAccept-Encoding: gzip\r\n\r\n{}\n"
	// The gateway's request to an agent, as it writes it (captured), with its lease.
	gatewayHead = "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:19697\r\nContent-Type: application/json\r\n" +
		"Accept: text/event-stream\r\nX-Request-Id: req_01M98PHP57AHVH42DJTT2X0ZBZ\r\n" +
		"X-Fencegate-Attempt: req_01M98PHP57AHVH42DJTT2X0ZBZ.a1\r\nX-Fencegate-Lease: epoch=7;ttl_ms=30000\r\n" +
		"User-Agent: curl/7.88.1\r\nX-Stainless-Lang: python\r\nContent-Length: 94\r\n\r\n" +
		`{"model":"sim-model","stream":true,"messages":[{"role":"user","content":"hi"}],"max_tokens":4}`
)

func reader(s string) *bufio.Reader {
	return bufio.NewReaderSize(strings.NewReader(s), readBufferSize)
}

// readWhole reads a request's body to its end and what is left behind it.
func readWhole(t *testing.T, req *http.Request, br *bufio.Reader) (body []byte, bodyErr error, rest []byte) {
	t.Helper()
	body, bodyErr = io.ReadAll(req.Body)
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	return body, bodyErr, rest
}

// sameRequest fails t unless fast, read by readHeadFast from in, is what http.ReadRequest
// reads from the same bytes: every field a handler or the server looks at, the body and
// the bytes after it.
func sameRequest(t *testing.T, in string, fast *http.Request, fastBR *bufio.Reader) {
	t.Helper()
	refBR := reader(in)
	ref, err := http.ReadRequest(refBR)
	if err != nil {
		t.Fatalf("readHeadFast took a head http.ReadRequest refuses (%v):\n%q", err, in)
	}
	type view struct {
		Method, RequestURI, Proto, Host string
		ProtoMajor, ProtoMinor          int
		URL                             url.URL
		Header                          http.Header
		ContentLength                   int64
		Close                           bool
		TransferEncoding                []string
		Trailer                         http.Header
		NoBody                          bool
	}
	see := func(r *http.Request) view {
		return view{r.Method, r.RequestURI, r.Proto, r.Host, r.ProtoMajor, r.ProtoMinor, *r.URL, r.Header,
			r.ContentLength, r.Close, r.TransferEncoding, r.Trailer, r.Body == http.NoBody}
	}
	if got, want := see(fast), see(ref); !reflect.DeepEqual(got, want) {
		t.Fatalf("head %q\nreadHeadFast: %+v\nReadRequest:  %+v", in, got, want)
	}
	gotBody, gotErr, gotRest := readWhole(t, fast, fastBR)
	wantBody, wantErr, wantRest := readWhole(t, ref, refBR)
	if !bytes.Equal(gotBody, wantBody) || !errors.Is(gotErr, wantErr) && gotErr != wantErr || !bytes.Equal(gotRest, wantRest) {
		t.Fatalf("head %q: body %q (%v), then %q; ReadRequest's %q (%v), then %q",
			in, gotBody, gotErr, gotRest, wantBody, wantErr, wantRest)
	}
}

// FuzzReadHeadFastMatchesReadRequest: whatever the bytes, a head readHeadFast takes is
// read as http.ReadRequest reads it, and one it declines is left untouched for it.
func FuzzReadHeadFastMatchesReadRequest(f *testing.F) {
	for _, seed := range []string{
		pythonSDKHead, nodeSDKHead, curlHead, goHead, gatewayHead,
		goHead + curlHead, // pipelined
		"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET /a%20b/c?x=1&y=%zz HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET /p HTTP/1.1\r\nHost: a\r\nX-A: 1\r\nX-A: 2\r\nx-a: 3\r\n\r\n",
		"GET /p HTTP/1.1\r\nHost: a\r\nX-Sp:   padded \t \r\nX-Empty:\r\n\r\n",
		"POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 010\r\n\r\n0123456789rest",
		"POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nshort",
		"POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n",
		"GET /c HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Close\r\n\r\n",
		"GET /u HTTP/1.1\r\nHost: a\r\nX-Utf8: caf\xc3\xa9 \xff\r\n\r\n",
		"POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
		"GET /p HTTP/1.0\r\nHost: a\r\n\r\n",
		"GET /p HTTP/1.1\nHost: a\n\n",
		"GET /p HTTP/1.1\r\nHost: a\r\nX-Fold: a\r\n b\r\n\r\n",
		"GET http://h/p HTTP/1.1\r\nHost: a\r\n\r\n",
		"GET /p HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
		"GET /p HTTP/1.1\r\nHost: a\r\nPragma: no-cache\r\n\r\n",
		"GET /p HTTP/1.1\r\nHost: a b\r\n\r\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		s := string(in)
		br := reader(s)
		req := readHeadFast(br)
		if req != nil {
			sameRequest(t, s, req, br)
			return
		}
		// Declined: the reader still holds every byte.
		rest, err := io.ReadAll(br)
		if err != nil || string(rest) != s {
			t.Fatalf("declined %q but consumed some of it: left %q", s, rest)
		}
	})
}

// TestReadHeadFastTakesCommonHeads: the heads real clients send are read here, not left
// to net/http — or the fast path would be a test that cannot fail and a saving never made.
func TestReadHeadFastTakesCommonHeads(t *testing.T) {
	for name, in := range map[string]string{
		"python SDK": pythonSDKHead, "node SDK": nodeSDKHead, "curl": curlHead, "go": goHead, "gateway": gatewayHead,
	} {
		br := reader(in)
		req := readHeadFast(br)
		if req == nil {
			t.Errorf("%s: head declined:\n%s", name, in)
			continue
		}
		sameRequest(t, in, req, br)
	}
}

// TestReadHeadFastDeclines: each shape net/http reads in its own way, refuses, or has a
// rule of its own for is left to it, untouched.
func TestReadHeadFastDeclines(t *testing.T) {
	for name, in := range map[string]string{
		"chunked body":          "POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"two lengths":           "POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
		"bad length":            "POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n",
		"empty length":          "POST /p HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n",
		"HTTP/1.0":              "GET /p HTTP/1.0\r\nHost: a\r\n\r\n",
		"HTTP/2 preface":        "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
		"bare line feeds":       "GET /p HTTP/1.1\nHost: a\n\n",
		"bare carriage return":  "GET /p HTTP/1.1\r\nHost: a\rX: b\r\n\r\n",
		"folded field":          "GET /p HTTP/1.1\r\nHost: a\r\nX-Fold: a\r\n b\r\n\r\n",
		"leading space":         "GET /p HTTP/1.1\r\n Host: a\r\n\r\n",
		"space before colon":    "GET /p HTTP/1.1\r\nHost : a\r\n\r\n",
		"no colon":              "GET /p HTTP/1.1\r\nHost: a\r\nnocolon\r\n\r\n",
		"control in value":      "GET /p HTTP/1.1\r\nHost: a\r\nX: a\x00b\r\n\r\n",
		"no host":               "GET /p HTTP/1.1\r\nX: a\r\n\r\n",
		"two hosts":             "GET /p HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
		"absolute form":         "GET http://h/p HTTP/1.1\r\nHost: a\r\n\r\n",
		"asterisk":              "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
		"connect":               "CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n",
		"extension method":      "PROPFIND /p HTTP/1.1\r\nHost: a\r\n\r\n",
		"pragma":                "GET /p HTTP/1.1\r\nHost: a\r\nPragma: no-cache\r\n\r\n",
		"trailer":               "GET /p HTTP/1.1\r\nHost: a\r\nTrailer: X\r\n\r\n",
		"head not yet complete": "GET /p HTTP/1.1\r\nHost: a\r\n",
		"empty":                 "",
		"head past the buffer":  "GET /p HTTP/1.1\r\nHost: a\r\nX-Big: " + strings.Repeat("b", readBufferSize) + "\r\n\r\n",
		"too many fields":       "GET /p HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("X: y\r\n", maxFastFields) + "\r\n",
	} {
		br := reader(in)
		if req := readHeadFast(br); req != nil {
			t.Errorf("%s: taken, want it left to net/http: %q", name, in)
			continue
		}
		if rest, _ := io.ReadAll(br); string(rest) != in {
			t.Errorf("%s: declined but consumed: left %q of %q", name, rest, in)
		}
	}
}

func TestLengthBodyEndsAsNetHTTPs(t *testing.T) {
	b := &lengthBody{limitedReader{r: strings.NewReader("abcdef"), n: 4}}
	p := make([]byte, 8)
	if n, err := b.Read(p); n != 4 || err != io.EOF {
		t.Fatalf("whole body: %d, %v; want 4 bytes with io.EOF", n, err)
	}
	if n, err := b.Read(p); n != 0 || err != io.EOF {
		t.Fatalf("after the end: %d, %v", n, err)
	}
	b = &lengthBody{limitedReader{r: strings.NewReader("ab"), n: 4}}
	got, err := io.ReadAll(b)
	if string(got) != "ab" || err != io.ErrUnexpectedEOF {
		t.Fatalf("cut short: %q, %v; want \"ab\" and io.ErrUnexpectedEOF", got, err)
	}
}

// BenchmarkReadHead: the fast path against http.ReadRequest, on the heads above.
func BenchmarkReadHead(b *testing.B) {
	for _, c := range []struct{ name, head string }{{"go-5-fields", goHead}, {"python-sdk-17-fields", pythonSDKHead}} {
		src := strings.NewReader("")
		br := bufio.NewReaderSize(src, readBufferSize)
		b.Run(c.name+"/fast", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				src.Reset(c.head)
				br.Reset(src)
				if readHeadFast(br) == nil {
					b.Fatal("declined")
				}
			}
		})
		b.Run(c.name+"/net-http", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				src.Reset(c.head)
				br.Reset(src)
				if _, err := http.ReadRequest(br); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
