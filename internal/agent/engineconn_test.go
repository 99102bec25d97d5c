package agent

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Fenced data requests share kept-alive engine connections, and aborting one
// closes its own connection, at once, and no other: the engine sees that
// request abandoned while a request on another connection runs to its end,
// after which its connection serves the next request.
func TestEngineConnectionsKeptAliveAbortClosesOnlyItsOwn(t *testing.T) {
	type seen struct {
		remote string
		gone   chan struct{} // closed when the engine request's context ended
	}
	var (
		mu       sync.Mutex
		requests = map[string]seen{}
	)
	arrived := make(chan string, 8)
	releaseD := make(chan struct{})
	closedConns := make(chan string, 64)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		id := r.Header.Get(HeaderAttempt)
		s := seen{remote: r.RemoteAddr, gone: make(chan struct{})}
		mu.Lock()
		requests[id] = s
		mu.Unlock()
		stop := context.AfterFunc(r.Context(), func() { close(s.gone) })
		defer stop()
		arrived <- id
		if !strings.HasPrefix(id, "hold") {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"ok":true}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"n\":1}\n\n")
		_ = http.NewResponseController(w).Flush()
		if id != "hold-d" {
			<-r.Context().Done()
			return
		}
		select {
		case <-releaseD:
			_, _ = io.WriteString(w, "data: [DONE]\n\n")
		case <-r.Context().Done():
		}
	}))
	srv.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			closedConns <- c.RemoteAddr().String()
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	get := func(id string) seen {
		mu.Lock()
		defer mu.Unlock()
		return requests[id]
	}
	waitArrived := func(want string) {
		t.Helper()
		select {
		case id := <-arrived:
			if id != want {
				t.Fatalf("engine got %q, want %q", id, want)
			}
		case <-testContext(t).Done():
			t.Fatalf("%s never reached the engine", want)
		}
	}

	clock := newFakeClock() // frozen: no lease expires
	a := startAgent(t, Config{Engine: srv.URL, EngineKind: KindVLLM, Now: clock.Now})
	hc := newHTTPClient(t)
	whole := func(id string) {
		t.Helper()
		resp, err := post(t, testContext(t), hc, a.URL(), "/v1/completions", []byte(`{}`), &leased{id, 1, 5 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || string(body) != `{"ok":true}` {
			t.Fatalf("%s: status %d body %s err %v", id, resp.StatusCode, body, err)
		}
		waitArrived(id)
		if info := waitEnded(t, a, id); info.EndReason != EndFinished {
			t.Fatalf("%s: attempt info %+v", id, info)
		}
	}
	openStream := func(id string) *bufio.Reader {
		t.Helper()
		resp, err := post(t, testContext(t), hc, a.URL(), "/v1/completions", []byte(`{"stream":true}`), &leased{id, 1, 5 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		br := bufio.NewReader(resp.Body)
		if line, err := br.ReadString('\n'); err != nil || line != "data: {\"n\":1}\n" {
			t.Fatalf("%s: first line %q, %v", id, line, err)
		}
		waitArrived(id)
		return br
	}

	whole("a")
	whole("b")
	if get("a").remote != get("b").remote {
		t.Fatalf("second request on a new engine connection (%s, then %s): not kept alive", get("a").remote, get("b").remote)
	}
	openStream("hold-c") // takes the idle connection
	streamD := openStream("hold-d")
	c, d := get("hold-c"), get("hold-d")
	if c.remote != get("a").remote || d.remote == c.remote {
		t.Fatalf("connections: a %s, hold-c %s, hold-d %s", get("a").remote, c.remote, d.remote)
	}

	if _, err := controlClient(t, a, "").Cancel(testContext(t), "hold-c", 1); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	waitClosed(t, c.gone, "the engine to see hold-c abandoned")
	for closed := false; !closed; {
		select {
		case addr := <-closedConns:
			if addr == d.remote {
				t.Fatal("aborting hold-c closed hold-d's engine connection")
			}
			closed = addr == c.remote
		case <-testContext(t).Done():
			t.Fatal("hold-c's engine connection was not closed")
		}
	}
	select {
	case <-d.gone:
		t.Fatal("aborting hold-c ended hold-d's engine request")
	default:
	}

	close(releaseD)
	rest, err := io.ReadAll(streamD)
	if err != nil || string(rest) != "\ndata: [DONE]\n\n" {
		t.Fatalf("hold-d after the abort of hold-c: %q, %v", rest, err)
	}
	if info := waitEnded(t, a, "hold-d"); info.EndReason != EndFinished {
		t.Fatalf("hold-d: attempt info %+v", info)
	}
	whole("e")
	if get("e").remote != d.remote {
		t.Fatalf("after hold-d ended, e came on %s, not hold-d's kept connection %s", get("e").remote, d.remote)
	}
}

// A streamed request to a generic engine (llama.cpp's server among them,
// which closes after every streamed answer while offering keep-alive) asks
// for the connection to be closed and is never pooled; a non-stream one is.
func TestGenericEngineStreamsNotPooled(t *testing.T) {
	type seen struct {
		remote string
		close  bool
	}
	got := make(chan seen, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		got <- seen{r.RemoteAddr, r.Close}
		if r.Header.Get(HeaderAttempt) == "s" {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(srv.Close)
	a := startAgent(t, Config{Engine: srv.URL})
	hc := newHTTPClient(t)
	send := func(id, body string) seen {
		t.Helper()
		resp, err := post(t, testContext(t), hc, a.URL(), "/v1/completions", []byte(body), &leased{id, 1, time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d, %v", id, resp.StatusCode, err)
		}
		waitEnded(t, a, id)
		return <-got
	}
	n1 := send("n1", `{}`)
	n2 := send("n2", `{}`)
	s := send("s", `{"stream":true}`)
	n3 := send("n3", `{}`)
	if n1.close || n2.close || n1.remote != n2.remote {
		t.Fatalf("non-stream requests: %+v, %+v: want one kept-alive connection", n1, n2)
	}
	if !s.close || n3.remote == s.remote {
		t.Fatalf("stream %+v, then %+v: want Connection: close and a connection not reused", s, n3)
	}
}
