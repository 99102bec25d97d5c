package h1server

import (
	"io"
	"net/http"
	"testing"
)

const continueHead = "POST /upload HTTP/1.1\r\nHost: test\r\nExpect: 100-continue\r\nContent-Length: 11\r\n\r\n"

// A client that sends 'Expect: 100-continue' waits for '100 Continue' before it sends the
// body (RFC 9110 §10.1.1); the server sends it when the handler starts reading, and the
// handler gets the body whole.
func TestExpectContinue(t *testing.T) {
	got := make(chan string, 1)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("reading the body: %v", err)
		}
		got <- string(b)
		io.WriteString(w, "stored")
	}))
	c := dialRaw(t, ts.addr)
	c.send(continueHead)
	if resp, _ := c.response("POST"); resp.StatusCode != http.StatusContinue || resp.Proto != "HTTP/1.1" {
		t.Fatalf("got %s %d before sending the body, want HTTP/1.1 100", resp.Proto, resp.StatusCode)
	}
	c.send("hello world")
	if resp, body := c.response("POST"); resp.StatusCode != 200 || body != "stored" {
		t.Errorf("final response %d %q", resp.StatusCode, body)
	}
	if body := recv(t, got, "the handler's body"); body != "hello world" {
		t.Errorf("handler got body %q", body)
	}
	// The body was read whole: the connection carries the next request.
	c.send("POST /upload HTTP/1.1\r\nHost: test\r\nContent-Length: 3\r\n\r\nabc")
	if resp, _ := c.response("POST"); resp.StatusCode != 200 || recv(t, got, "the second body") != "abc" {
		t.Errorf("the next request on the connection got %d", resp.StatusCode)
	}
}

// A handler that answers without reading the body: no '100 Continue' goes out, so the
// client sends no body; the connection cannot tell whether one will come after all, and
// closes after the answer (net/http does the same).
func TestExpectContinueNotRead(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, "no")
	}))
	c := dialRaw(t, ts.addr)
	c.send(continueHead)
	resp, body := c.response("POST")
	if resp.StatusCode != http.StatusUnauthorized || body != "no" {
		t.Fatalf("got %d %q, want the handler's 401 and no 100 Continue before it", resp.StatusCode, body)
	}
	if !resp.Close {
		t.Error("the answer does not say the connection closes")
	}
	c.expectClosed()
}

// An HTTP/1.0 client cannot be sent a 1xx (RFC 9110 §15.2): a 1.0 request with the
// expectation is read as if it had none.
func TestExpectContinueHTTP10(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	}))
	c := dialRaw(t, ts.addr)
	c.send("POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc")
	if resp, body := c.response("POST"); resp.StatusCode != 200 || body != "abc" {
		t.Errorf("got %d %q, want 200 \"abc\" and no 100", resp.StatusCode, body)
	}
}
