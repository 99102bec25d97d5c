package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/sim"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
)

// interruption decodes the final error event a client received.
func interruption(t *testing.T, err error) map[string]any {
	t.Helper()
	ev, ok := errorEvent(err)
	if !ok {
		t.Fatalf("stream error %v (%T) is not an SSE error event", err, err)
	}
	return ev
}

// errorEvent decodes err as the error object of a final SSE error event.
func errorEvent(err error) (map[string]any, bool) {
	var se *ssestream.StreamError
	if !errors.As(err, &se) {
		return nil, false
	}
	var env struct {
		Error map[string]any `json:"error"`
	}
	if json.Unmarshal(se.Event.Data, &env) != nil || env.Error == nil {
		return nil, false
	}
	return env.Error, true
}

// rerunScenario: replica 1 fails at fault before anything was delivered. The client must get
// one complete answer, exactly the one replica 2 gives, and nothing of replica 1.
func rerunScenario(t *testing.T, fault, wantFailure string) {
	e := newEnv(t, envOptions{})
	if err := e.sims[0].ArmFault(fault, 1); err != nil {
		t.Fatal(err)
	}
	p := chatParams("tell me about "+fault, 12)
	r := e.stream(testCtx(t), p)
	if r.err != nil {
		t.Fatalf("stream failed: %v", r.err)
	}
	if want := e.direct(1, p); r.content != want || r.content == "" {
		t.Fatalf("client saw %q, want replica 2's answer %q", r.content, want)
	}
	rec := e.record(r.requestID)
	if rec.Outcome != "completed" || len(rec.Attempts) != 2 || rec.Attempts[0].Replica != "sim-1" ||
		rec.Attempts[1].Replica != "sim-2" || rec.Attempts[0].Failure != wantFailure {
		t.Fatalf("journal %+v", rec)
	}
	if got := e.simRequests(0, r.requestID); len(got) != 1 || got[0].TokensSent != 0 {
		t.Fatalf("replica 1 records %+v", got)
	}
	m := e.metrics()
	for _, want := range []string{
		`fencegate_reruns_total{model="sim-model",reason="` + rec.Attempts[0].EndReason + `"} 1`,
		`fencegate_requests_total{api="chat",model="sim-model",outcome="completed"} 1`,
		`fencegate_attempts_total{end="` + wantFailure + `",model="sim-model",replica="sim-1"} 1`,
		`fencegate_attempts_total{end="completed",model="sim-model",replica="sim-2"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Fatalf("metrics lack %s:\n%s", want, m)
		}
	}
	// Nothing of replica 1's answer reached the client.
	if e.sims[0].Restart() == nil {
		if first := e.direct(0, p); first == r.content {
			t.Fatalf("replica 1 and 2 gave the same text; the test cannot tell them apart")
		}
	}
}

func TestCrashDuringPrefillReruns(t *testing.T) { rerunScenario(t, "crash@prefill", "dead") }

func TestCrashAtComputedTokenBeforeDeliveryReruns(t *testing.T) {
	rerunScenario(t, "crash@computed:0", "dead")
}

func TestEngine500BeforeBoundaryReruns(t *testing.T) { rerunScenario(t, "status:500@accept", "dead") }

func TestEngine429BeforeBoundaryReruns(t *testing.T) {
	rerunScenario(t, "status:429@accept", "overloaded")
}

func TestResetBeforeBoundaryReruns(t *testing.T) { rerunScenario(t, "reset@prefill", "dead") }

// Crash right after the first delta: one final interruption event, no [DONE], no rerun.
func TestCrashAfterFirstDeltaInterrupts(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.armAll("crash@sent:0")
	r := e.stream(testCtx(t), chatParams("interrupt me", 12))
	if r.err == nil {
		t.Fatalf("stream ended without an error after %q", r.content)
	}
	ev := interruption(t, r.err)
	if ev["code"] != "upstream_decode_interrupted" || ev["type"] != "upstream_error" || ev["request_id"] != r.requestID ||
		ev["partial_output"] != true || ev["delivered_output_tokens"] != float64(1) || ev["retryable"] != false {
		t.Fatalf("interruption event %v", ev)
	}
	if e.totalSimRequests() != 1 {
		t.Fatalf("%d upstream requests, want exactly 1 (no rerun after the boundary)", e.totalSimRequests())
	}
	rec := e.record(r.requestID)
	if rec.Outcome != "interrupted" || !rec.FirstDeltaSent || rec.DeliveredOutputTokens != 1 || len(rec.Attempts) != 1 {
		t.Fatalf("journal %+v", rec)
	}
	if string(rec.Error) == "null" {
		t.Fatal("journal lacks the error the client saw")
	}
}

// A replica that hangs after the first delta: interrupted at the idle timeout, never rerun,
// and the hung upstream request is closed (the engine sees the disconnect).
func TestHangAfterFirstDeltaInterruptsAtIdleTimeout(t *testing.T) {
	e := newEnv(t, envOptions{config: func(c *config.Config) {
		c.Policy.IdleTimeout = config.Duration(300 * time.Millisecond)
	}})
	e.armAll("hang@sent:1")
	r := e.stream(testCtx(t), chatParams("hang after two", 12))
	ev := interruption(t, r.err)
	if ev["code"] != "upstream_decode_interrupted" || ev["delivered_output_tokens"] != float64(2) {
		t.Fatalf("interruption event %v", ev)
	}
	if e.totalSimRequests() != 1 {
		t.Fatalf("%d upstream requests, want 1", e.totalSimRequests())
	}
	rec := e.record(r.requestID)
	if rec.Outcome != "interrupted" || rec.Attempts[0].EndReason != "idle_timeout" || rec.Attempts[0].Failure != "uncertain" || !rec.Attempts[0].CancelSent {
		t.Fatalf("journal %+v", rec)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := e.sims[0].WaitRecord(ctx, func(s sim.Record) bool { return s.RequestID == r.requestID && s.Outcome != "" }); err != nil {
		for _, s := range e.sims {
			t.Logf("%s: %+v", s.Name(), s.Records())
		}
		t.Fatalf("the hung upstream request was never closed: %v", err)
	}
}

// Silence before any output in direct mode: not rerun (the attempt cannot be proven
// stopped); the client gets a 504 saying why, marked retryable, and the engine sees its
// request closed. Whether the engine sent its headers first (hang@prefill) or nothing at
// all (hang@accept: the owner waits for the head on the engine's socket, docs/design.md
// §6), the first-token deadline ends the wait.
func TestHangBeforeBoundaryIsNotRerunInDirectMode(t *testing.T) {
	for _, fault := range []string{"hang@prefill", "hang@accept"} {
		t.Run(fault, func(t *testing.T) {
			e := newEnv(t, envOptions{config: func(c *config.Config) {
				c.Policy.FirstTokenTimeout = config.Duration(300 * time.Millisecond)
			}})
			e.armAll(fault)
			r := e.stream(testCtx(t), chatParams("hang before", 12))
			var apiErr *openai.Error
			if !errors.As(r.err, &apiErr) || apiErr.StatusCode != http.StatusGatewayTimeout || apiErr.Code != "upstream_unresponsive" {
				t.Fatalf("error %v", r.err)
			}
			if e.totalSimRequests() != 1 {
				t.Fatalf("%d upstream requests, want 1", e.totalSimRequests())
			}
			ctx, cancel := context.WithTimeout(testCtx(t), 10*time.Second)
			defer cancel()
			for _, s := range e.sims {
				if len(s.Records()) == 0 {
					continue
				}
				if _, err := s.WaitRecord(ctx, func(r sim.Record) bool { return r.Outcome != "" }); err != nil {
					t.Fatalf("%s: the hung request was never closed: %v", s.Name(), err)
				}
			}
		})
	}
}

// The client leaves mid-stream: the upstream request is cancelled at once and no other
// attempt starts.
func TestClientDisconnectCancelsUpstream(t *testing.T) {
	e := newEnv(t, envOptions{sim: func(i int, c *sim.Config) { c.DecodePerToken = 20 * time.Millisecond }})
	ctx, cancel := context.WithCancel(testCtx(t))
	var id string
	var resp *http.Response
	s := e.client.Chat.Completions.NewStreaming(ctx, chatParams("long answer please", 200), option.WithResponseInto(&resp))
	for s.Next() {
		if len(s.Current().Choices) > 0 && s.Current().Choices[0].Delta.Content != "" {
			break
		}
	}
	id = resp.Header.Get("X-Request-Id")
	cancel()
	s.Close()
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	got, err := e.sims[0].WaitRecord(wctx, func(r sim.Record) bool { return r.RequestID == id && r.Outcome != "" })
	if err != nil || got.Outcome != "cancelled" {
		t.Fatalf("replica did not see the cancellation: %+v %v", got, err)
	}
	if got.TokensComputed >= 200 {
		t.Fatalf("the replica generated the whole answer (%d tokens) for a client that left", got.TokensComputed)
	}
	rec := e.record(id)
	if rec.Outcome != "cancelled" || len(rec.Attempts) != 1 || e.totalSimRequests() != 1 {
		t.Fatalf("journal %+v, %d upstream requests", rec, e.totalSimRequests())
	}
}

// Every replica down: 503 with an OpenAI error, and the journal agrees.
func TestAllReplicasDown(t *testing.T) {
	e := newEnv(t, envOptions{replicas: 3})
	for _, s := range e.sims {
		s.Crash()
	}
	_, err := e.client.Chat.Completions.New(testCtx(t), chatParams("anyone?", 5))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable || apiErr.Code != "no_healthy_replica" {
		t.Fatalf("error %v", err)
	}
	if apiErr.Response.Header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	// Active probes may find the crashed replicas before the request does; either way each
	// replica is tried at most once and every attempt found it refusing connections.
	rec := e.record(apiErr.Response.Header.Get("X-Request-Id"))
	seen := map[string]bool{}
	for _, a := range rec.Attempts {
		if seen[a.Replica] || a.EndReason != "connection_refused" {
			t.Fatalf("journal %+v", rec)
		}
		seen[a.Replica] = true
	}
	if rec.Outcome != "failed" || len(rec.Attempts) > 3 {
		t.Fatalf("journal %+v", rec)
	}
}

// Non-streaming requests rerun the same way.
func TestNonStreamRerun(t *testing.T) {
	e := newEnv(t, envOptions{})
	if err := e.sims[0].ArmFault("crash@computed:2", 1); err != nil {
		t.Fatal(err)
	}
	p := chatParams("non stream", 8)
	resp, err := e.client.Chat.Completions.New(testCtx(t), p)
	if err != nil {
		t.Fatal(err)
	}
	if want := e.direct(1, p); resp.Choices[0].Message.Content != want {
		t.Fatalf("got %q want %q", resp.Choices[0].Message.Content, want)
	}
}

// An engine that rejects the input itself (4xx) is not rerun, and its error — whatever its
// shape, here old vLLM's flat body with an integer code — reaches the client in the OpenAI
// shape with a string code.
func TestEngineRejectionIsNormalisedAndNotRerun(t *testing.T) {
	e := newEnv(t, envOptions{sim: func(i int, c *sim.Config) { c.LegacyErrors = true }})
	resp := post(t, e.srv.URL+"/v1/chat/completions",
		`{"model":"sim-model","max_tokens":100000,"messages":[{"role":"user","content":"too long an answer"}]}`)
	b := readAll(t, resp)
	var env struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Code    *string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(b), &env); err != nil || resp.StatusCode != 400 || env.Error.Code == nil ||
		env.Error.Type != "invalid_request_error" || env.Error.Message == "" {
		t.Fatalf("engine rejection reached the client as %d %s", resp.StatusCode, b)
	}
	if n := e.totalSimRequests(); n != 1 {
		t.Fatalf("%d upstream requests, want 1 (a rejected input is not rerun)", n)
	}
}

// A non-streaming answer is silent until it is complete: its wait is bounded by
// non_stream_timeout, not by the streaming first-token timeout.
func TestNonStreamLongAnswerIsNotUncertain(t *testing.T) {
	e := newEnv(t, envOptions{
		sim: func(i int, c *sim.Config) { c.DecodePerToken = 20 * time.Millisecond },
		config: func(c *config.Config) {
			c.Policy.FirstTokenTimeout = config.Duration(100 * time.Millisecond)
			c.Policy.IdleTimeout = config.Duration(100 * time.Millisecond)
		},
	})
	p := chatParams("a long non-streamed answer", 20)
	resp, err := e.client.Chat.Completions.New(testCtx(t), p)
	if err != nil {
		t.Fatalf("a 400 ms non-stream answer failed at a 100 ms streaming timeout: %v", err)
	}
	if resp.Choices[0].Message.Content == "" || e.totalSimRequests() != 1 {
		t.Fatalf("answer %+v after %d upstream requests", resp, e.totalSimRequests())
	}
}
