package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/openai"
	"github.com/tidwall/gjson"
)

// scriptEngine is a test engine whose handler the test writes, for the cases
// the simulator cannot stage: holding a response until the test releases it,
// or recording exactly what arrived.
type scriptEngine struct {
	srv *httptest.Server

	mu       sync.Mutex
	requests []*capturedRequest
	arrived  chan *capturedRequest // every data request, as it arrives
	aborts   chan string           // rids of POST /abort_request

	// holdAborts, when set, keeps /abort_request from answering until it is
	// closed.
	holdAborts chan struct{}
}

type capturedRequest struct {
	header http.Header
	body   []byte
	gone   chan struct{} // closed when the agent closed the connection
}

func startScriptEngine(t *testing.T, serve func(w http.ResponseWriter, r *http.Request, c *capturedRequest), holdAborts chan struct{}) *scriptEngine {
	t.Helper()
	e := &scriptEngine{arrived: make(chan *capturedRequest, 16), aborts: make(chan string, 16), holdAborts: holdAborts}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /abort_request", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			RID string `json:"rid"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		e.aborts <- body.RID
		if e.holdAborts != nil {
			select {
			case <-e.holdAborts:
			case <-r.Context().Done():
			}
		}
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "sglang:num_running_reqs{model_name=\"m\"} 1\nsglang:num_queue_reqs{model_name=\"m\"} 3\nsglang:token_usage{model_name=\"m\"} 0.25\n")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		c := &capturedRequest{header: r.Header.Clone(), body: body, gone: make(chan struct{})}
		e.mu.Lock()
		e.requests = append(e.requests, c)
		e.mu.Unlock()
		e.arrived <- c
		stop := context.AfterFunc(r.Context(), func() { close(c.gone) })
		defer stop()
		serve(w, r, c)
	})
	e.srv = httptest.NewServer(mux)
	t.Cleanup(e.srv.Close)
	return e
}

func (e *scriptEngine) next(t *testing.T) *capturedRequest {
	t.Helper()
	select {
	case c := <-e.arrived:
		return c
	case <-testContext(t).Done():
		t.Fatal("no request reached the engine")
		return nil
	}
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-testContext(t).Done():
		t.Fatalf("timed out waiting for %s", what)
	}
}

// A non-stream answer is held until the engine has finished; if the lease
// was lost meanwhile, it is never written.
func TestNonStreamAnswerNotWrittenAfterLeaseLost(t *testing.T) {
	release := make(chan struct{})
	engine := startScriptEngine(t, func(w http.ResponseWriter, r *http.Request, c *capturedRequest) {
		<-release
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"choices":[{"message":{"content":"too late"}}]}`)
	}, nil)
	clock := newFakeClock()
	a := startAgent(t, Config{Engine: engine.srv.URL, Now: clock.Now})
	// A lease long in real time, so the expiry timer stays out of the way:
	// only the check before writing can stop this answer.
	l := &leased{attempt: "req_whole.a1", epoch: 2, ttl: 5 * time.Minute}
	type result struct {
		resp *http.Response
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := post(t, testContext(t), newHTTPClient(t), a.URL(), "/v1/chat/completions", []byte(`{"stream":false}`), l)
		done <- result{resp, err}
	}()
	engine.next(t)
	clock.Advance(l.ttl) // expiry reached exactly: no longer valid
	close(release)
	r := <-done
	if r.err == nil {
		body, _ := io.ReadAll(r.resp.Body)
		r.resp.Body.Close()
		t.Fatalf("an answer was delivered after the lease expired: status %d body %s", r.resp.StatusCode, body)
	}
	info := waitEnded(t, a, l.attempt)
	if info.EndReason != EndLeaseExpired || info.EventsForwarded != 0 || info.BytesForwarded != 0 {
		t.Fatalf("attempt info %+v", info)
	}
}

// Events are checked one by one: once the lease is lost, the next event is
// not forwarded, the engine connection is closed, and the stream breaks.
func TestEventAfterLeaseLostNotForwarded(t *testing.T) {
	second := make(chan struct{})
	engine := startScriptEngine(t, func(w http.ResponseWriter, r *http.Request, c *capturedRequest) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"one\"}}]}\n\n")
		_ = rc.Flush()
		<-second
		for range 10 {
			_, _ = io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"more\"}}]}\n\n")
			_ = rc.Flush()
		}
		<-c.gone // it ends only when the agent leaves
	}, nil)
	clock := newFakeClock()
	a := startAgent(t, Config{Engine: engine.srv.URL, Now: clock.Now})
	l := &leased{attempt: "req_events.a1", epoch: 8, ttl: 5 * time.Minute}
	resp, err := post(t, testContext(t), newHTTPClient(t), a.URL(), "/v1/chat/completions", []byte(`{"stream":true}`), l)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	c := engine.next(t)
	read := readStream(resp.Body, func(n int) {
		if n == 1 {
			clock.Advance(l.ttl + time.Millisecond)
			close(second)
		}
	})
	if len(read.events) != 1 || read.err == nil || read.done {
		t.Fatalf("client got %d events (err %v); want only the one sent under the lease, then a break", len(read.events), read.err)
	}
	waitClosed(t, c.gone, "the agent to close the engine connection")
	if info := waitEnded(t, a, l.attempt); info.EndReason != EndLeaseExpired || info.EventsForwarded != 1 {
		t.Fatalf("attempt info %+v", info)
	}
}

// The engine gets the request without the lease headers (it knows nothing of
// leases), with the attempt id and everything else the client sent.
func TestEngineRequestHeaders(t *testing.T) {
	engine := startScriptEngine(t, func(w http.ResponseWriter, r *http.Request, c *capturedRequest) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Engine", "yes")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}, nil)
	a := startAgent(t, Config{Engine: engine.srv.URL})
	req, _ := http.NewRequestWithContext(testContext(t), http.MethodPost, a.URL()+"/v1/completions?trace=1", nil)
	SetLeaseHeaders(req.Header, "req_hdr.a3", 12, time.Second, "gw-7")
	req.Header.Set("Authorization", "Bearer engine-key")
	req.Header.Set("X-Request-Id", "req_hdr")
	resp, err := newHTTPClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != `{"ok":true}` || resp.Header.Get("X-Engine") != "yes" {
		t.Fatalf("status %d body %s headers %v", resp.StatusCode, body, resp.Header)
	}
	h := engine.next(t).header
	if h.Get(HeaderAttempt) != "req_hdr.a3" || h.Get(HeaderLease) != "" || h.Get(HeaderGateway) != "" ||
		h.Get("Authorization") != "Bearer engine-key" || h.Get("X-Request-Id") != "req_hdr" {
		t.Fatalf("engine saw headers %v", h)
	}
}

// With --engine-kind sglang the attempt id goes into the body as rid, and an
// abort also calls /abort_request with it.
func TestSGLangRIDAndAbortRequest(t *testing.T) {
	engine := startScriptEngine(t, func(w http.ResponseWriter, r *http.Request, c *capturedRequest) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n")
		_ = http.NewResponseController(w).Flush()
		<-c.gone
	}, nil)
	a := startAgent(t, Config{Engine: engine.srv.URL, EngineKind: KindSGLang})
	l := &leased{attempt: "req_sg.a1", epoch: 5, ttl: 5 * time.Minute}
	resp, err := post(t, testContext(t), newHTTPClient(t), a.URL(), "/v1/chat/completions",
		[]byte(`{"model":"m","stream":true,"messages":[]}`), l)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	c := engine.next(t)
	if rid := gjson.GetBytes(c.body, "rid").String(); rid != l.attempt || gjson.GetBytes(c.body, "model").String() != "m" {
		t.Fatalf("engine got body %s", c.body)
	}
	if _, err := controlClient(t, a, "").Cancel(testContext(t), l.attempt, l.epoch); err != nil {
		t.Fatal(err)
	}
	// The ack comes after the abort call: the rid is already there.
	select {
	case rid := <-engine.aborts:
		if rid != l.attempt {
			t.Fatalf("abort_request rid %q", rid)
		}
	default:
		t.Fatal("no /abort_request before the cancel ack")
	}
	waitClosed(t, c.gone, "the engine connection to close")

	a.scrapeOnce(testContext(t))
	load, _ := a.engineState()
	if load.Running != 1 || load.Waiting != 3 || load.KVUsage != 0.25 {
		t.Fatalf("SGLang load %+v", load)
	}
}

// If the engine request has not ended within the cancel wait, the cancel
// gets 504, never an ack. Here the SGLang abort call hangs, holding the end.
func TestCancelTimesOutWithoutAck(t *testing.T) {
	unblock := make(chan struct{})
	var once sync.Once
	engine := startScriptEngine(t, func(w http.ResponseWriter, r *http.Request, c *capturedRequest) {
		w.Header().Set("Content-Type", "text/event-stream")
		_ = http.NewResponseController(w).Flush()
		<-c.gone
	}, unblock)
	a := startAgent(t, Config{Engine: engine.srv.URL, EngineKind: KindSGLang, CancelWait: 50 * time.Millisecond})
	t.Cleanup(func() { once.Do(func() { close(unblock) }) })
	l := &leased{attempt: "req_slow.a1", epoch: 5, ttl: 5 * time.Minute}
	resp, err := post(t, testContext(t), newHTTPClient(t), a.URL(), "/v1/chat/completions", []byte(`{"stream":true}`), l)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	engine.next(t)
	_, err = controlClient(t, a, "").Cancel(testContext(t), l.attempt, l.epoch)
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.Status != http.StatusGatewayTimeout || oe.Code != "cancel_timeout" {
		t.Fatalf("cancel: %v, want 504 cancel_timeout", err)
	}
	once.Do(func() { close(unblock) })
	if info := waitEnded(t, a, l.attempt); info.EndReason != EndRevoked {
		t.Fatalf("attempt info %+v", info)
	}
}

func TestEngineUnreachable(t *testing.T) {
	engine := startScriptEngine(t, func(http.ResponseWriter, *http.Request, *capturedRequest) {}, nil)
	url := engine.srv.URL
	engine.srv.Close() // nothing listens there now
	a := startAgent(t, Config{Engine: url})
	resp, err := post(t, testContext(t), newHTTPClient(t), a.URL(), "/v1/chat/completions", []byte(`{}`), &leased{"req_down.a1", 1, time.Second})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || gjson.GetBytes(body, "error.code").String() != "engine_unreachable" {
		t.Fatalf("status %d body %s", resp.StatusCode, body)
	}
	if info := waitEnded(t, a, "req_down.a1"); info.EndReason != EndEngineError {
		t.Fatalf("attempt info %+v", info)
	}
}
