package h1server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
)

// A client that pipelines its last request and then shuts its side down (FIN) has not
// left: the request running when the FIN comes keeps its context, as with net/http (whose
// background read stops at the pipelined request's first byte and never sees the FIN).
// The last request, with nothing but the FIN behind it, is cancelled, as net/http's
// background read then reads EOF. Both are answered.
func TestPipelinedRequestThenFIN(t *testing.T) {
	skipWithoutWatcher(t)
	for _, oneWrite := range []bool{false, true} {
		name := map[bool]string{false: "second_sent_while_first_runs", true: "both_in_one_write"}[oneWrite]
		t.Run(name, func(t *testing.T) {
			started := make(chan string, 2)
			ctxErrs := make(chan error, 2)
			finSeen := make(chan struct{})
			ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				started <- r.URL.Path
				if r.URL.Path == "/first" {
					<-finSeen // the hangup watcher has handled the FIN; the test waits on it
				}
				ctxErrs <- r.Context().Err()
				io.WriteString(w, r.URL.Path)
			}))
			c := dialRaw(t, ts.addr)
			watched := watchPeerClosed(t, c.LocalAddr().String())
			if oneWrite {
				c.send(get("/first") + get("/second"))
			} else {
				c.send(get("/first"))
				recv(t, started, "the first handler")
				c.send(get("/second"))
			}
			c.CloseWrite()
			recv(t, watched, "the hangup watcher to see the FIN")
			close(finSeen)
			if err := recv(t, ctxErrs, "the first handler's context"); err != nil {
				t.Errorf("the first request's context ended (%v) at the FIN behind a pipelined request", err)
			}
			if err := recv(t, ctxErrs, "the second handler's context"); !errors.Is(err, context.Canceled) {
				t.Errorf("the last request's context: %v, want context.Canceled (the client sent its FIN)", err)
			}
			for _, want := range []string{"/first", "/second"} {
				if _, body := c.response("GET"); body != want {
					t.Errorf("got %q, want %q", body, want)
				}
			}
			c.expectClosed()
		})
	}
}
