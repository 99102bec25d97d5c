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
	"github.com/fencegate/fencegate/internal/store"
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
	return fakeClockRunWith(t, nil, engine)
}

// fakeClockRunWith is fakeClockRun with the policy changed by policy.
func fakeClockRunWith(t *testing.T, policy func(*config.Policy), engine http.HandlerFunc) (body string, took time.Duration) {
	synctest.Test(t, func(t *testing.T) {
		network := newPipeNet()
		srv := &http.Server{Handler: engine}
		go srv.Serve(network)
		cfg := &config.Config{Store: "memory:", Models: []config.Model{{Name: "m", Replicas: []config.Replica{{URL: "http://engine.test"}}}}}
		if policy != nil {
			policy(&cfg.Policy)
		}
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

// max_request_duration ends a stream that is still healthy, exactly at the bound, with an
// honest final event.
func TestFakeClockMaxRequestDuration(t *testing.T) {
	body, took := fakeClockRunWith(t, func(p *config.Policy) { p.MaxRequestDuration = config.Duration(time.Minute) },
		func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, chunkData(`{"role":"assistant","content":""}`))
			for {
				fmt.Fprint(w, chunkData(`{"content":"tick"}`))
				w.(http.Flusher).Flush()
				select { // slow but alive: never idle_timeout
				case <-r.Context().Done():
					return
				case <-time.After(10 * time.Second):
				}
			}
		})
	if took != time.Minute {
		t.Fatalf("ended after %v, want exactly 1m", took)
	}
	if strings.Count(body, `"content":"tick"`) != 6 || !strings.Contains(body, `"code":"request_timeout"`) ||
		!strings.Contains(body, `"partial_output":true`) || !strings.Contains(body, `"delivered_output_tokens":6`) || strings.Contains(body, "[DONE]") {
		t.Fatalf("body %q", body)
	}
}

// A client that never reads: the gateway's write blocks, and with the default
// client_write_timeout (30 s) the request ends client_stalled 37.5 s later (the deadline
// is moved lazily, so a stall is detected between 1× and 1.25× the timeout), its upstream
// cancelled; nothing waits for the client any longer.
func TestFakeClockStalledClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		upstream, front := newPipeNet(), newPipeNet()
		engineDone := make(chan time.Time, 1)
		requestID := make(chan string, 1)
		engine := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			requestID <- r.Header.Get("X-Request-Id")
			w.Header().Set("Content-Type", "text/event-stream")
			for r.Context().Err() == nil {
				if _, err := fmt.Fprint(w, chunkData(`{"content":"more and more"}`)); err != nil {
					break
				}
				w.(http.Flusher).Flush()
			}
			engineDone <- time.Now()
		})}
		go engine.Serve(upstream)
		st := store.NewMemory()
		cfg := &config.Config{Store: "memory:", Models: []config.Model{{Name: "m", Replicas: []config.Replica{{URL: "http://engine.test"}}}}}
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		gw, err := gateway.New(context.Background(), cfg, gateway.Options{Dial: upstream.Dial, Store: st})
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: gw.Handler()}
		go srv.Serve(front)
		conn, err := front.Dial(context.Background(), "tcp", "gw")
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
		go fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		// The client never reads a byte.
		ended := <-engineDone
		if took := ended.Sub(start); took != 37500*time.Millisecond {
			t.Fatalf("upstream cancelled after %v, want 37.5s", took)
		}
		// The engine sees the cancel before the request's owner has finished its teardown
		// (its final journal update): let every goroutine of the bubble settle first.
		synctest.Wait()
		conn.Close()
		srv.Close()
		gw.Close() // writes what the journal holds
		rec, err := st.Get(context.Background(), <-requestID)
		if err != nil || rec.Outcome != "client_stalled" || len(rec.Attempts) != 1 || !rec.Attempts[0].CancelSent {
			t.Fatalf("journal %+v %v", rec, err)
		}
		engine.Close()
		upstream.Close()
		front.Close()
		synctest.Wait()
	})
}
