package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/gateway"
	"github.com/fencegate/fencegate/internal/h1server/h1servertest"
	"github.com/fencegate/fencegate/internal/sim"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// endlessEngine streams vLLM-shaped chunks until its client leaves, and reports when that
// happened on gone.
func endlessEngine(t *testing.T) (url string, gone <-chan struct{}) {
	t.Helper()
	ch := make(chan struct{}, 16)
	pad := strings.Repeat("word ", 40)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			return
		case "/v1/models":
			fmt.Fprint(w, `{"object":"list","data":[{"id":"endless","object":"model"}]}`)
			return
		case "/v1/chat/completions":
		default:
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, chunkData(`{"role":"assistant","content":""}`))
		for r.Context().Err() == nil {
			if _, err := fmt.Fprint(w, chunkData(fmt.Sprintf(`{"content":%q}`, pad))); err != nil {
				break
			}
			w.(http.Flusher).Flush()
		}
		ch <- struct{}{}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, ch
}

// stalledClient sends a streaming request over a connection with a small receive buffer,
// reads the response headers and then never reads again, keeping the connection open: a
// client whose application stopped consuming the stream. It returns the request id.
func stalledClient(t *testing.T, gatewayURL, model string, header ...string) (id string, conn net.Conn) {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return serr
	}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(gatewayURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	body := fmt.Sprintf(`{"model":%q,"stream":true,"messages":[{"role":"user","content":"go on forever"}]}`, model)
	extra := ""
	for i := 0; i+1 < len(header); i += 2 {
		extra += header[i] + ": " + header[i+1] + "\r\n"
	}
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s", extra, len(body), body)
	br := bufio.NewReaderSize(conn, 512)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stalled client got %d", resp.StatusCode)
	}
	return resp.Header.Get("X-Request-Id"), conn
}

// A client that stops reading holds nothing: other streams and /readyz go on, and after
// client_write_timeout its upstream is cancelled and the request ends client_stalled.
func TestStalledClientIsCutOffAndHarmsNoOne(t *testing.T) {
	endless, gone := endlessEngine(t)
	s, err := sim.Start(sim.Config{Name: "sim-1", Model: "sim-model"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	cfg := &config.Config{Store: "memory:", Models: []config.Model{
		{Name: "endless", Replicas: []config.Replica{{URL: endless, Name: "endless-1"}}},
		{Name: "sim-model", Replicas: []config.Replica{{URL: s.URL(), Name: "sim-1"}}},
	}}
	cfg.Policy.ClientWriteTimeout = config.Duration(time.Second)
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(context.Background(), cfg, gateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	gw.Start()
	srv := h1servertest.NewServer(gw.Handler())
	admin := h1servertest.NewServer(gw.AdminHandler()) // its /metrics
	t.Cleanup(func() { srv.Close(); admin.Close(); gw.Close() })
	e := &env{t: t, srv: srv, gw: gw, admin: admin}
	e.client = openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("unused"), option.WithMaxRetries(0))

	id, _ := stalledClient(t, srv.URL, "endless", "Idempotency-Key", "stalled-1")
	// While the stalled stream is held, the gateway serves everyone else.
	for i := 0; i < 3; i++ {
		r := e.stream(testCtx(t), chatParams(fmt.Sprintf("still there %d?", i), 8))
		if r.err != nil || r.finish != "length" {
			t.Fatalf("a normal stream beside the stalled one: %+v", r)
		}
		resp, err := http.Get(srv.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/readyz %d beside the stalled stream", resp.StatusCode)
		}
	}
	select {
	case <-gone:
	case <-testCtx(t).Done():
		t.Fatal("the stalled client's upstream was never cancelled")
	}
	rec := e.record(id)
	if rec.Outcome != "client_stalled" || len(rec.Attempts) != 1 || rec.Attempts[0].EndReason != "client_stalled" || !rec.Attempts[0].CancelSent {
		t.Fatalf("journal %+v", rec)
	}
	if m := e.metrics(); !strings.Contains(m, `fencegate_requests_total{api="chat",model="endless",outcome="client_stalled"} 1`) {
		t.Fatalf("metrics lack the stalled request:\n%s", m)
	}
	// A retry with the same key: the request was let go, as if its client had left.
	retry, body := postAPI(t, srv.URL+"/v1/chat/completions", `{"model":"endless","stream":true,"messages":[{"role":"user","content":"go on forever"}]}`,
		"Idempotency-Key", "stalled-1")
	if retry.StatusCode != http.StatusConflict || !strings.Contains(string(body), `"code":"idempotency_key_cancelled"`) {
		t.Fatalf("retry: %d %s", retry.StatusCode, body)
	}
}

// A long poll longer than client_write_timeout still gets its answer: the write deadline
// of GET /v1/requests/{id}?wait= starts after the wait.
func TestLongPollOutlastsTheWriteTimeout(t *testing.T) {
	e := newEnv(t, envOptions{sim: func(i int, c *sim.Config) { c.DecodePerToken = 100 * time.Millisecond },
		config: func(c *config.Config) {
			c.Policy.ClientWriteTimeout = config.Duration(500 * time.Millisecond)
			c.Models[0].Replicas[1].Priority = 1 // sim-1 serves
		}})
	done := make(chan streamResult, 1)
	go func() { done <- e.stream(testCtx(t), chatParams("take your time", 15)) }()
	rec, err := e.sims[0].WaitRecord(testCtx(t), func(r sim.Record) bool { return r.TokensSent > 0 })
	if err != nil {
		t.Fatal(err)
	}
	if got := e.record(rec.RequestID); got.Outcome != "completed" { // waits about 1.5 s
		t.Fatalf("journal %+v", got)
	}
	<-done
}
