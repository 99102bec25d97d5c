package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/sim"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
)

// Tools the engine runs itself (docs/design.md §5): the replicas are simulated engines with
// --tool-server, calling a real MCP server on loopback that counts the calls — the ticket
// system a duplicate call would open two tickets in.

// engineTool is one engine-run tool type as a request declares it, the tool server that
// runs it and the MCP tool called there.
type engineTool struct {
	name   string
	server string
	decl   map[string]any
	called string
}

var engineTools = []engineTool{
	{"mcp", "tickets", map[string]any{"type": "mcp", "server_label": "tickets", "server_url": "http://tickets.internal/mcp", "require_approval": "never"}, "create_ticket"},
	{"code_interpreter", sim.ToolServerPython, map[string]any{"type": "code_interpreter", "container": map[string]any{"type": "auto"}}, "python"},
	{"web_search_preview", sim.ToolServerBrowser, map[string]any{"type": "web_search_preview"}, "search"},
	{"container", sim.ToolServerContainer, map[string]any{"type": "container"}, "exec"},
}

// functionTool is a tool the client runs: it never makes a request engine-run.
var functionTool = map[string]any{"type": "function", "name": "lookup", "parameters": map[string]any{"type": "object", "properties": map[string]any{}}}

// toolEnv is two simulated replicas (sim-1 first) that call the counting tool server ts,
// behind a gateway with short timeouts.
func toolEnv(t *testing.T, ts *sim.ToolServer, change func(*config.Config)) *env {
	return newEnv(t, envOptions{
		sim: func(_ int, c *sim.Config) { c.ToolServers = []string{ts.URL()} },
		config: func(c *config.Config) {
			c.Models[0].Replicas[1].Priority = 1
			c.Policy.IdleTimeout = config.Duration(time.Second)
			c.Policy.FirstTokenTimeout = config.Duration(time.Second)
			c.Policy.NonStreamTimeout = config.Duration(time.Second)
			if change != nil {
				change(c)
			}
		}})
}

func startToolServer(t *testing.T, name string) *sim.ToolServer {
	t.Helper()
	ts, err := sim.StartToolServer(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ts.Close() })
	return ts
}

// toolResult is what the client saw of one Responses request.
type toolResult struct {
	requestID string
	events    []string // streamed event types
	text      string
	status    int // a whole answer's status
	err       error
	// The error the client got: its code, and the fencegate fields.
	code      string
	partial   *bool
	retryable *bool
}

// askWithTools sends a Responses request declaring tools, with the official client.
func askWithTools(ctx context.Context, e *env, tools []any, stream bool, opts ...option.RequestOption) toolResult {
	var resp *http.Response
	params := responses.ResponseNewParams{Model: "sim-model",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("open a ticket for the broken printer")}, MaxOutputTokens: openai.Int(4)}
	opts = append(opts, option.WithJSONSet("tools", tools), option.WithResponseInto(&resp))
	var r toolResult
	if stream {
		s := e.client.Responses.NewStreaming(ctx, params, opts...)
		for s.Next() {
			ev := s.Current()
			r.events = append(r.events, ev.Type)
			if ev.Type == "response.output_text.delta" {
				r.text += ev.Delta
			}
		}
		r.err = s.Err()
		s.Close()
		var se *ssestream.StreamError
		if errors.As(r.err, &se) {
			r.decodeError(se.Event.Data)
		}
	} else {
		out, err := e.client.Responses.New(ctx, params, opts...)
		r.err = err
		if out != nil {
			r.text = out.OutputText()
		}
	}
	var apiErr *openai.Error
	if errors.As(r.err, &apiErr) {
		r.status = apiErr.StatusCode
		r.decodeError([]byte(apiErr.RawJSON()))
	}
	if resp != nil {
		r.requestID = resp.Header.Get("X-Request-Id")
		if r.status == 0 {
			r.status = resp.StatusCode
		}
	}
	return r
}

func (r *toolResult) decodeError(b []byte) {
	var e struct {
		Code      string `json:"code"`
		Partial   *bool  `json:"partial_output"`
		Retryable *bool  `json:"retryable"`
	}
	if json.Unmarshal(b, &e) == nil {
		r.code, r.partial, r.retryable = e.Code, e.Partial, e.Retryable
	}
}

func (r toolResult) sawCall() bool {
	for _, ev := range r.events {
		if strings.Contains(ev, "_call") {
			return true
		}
	}
	return false
}

// Each engine-run tool type, streamed and whole, with the replica crashing, resetting or
// hanging right after the engine ran the tool: the tool server saw exactly one call, the
// client got upstream_failed_after_tool_use (not retryable), and no second replica was
// ever asked, so nothing of one could reach the client.
func TestEngineToolNeverRunsTwice(t *testing.T) {
	for _, tool := range engineTools {
		for _, stream := range []bool{true, false} {
			faults := []string{"crash@tool:1", "reset@tool:1", "hang@tool:1"}
			if tool.name == "web_search_preview" || tool.name == "container" {
				faults = faults[:2] // the silent end costs a timeout; two tools show it
			}
			for _, fault := range faults {
				name := fmt.Sprintf("%s/stream=%v/%s", tool.name, stream, fault)
				t.Run(name, func(t *testing.T) {
					ts := startToolServer(t, tool.server)
					e := toolEnv(t, ts, nil)
					r := askWithTools(testCtx(t), e, []any{tool.decl, functionTool}, stream, option.WithHeader("X-Sim-Fault", fault))
					if n := ts.Count(tool.called); n != 1 {
						t.Fatalf("the tool ran %d times (calls %+v)", n, ts.Calls())
					}
					if r.code != "upstream_failed_after_tool_use" || r.retryable == nil || *r.retryable || r.partial == nil {
						t.Fatalf("client got %v (code %q retryable %v)", r.err, r.code, r.retryable)
					}
					// A stream announced the call before the engine ran it: that was output.
					if *r.partial != stream || (stream && !r.sawCall()) {
						t.Fatalf("partial_output %v, events %v", *r.partial, r.events)
					}
					if !stream && r.status != http.StatusBadGateway {
						t.Fatalf("status %d", r.status)
					}
					if r.text != "" {
						t.Fatalf("the client got answer text %q", r.text)
					}
					if n := e.totalSimRequests(); n != 1 {
						t.Fatalf("%d engine requests: a second replica was asked", n)
					}
					rec := e.record(r.requestID)
					if len(rec.Attempts) != 1 || !rec.Attempts[0].EngineMayHaveActed {
						t.Fatalf("journal %+v", rec)
					}
				})
			}
		}
	}
}

// Fenced mode alike: a lease stops publication, not an action the engine already took.
func TestEngineToolNeverRunsTwiceFenced(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			ts := startToolServer(t, "tickets")
			f := newFencedEnvWith(t, fencedOptions{sim: func(_ int, c *sim.Config) { c.ToolServers = []string{ts.URL()} }})
			r := askWithTools(testCtx(t), f.env, []any{engineTools[0].decl}, stream, option.WithHeader("X-Sim-Fault", "reset@tool:1"))
			if ts.Count("create_ticket") != 1 || r.code != "upstream_failed_after_tool_use" || f.totalSimRequests() != 1 {
				t.Fatalf("calls %d, client %v (%q), engine requests %d", ts.Count("create_ticket"), r.err, r.code, f.totalSimRequests())
			}
		})
	}
}

// The same request with only function tools: nothing on the engine could have acted, so a
// failure before the boundary is rerun as before.
func TestFunctionToolsRerunAsBefore(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			ts := startToolServer(t, "tickets")
			e := toolEnv(t, ts, nil)
			r := askWithTools(testCtx(t), e, []any{functionTool}, stream, option.WithHeader("X-Sim-Fault", "reset@prefill;on=sim-1"))
			if r.err != nil || r.text == "" {
				t.Fatalf("client got %v", r.err)
			}
			rec := e.record(r.requestID)
			if rec.Outcome != "completed" || len(rec.Attempts) != 2 || rec.Attempts[0].EngineMayHaveActed || rec.Attempts[1].EngineMayHaveActed {
				t.Fatalf("journal %+v", rec)
			}
			if len(ts.Calls()) != 0 {
				t.Fatalf("the tool server was called: %+v", ts.Calls())
			}
		})
	}
}

// An MCP server the operator declared idempotent: its requests are rerun as before, and
// the tool then runs twice — which the operator declared harmless (docs/design.md §5).
// Only a whole answer can be: a stream announced the call before the engine ran it.
func TestIdempotentMCPServerReruns(t *testing.T) {
	idempotent := func(c *config.Config) {
		c.Policy.RerunEngineTools = config.RerunIdempotentMCPServers
		c.Policy.IdempotentMCPServers = []string{"tickets"}
	}
	ts := startToolServer(t, "tickets")
	e := toolEnv(t, ts, idempotent)
	r := askWithTools(testCtx(t), e, []any{engineTools[0].decl}, false, option.WithHeader("X-Sim-Fault", "crash@tool:1;on=sim-1"))
	if r.err != nil || r.text == "" {
		t.Fatalf("client got %v", r.err)
	}
	if n := ts.Count("create_ticket"); n != 2 {
		t.Fatalf("the idempotent tool ran %d times, want 2 (one per attempt)", n)
	}
	rec := e.record(r.requestID)
	if rec.Outcome != "completed" || len(rec.Attempts) != 2 || !rec.Attempts[0].EngineMayHaveActed || !rec.Attempts[1].EngineMayHaveActed {
		t.Fatalf("journal %+v", rec)
	}

	// Another engine-run tool beside it is not declared idempotent: no rerun.
	ts = startToolServer(t, "tickets")
	e = toolEnv(t, ts, idempotent)
	other := map[string]any{"type": "web_search"}
	r = askWithTools(testCtx(t), e, []any{engineTools[0].decl, other}, false, option.WithHeader("X-Sim-Fault", "crash@tool:1;on=sim-1"))
	if r.code != "upstream_failed_after_tool_use" || ts.Count("create_ticket") != 1 || e.totalSimRequests() != 1 {
		t.Fatalf("client got %v (%q), calls %d", r.err, r.code, ts.Count("create_ticket"))
	}
}

// Built-in tools the simulator cannot run (web_search, file_search, image_generation: run
// by OpenAI's servers, by no engine fencegate fronts today) are engine-run all the same:
// once the request reached the engine, no rerun. A failure that proves the engine never
// started it is rerun: a refused dial, or for a stream any status before it. A whole
// answer's status, a 503 included, comes after whatever the engine did.
func TestServerToolsNotRunBySimulator(t *testing.T) {
	decls := []map[string]any{
		{"type": "web_search"},
		{"type": "file_search", "vector_store_ids": []string{"vs_1"}},
		{"type": "image_generation"},
	}
	for _, decl := range decls {
		for _, c := range []struct {
			fault  string
			stream bool
			rerun  bool
		}{
			{"reset@prefill;on=sim-1", true, false},
			{"drop@accept;on=sim-1", false, false},
			{"status:500@accept;on=sim-1", false, false}, // a whole answer's 500 may follow the tool
			{"status:500@accept;on=sim-1", true, true},   // a stream's status comes before it
			{"status:503@accept;on=sim-1", false, false},
			{"status:503@accept;on=sim-1", true, true},
		} {
			t.Run(fmt.Sprintf("%s/%s/stream=%v", decl["type"], c.fault, c.stream), func(t *testing.T) {
				ts := startToolServer(t, "tickets")
				e := toolEnv(t, ts, nil)
				r := askWithTools(testCtx(t), e, []any{decl}, c.stream, option.WithHeader("X-Sim-Fault", c.fault))
				rec := e.record(r.requestID)
				if c.rerun {
					if r.err != nil || len(rec.Attempts) != 2 || rec.Attempts[0].EngineMayHaveActed || !rec.Attempts[1].EngineMayHaveActed {
						t.Fatalf("client %v, journal %+v", r.err, rec)
					}
					return
				}
				if r.code != "upstream_failed_after_tool_use" || e.totalSimRequests() != 1 || !rec.Attempts[0].EngineMayHaveActed {
					t.Fatalf("client %v (%q), engine requests %d, journal %+v", r.err, r.code, e.totalSimRequests(), rec)
				}
			})
		}
	}
	t.Run("refused dial", func(t *testing.T) {
		ts := startToolServer(t, "tickets")
		e := toolEnv(t, ts, nil)
		if err := e.sims[0].Close(); err != nil {
			t.Fatal(err)
		}
		r := askWithTools(testCtx(t), e, []any{decls[0]}, true)
		if r.err != nil {
			t.Fatalf("client got %v", r.err)
		}
		if rec := e.record(r.requestID); rec.Outcome != "completed" || rec.Attempts[len(rec.Attempts)-1].Replica != "sim-2" {
			t.Fatalf("journal %+v", rec)
		}
	})
}

// The trace document says the engine may have acted, on the attempt.
func TestEngineToolTrace(t *testing.T) {
	ts := startToolServer(t, "tickets")
	e := toolEnv(t, ts, func(c *config.Config) {
		traceKeys(c)
		c.Traces.Mode = config.TracesErrors
	})
	r := askWithTools(testCtx(t), e, []any{engineTools[0].decl}, false,
		option.WithHeader("X-Sim-Fault", "reset@tool:1"), option.WithAPIKey(traceClientKey))
	if r.code != "upstream_failed_after_tool_use" {
		t.Fatalf("client got %v", r.err)
	}
	doc, raw := traceOf(t, e, r.requestID)
	if len(doc.Attempts) != 1 || !doc.Attempts[0].EngineMayHaveActed || !strings.Contains(string(doc.Outcome.Error), "a tool may have run") {
		t.Fatalf("trace %s", raw)
	}
}

// The official SDK retries a 5xx on its own (twice by default), as a new request without
// an Idempotency-Key: a whole answer that ended after the engine ran its tool says
// "x-should-retry: false", so the client library does not run the tool again either.
func TestEngineToolErrorIsNotRetriedBySDK(t *testing.T) {
	ts := startToolServer(t, "tickets")
	e := toolEnv(t, ts, nil)
	sdk := *e
	sdk.client = openai.NewClient(option.WithBaseURL(e.srv.URL+"/v1"), option.WithAPIKey("unused"),
		option.WithRequestTimeout(20*time.Second)) // the SDK's own retries: 2
	r := askWithTools(testCtx(t), &sdk, []any{engineTools[0].decl}, false, option.WithHeader("X-Sim-Fault", "crash@tool:1"))
	if r.status != http.StatusBadGateway || r.code != "upstream_failed_after_tool_use" {
		t.Fatalf("client got %d %v (%q)", r.status, r.err, r.code)
	}
	if n := ts.Count("create_ticket"); n != 1 {
		t.Fatalf("the tool ran %d times: the SDK sent the request again", n)
	}
	if n := e.totalSimRequests(); n != 1 {
		t.Fatalf("%d engine requests", n)
	}
}
