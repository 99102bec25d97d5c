package h1server

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// A handler's panic closes its connection without an answer, so the client sees an
// error rather than a response that looks whole; the server goes on serving other
// connections. The panic is logged, except http.ErrAbortHandler, the panic a handler
// uses to abort on purpose (net/http does not log it either).
func TestHandlerPanic(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/abort":
			io.WriteString(w, "half an answer")
			panic(http.ErrAbortHandler)
		case "/boom":
			panic("boom")
		}
		io.WriteString(w, "ok")
	}))
	client := newClient(t)
	ok := func() {
		t.Helper()
		if resp, body, _ := do(t, client, newRequest(t, "GET", ts.url("/ok"), nil)); resp.StatusCode != 200 || body != "ok" {
			t.Errorf("after a panic, a request got %d %q", resp.StatusCode, body)
		}
	}
	ok()
	for _, path := range []string{"/abort", "/boom"} {
		// A fresh client: net/http's Transport does not retry a request on a connection
		// that never answered, but it would on one it had used.
		panicClient := newClient(t)
		if resp, err := panicClient.Get(ts.url(path)); err == nil {
			resp.Body.Close()
			t.Errorf("GET %s: got %s, want an error", path, resp.Status)
		}
		// The log is written before the connection closes, so it is complete by now.
		logged := ts.log.String()
		switch path {
		case "/abort":
			if logged != "" {
				t.Errorf("http.ErrAbortHandler was logged: %s", logged)
			}
		case "/boom":
			if !strings.Contains(logged, "boom") || !strings.Contains(logged, "panic") {
				t.Errorf("the panic was not logged; log: %q", logged)
			}
		}
		ok()
	}
}
