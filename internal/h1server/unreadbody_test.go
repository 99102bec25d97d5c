package h1server

import (
	"bytes"
	"io"
	"net/http"
	"testing"
)

// ignoreBody answers without reading the request's body.
var ignoreBody = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	io.WriteString(w, "ignored")
})

// A small body the handler left is read and dropped after it returns, so the connection
// stays in step and carries the next request (net/http drops up to 256 KiB).
func TestSmallUnreadBodyKeepsConnection(t *testing.T) {
	ts := startServer(t, ignoreBody)
	client := newClient(t)
	for i, body := range [][]byte{payload(1 << 10), payload(100 << 10)} {
		resp, got, reused := do(t, client, newRequest(t, "POST", ts.url("/"), bytes.NewReader(body)))
		if got != "ignored" || resp.Close {
			t.Errorf("POST of %d bytes: body %q, Connection: close %v", len(body), got, resp.Close)
		}
		if reused != (i > 0) {
			t.Errorf("POST of %d bytes: connection reused %v", len(body), reused)
		}
	}
	if _, _, reused := do(t, client, newRequest(t, "GET", ts.url("/"), nil)); !reused {
		t.Error("the GET after the POSTs went over a new connection")
	}
}

// A large body the handler left is not read through: the response says
// 'Connection: close' and the connection closes after it.
func TestLargeUnreadBodyClosesConnection(t *testing.T) {
	ts := startServer(t, ignoreBody)
	client := newClient(t)
	resp, got, _ := do(t, client, newRequest(t, "POST", ts.url("/"), bytes.NewReader(payload(2<<20))))
	if got != "ignored" {
		t.Errorf("body %q", got)
	}
	if !resp.Close { // the client takes 'Connection: close' out of the header into Close
		t.Error("the response does not say 'Connection: close'")
	}
	if _, _, reused := do(t, client, newRequest(t, "GET", ts.url("/"), nil)); reused {
		t.Error("the connection was kept after a body too long to drop")
	}
}

// endless is a request body longer than the socket buffers on both ends can hold.
type endless struct{}

func (endless) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// A client still sending a long body the handler refused gets the answer, not a reset:
// the server stops sending and waits before it closes, as net/http does (closing with the
// client's bytes unread resets the connection, and a client that sees the reset while
// writing may never read the answer).
func TestRefusedUploadGetsAnswer(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "too large", http.StatusRequestEntityTooLarge)
	}))
	client := newClient(t)
	for range 3 {
		req := newRequest(t, "PUT", ts.url("/"), io.LimitReader(endless{}, 1<<30))
		req.ContentLength = 1 << 30
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("the client got %v instead of the answer", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !resp.Close {
			t.Errorf("got %d, Connection: close %v", resp.StatusCode, resp.Close)
		}
	}
}
