package gateway_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/gateway"
)

// The tests here run the whole gateway — HTTP front, failover machine, transport — inside a
// synctest bubble: an in-memory network and a fake clock, so the real default timeouts
// (seconds to minutes) take no time, and durations are asserted exactly.

// pipeNet is an in-memory network: Dial hands the other end of a net.Pipe to Accept.
type pipeNet struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeNet() *pipeNet { return &pipeNet{conns: make(chan net.Conn), closed: make(chan struct{})} }

func (p *pipeNet) Dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case p.conns <- server:
		return client, nil
	case <-p.closed:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *pipeNet) Accept() (net.Conn, error) {
	select {
	case c := <-p.conns:
		return c, nil
	case <-p.closed:
		return nil, net.ErrClosed
	}
}

func (p *pipeNet) Close() error   { p.once.Do(func() { close(p.closed) }); return nil }
func (p *pipeNet) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }

// chunkData is a vLLM-shaped chat chunk with the given delta.
func chunkData(delta string) string {
	return fmt.Sprintf("data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":null}]}\n\n", delta)
}

// fakeClockRun serves one streaming request through a gateway (default policy) in front of
// the scripted engine, in a bubble, and returns what the client received and how long it
// took on the fake clock.
func fakeClockRun(t *testing.T, engine http.HandlerFunc) (body string, took time.Duration) {
	synctest.Test(t, func(t *testing.T) {
		network := newPipeNet()
		srv := &http.Server{Handler: engine}
		go srv.Serve(network)
		cfg := &config.Config{Store: "memory:", Models: []config.Model{{Name: "m", Replicas: []config.Replica{{URL: "http://engine.test"}}}}}
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		gw, err := gateway.New(context.Background(), cfg, gateway.Options{Dial: network.Dial})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions",
			strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		gw.Handler().ServeHTTP(rec, req)
		took = time.Since(start)
		body = rec.Body.String()
		gw.Close()
		srv.Close()
		network.Close()
		synctest.Wait()
	})
	return body, took
}

// With the default policy a stream that goes silent after its second token is interrupted
// exactly idle_timeout (30 s) after the last token: never earlier, never rerun.
func TestFakeClockIdleTimeout(t *testing.T) {
	body, took := fakeClockRun(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, d := range []string{`{"role":"assistant","content":""}`, `{"content":"a"}`, `{"content":"b"}`} {
			fmt.Fprint(w, chunkData(d))
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done() // alive, silent
	})
	if took != config.DefaultIdleTimeout {
		t.Fatalf("interrupted after %v, want exactly %v", took, config.DefaultIdleTimeout)
	}
	if strings.Count(body, `"content":"`) != 3 || !strings.Contains(body, `"code":"upstream_decode_interrupted"`) ||
		!strings.Contains(body, `"delivered_output_tokens":2`) || strings.Contains(body, "[DONE]") {
		t.Fatalf("body %q", body)
	}
}

// A first token that takes 40 s is not a failure: keepalive comments go out at 15 s and 30 s
// (they are not output), and the answer completes on the one replica at 40 s.
func TestFakeClockSlowFirstTokenKeepsAlive(t *testing.T) {
	body, took := fakeClockRun(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.(http.Flusher).Flush()
		time.Sleep(40 * time.Second) // a long queue and prefill
		fmt.Fprint(w, chunkData(`{"role":"assistant","content":""}`)+chunkData(`{"content":"late"}`))
		fmt.Fprint(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	})
	if took != 40*time.Second {
		t.Fatalf("completed after %v, want 40s", took)
	}
	if !strings.HasPrefix(body, ": keepalive\n\n: keepalive\n\ndata: ") || strings.Count(body, ": keepalive") != 2 ||
		!strings.HasSuffix(body, "data: [DONE]\n\n") || !strings.Contains(body, `"content":"late"`) {
		t.Fatalf("body %q", body)
	}
}

// No first token at all: after first_token_timeout (120 s) the attempt is uncertain; in
// direct mode it is not rerun, and since keepalives already sent the headers, the client
// gets a final error event saying nothing was delivered.
func TestFakeClockNoFirstToken(t *testing.T) {
	body, took := fakeClockRun(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	if took != config.DefaultFirstTokenTimeout {
		t.Fatalf("ended after %v, want exactly %v", took, config.DefaultFirstTokenTimeout)
	}
	if strings.Count(body, ": keepalive") != 7 || !strings.Contains(body, `"code":"upstream_unresponsive"`) ||
		!strings.Contains(body, `"partial_output":false`) || !strings.Contains(body, `"retryable":true`) {
		t.Fatalf("body %q", body)
	}
}
