package agent

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// When the engine's whole answer comes in one read, the agent writes it downstream in one
// write: the head not flushed alone before the events, the last events not flushed apart
// from the response's end.
func TestRelayWritesAnAnswerThatCameWholeInOneWrite(t *testing.T) {
	const events = "data: {\"n\":1}\n\ndata: {\"n\":2}\n\ndata: [DONE]\n\n"
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, events) // not flushed: the head and the body leave in one write
	}))
	t.Cleanup(engine.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	writes := &connWrites{}
	a := startAgent(t, Config{Engine: engine.URL, Listener: writesListener{ln, writes}})

	resp, err := post(t, testContext(t), newHTTPClient(t), a.URL(), "/v1/chat/completions", chatBody(t, 2, true),
		&leased{attempt: "req_1/1", epoch: 1, ttl: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || string(body) != events {
		t.Fatalf("%d %q, %v; want the engine's events", resp.StatusCode, body, err)
	}
	all := writes.all()
	if len(all) != 1 || !bytes.HasPrefix(all[0], []byte("HTTP/1.1 200")) || !bytes.HasSuffix(all[0], []byte("data: [DONE]\n\n")) {
		t.Fatalf("the agent's writes: %q; want the whole response in one", all)
	}
}

// connWrites keeps every write a server made to its clients.
type connWrites struct {
	mu     sync.Mutex
	writes [][]byte
}

func (c *connWrites) all() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writes
}

type writesListener struct {
	net.Listener
	w *connWrites
}

func (l writesListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return writesConn{c, l.w}, nil
}

type writesConn struct {
	net.Conn
	w *connWrites
}

func (c writesConn) Write(b []byte) (int, error) {
	c.w.mu.Lock()
	c.w.writes = append(c.w.writes, bytes.Clone(b))
	c.w.mu.Unlock()
	return c.Conn.Write(b)
}
