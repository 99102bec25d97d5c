package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/sim"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
)

// apiResult is what a client of one API saw of one streamed answer.
type apiResult struct {
	requestID string
	text      string
	err       error
	// code is the error's code when the SDK raised one that carries it.
	code string
}

// apiClient streams one answer through the gateway with an API's official Go SDK.
type apiClient func(ctx context.Context, e *env, prompt string, maxTokens int64) apiResult

func messagesClient(ctx context.Context, e *env, prompt string, maxTokens int64) apiResult {
	var resp *http.Response
	c := anthropic.NewClient(anthropicoption.WithBaseURL(e.srv.URL), anthropicoption.WithAPIKey("unused"), anthropicoption.WithMaxRetries(0))
	s := c.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "sim-model", MaxTokens: maxTokens,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))}},
		anthropicoption.WithResponseInto(&resp))
	defer s.Close()
	var r apiResult
	for s.Next() {
		if d, ok := s.Current().AsAny().(anthropic.ContentBlockDeltaEvent); ok {
			r.text += d.Delta.Text
		}
	}
	r.err = s.Err()
	var apiErr *anthropic.Error
	if errors.As(r.err, &apiErr) {
		var body struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		json.Unmarshal([]byte(apiErr.RawJSON()), &body)
		r.code = body.Error.Code
	}
	if resp != nil {
		r.requestID = resp.Header.Get("X-Request-Id")
	}
	return r
}

func responsesClient(ctx context.Context, e *env, prompt string, maxTokens int64) apiResult {
	var resp *http.Response
	s := e.client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "sim-model",
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)},
		MaxOutputTokens: openai.Int(maxTokens)}, option.WithResponseInto(&resp))
	defer s.Close()
	var r apiResult
	for s.Next() {
		if ev := s.Current(); ev.Type == "response.output_text.delta" {
			r.text += ev.Delta
		}
	}
	r.err = s.Err()
	var se *ssestream.StreamError
	if errors.As(r.err, &se) {
		var body struct {
			Code string `json:"code"`
		}
		json.Unmarshal(se.Event.Data, &body)
		r.code = body.Code
	}
	var apiErr *openai.Error
	if errors.As(r.err, &apiErr) {
		r.code = apiErr.Code
	}
	if resp != nil {
		r.requestID = resp.Header.Get("X-Request-Id")
	}
	return r
}

var apiClients = map[string]apiClient{"messages": messagesClient, "responses": responsesClient}

// apiEnv is two simulated replicas, sim-1 serving first (a lower tier), behind a gateway.
func apiEnv(t *testing.T, change func(*config.Config)) *env {
	return newEnv(t, envOptions{config: func(c *config.Config) {
		c.Models[0].Replicas[1].Priority = 1
		c.Policy.IdleTimeout = config.Duration(500 * time.Millisecond)
		if change != nil {
			change(c)
		}
	}})
}

// A healthy stream completes with the answer the replica gives, on each API.
func TestAPIsHealthyStream(t *testing.T) {
	for name, client := range apiClients {
		t.Run(name, func(t *testing.T) {
			e := apiEnv(t, nil)
			r := client(testCtx(t), e, "say something", 6)
			if r.err != nil {
				t.Fatal(r.err)
			}
			if want := e.direct(0, chatParams("say something", 6)); r.text != want {
				t.Fatalf("got %q, want the replica's answer %q", r.text, want)
			}
			if rec := e.record(r.requestID); rec.Outcome != "completed" || rec.DeliveredOutputTokens != 6 || len(rec.Attempts) != 1 {
				t.Fatalf("journal %+v", rec)
			}
		})
	}
}

// A replica that dies before any output: one complete answer, from the other replica.
func TestAPIsRerunBeforeOutput(t *testing.T) {
	for name, client := range apiClients {
		t.Run(name, func(t *testing.T) {
			e := apiEnv(t, nil)
			if err := e.sims[0].ArmFault("crash@prefill", 1); err != nil {
				t.Fatal(err)
			}
			r := client(testCtx(t), e, "rerun me", 6)
			if r.err != nil {
				t.Fatal(r.err)
			}
			if want := e.direct(1, chatParams("rerun me", 6)); r.text != want {
				t.Fatalf("got %q, want the second replica's answer %q", r.text, want)
			}
			if rec := e.record(r.requestID); rec.Outcome != "completed" || len(rec.Attempts) != 2 || rec.Attempts[1].Replica != "sim-2" {
				t.Fatalf("journal %+v", rec)
			}
		})
	}
}

// A replica that dies after the first delta: the client's SDK raises exactly one native
// interruption, with the code, and the stream has nothing after it.
func TestAPIsInterruptedAfterFirstDelta(t *testing.T) {
	for name, client := range apiClients {
		t.Run(name, func(t *testing.T) {
			e := apiEnv(t, nil)
			e.armAll("crash@sent:1")
			r := client(testCtx(t), e, "interrupt me", 8)
			if r.err == nil || r.code != "upstream_decode_interrupted" || r.text == "" {
				t.Fatalf("client saw %q, error %v (code %q)", r.text, r.err, r.code)
			}
			rec := e.record(r.requestID)
			if rec.Outcome != "interrupted" || len(rec.Attempts) != 1 || rec.DeliveredOutputTokens != len(strings.Fields(r.text)) {
				t.Fatalf("journal %+v, client got %q", rec, r.text)
			}
		})
	}
}

// A replica that hangs after the first delta: the interruption comes at idle_timeout.
func TestAPIsHangAfterFirstDelta(t *testing.T) {
	for name, client := range apiClients {
		t.Run(name, func(t *testing.T) {
			e := apiEnv(t, nil)
			e.armAll("hang@sent:1")
			r := client(testCtx(t), e, "hang on me", 8)
			if r.code != "upstream_decode_interrupted" {
				t.Fatalf("error %v (code %q)", r.err, r.code)
			}
			if rec := e.record(r.requestID); rec.Attempts[0].EndReason != "idle_timeout" || len(rec.Attempts) != 1 {
				t.Fatalf("journal %+v", rec)
			}
		})
	}
}

// A client that leaves: its upstream request is cancelled at once, nothing is rerun.
func TestAPIsClientLeaves(t *testing.T) {
	for name, client := range apiClients {
		t.Run(name, func(t *testing.T) {
			// A long answer, still decoding when the client leaves.
			e := newEnv(t, envOptions{sim: func(i int, c *sim.Config) { c.DecodePerToken = 20 * time.Millisecond },
				config: func(c *config.Config) { c.Models[0].Replicas[1].Priority = 1 }})
			ctx, cancel := context.WithCancel(testCtx(t))
			done := make(chan apiResult, 1)
			go func() { done <- client(ctx, e, "leave me", 500) }()
			rec, err := e.sims[0].WaitRecord(testCtx(t), func(r sim.Record) bool { return r.TokensSent >= 2 })
			if err != nil {
				t.Fatal(err)
			}
			cancel()
			<-done
			got, err := e.sims[0].WaitRecord(testCtx(t), func(r sim.Record) bool { return r.ID == rec.ID && r.Outcome != "" })
			if err != nil || got.Outcome != sim.OutcomeCancelled {
				t.Fatalf("engine record %+v %v", got, err)
			}
			if n := e.totalSimRequests(); n != 1 {
				t.Fatalf("%d engine requests", n)
			}
		})
	}
}

// Fenced mode on the other APIs: an attempt cut off from its agent before any output
// (uncertain) is fenced by the agent, then rerun; the client gets one complete answer.
func TestAPIsFencedRerun(t *testing.T) {
	for name, client := range apiClients {
		t.Run(name, func(t *testing.T) {
			d := &failingDialer{}
			f := newFencedEnvWith(t, fencedOptions{dial: d.Dial})
			d.arm(readErr(syscall.ETIMEDOUT))
			r := client(testCtx(t), f.env, "fenced "+name, 6)
			if r.err != nil {
				t.Fatal(r.err)
			}
			rec := f.record(r.requestID)
			if rec.Outcome != "completed" || len(rec.Attempts) != 2 || rec.Attempts[0].Failure != "uncertain" {
				t.Fatalf("journal %+v", rec)
			}
			second := 1
			if rec.Attempts[1].Replica == "sim-1" {
				second = 0
			}
			if want := f.direct(second, chatParams("fenced "+name, 6)); r.text != want {
				t.Fatalf("got %q, want %q", r.text, want)
			}
		})
	}
}

// Whole (non-streamed) answers of the Messages API pass through, with tool ids rewritten.
func TestMessagesWholeAnswer(t *testing.T) {
	e := apiEnv(t, nil)
	var resp *http.Response
	c := anthropic.NewClient(anthropicoption.WithBaseURL(e.srv.URL), anthropicoption.WithAPIKey("unused"), anthropicoption.WithMaxRetries(0))
	msg, err := c.Messages.New(testCtx(t), anthropic.MessageNewParams{Model: "sim-model", MaxTokens: 5,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("whole please"))}},
		anthropicoption.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	if msg.Content[0].Text != e.direct(0, chatParams("whole please", 5)) || msg.StopReason != "max_tokens" {
		t.Fatalf("message %+v", msg)
	}
	if rec := e.record(resp.Header.Get("X-Request-Id")); rec.DeliveredOutputTokens != 5 {
		t.Fatalf("journal %+v", rec)
	}
}
