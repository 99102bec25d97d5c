package sim

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// startToolServer starts a counting MCP server that is closed when the test ends.
func startToolServer(t testing.TB, name string, tools ...string) *ToolServer {
	t.Helper()
	ts, err := StartToolServer(name, tools...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ts.Close() })
	return ts
}

// engineToolCases are the engine-run tool types the sim runs, each with the tool server
// vLLM runs it on, the tool it calls there, and the stream items that announce it
// (streaming_events.py).
var engineToolCases = []struct {
	name       string
	server     string
	tool       map[string]any
	called     string   // the MCP tool called
	items      []string // output item types announced, in order
	events     []string // event types that must be present
	finalItem  string   // the call's item type in the final output
	finalLabel string
}{
	{"mcp", "tickets", map[string]any{"type": "mcp", "server_label": "tickets", "server_url": "http://unused", "headers": map[string]string{"X-Ticket-Tenant": "t1"}},
		"create_ticket", []string{"mcp_call", "message"},
		[]string{"response.mcp_call.in_progress", "response.mcp_call_arguments.delta", "response.mcp_call_arguments.done", "response.mcp_call.completed"},
		"mcp_call", "tickets"},
	{"code_interpreter", ToolServerPython, map[string]any{"type": "code_interpreter", "container": map[string]any{"type": "auto"}},
		"python", []string{"code_interpreter_call", "message"},
		[]string{"response.code_interpreter_call.in_progress", "response.code_interpreter_call_code.delta", "response.code_interpreter_call_code.done",
			"response.code_interpreter_call.interpreting", "response.code_interpreter_call.completed"},
		"mcp_call", "code_interpreter"},
	{"web_search_preview", ToolServerBrowser, map[string]any{"type": "web_search_preview"},
		"search", []string{"mcp_call", "web_search_call", "message"},
		[]string{"response.mcp_call_arguments.delta", "response.web_search_call.in_progress", "response.web_search_call.searching", "response.web_search_call.completed"},
		"web_search_call", ""},
	{"container", ToolServerContainer, map[string]any{"type": "container"},
		"exec", []string{"mcp_call", "message"},
		[]string{"response.mcp_call.in_progress", "response.mcp_call_arguments.delta", "response.mcp_call.completed"},
		"mcp_call", "container"},
}

func responsesToolBody(tool map[string]any, stream bool) map[string]any {
	return map[string]any{"model": "sim-model", "input": "open a ticket", "max_output_tokens": 3, "stream": stream,
		"tools": []any{tool, map[string]any{"type": "function", "name": "lookup", "parameters": map[string]any{"type": "object"}}}}
}

// A Responses request with a tool a tool server serves: the engine calls the tool once,
// announces the call in the stream before the answer, and lists it in the final output.
func TestEngineRunToolStream(t *testing.T) {
	for _, c := range engineToolCases {
		t.Run(c.name, func(t *testing.T) {
			ts := startToolServer(t, c.server)
			target := ts.URL()
			if c.name == "code_interpreter" {
				target = ts.HostPort() // vLLM's own form: the SSE transport at /sse
			}
			s := startSim(t, Config{ToolServers: []string{target}})
			req := newPost(t, testContext(t), s.URL()+"/v1/responses", jsonBody(t, responsesToolBody(c.tool, true)), nil)
			o := observeNamed(testContext(t), newClient(t), req, nil)
			if o.err != nil || o.status != http.StatusOK {
				t.Fatalf("status %d, err %v", o.status, o.err)
			}
			var items, names []string
			var completed responseBodyJSON
			for i, ev := range o.events {
				var d struct {
					Type     string          `json:"type"`
					Seq      int             `json:"sequence_number"`
					Index    *int            `json:"output_index"`
					Item     json.RawMessage `json:"item"`
					Response json.RawMessage `json:"response"`
				}
				if err := json.Unmarshal([]byte(ev.data), &d); err != nil || d.Type != ev.name || d.Seq != i {
					t.Fatalf("event %d %s: %s (%v)", i, ev.name, ev.data, err)
				}
				names = append(names, ev.name)
				if ev.name == "response.output_item.added" {
					var it struct {
						Type string `json:"type"`
					}
					_ = json.Unmarshal(d.Item, &it)
					items = append(items, it.Type)
					if want := 0; it.Type == "message" {
						want = 1
						if *d.Index != want {
							t.Errorf("message item at output_index %d", *d.Index)
						}
					}
				}
				if ev.name == "response.completed" {
					completed = decodeResponse(t, d.Response)
				}
			}
			if !slices.Equal(items, c.items) {
				t.Errorf("items announced %v, want %v", items, c.items)
			}
			for _, e := range c.events {
				if !slices.Contains(names, e) {
					t.Errorf("no %s in %v", e, names)
				}
			}
			// The call is announced before the answer's first word.
			firstText := slices.Index(names, "response.output_text.delta")
			firstCall := slices.IndexFunc(names, func(n string) bool { return strings.Contains(n, "_call") })
			if firstCall < 0 || firstText < firstCall {
				t.Errorf("events %v", names)
			}
			if len(completed.Output) != 2 || completed.Output[0].Type != c.finalItem || completed.Output[1].Type != "message" {
				t.Fatalf("final output %+v", completed.Output)
			}
			if got := ts.Count(c.called); got != 1 {
				t.Errorf("%s called %d times, want 1 (calls %+v)", c.called, got, ts.Calls())
			}
			rec := s.Records()[0]
			if rec.ToolCalls != 1 || rec.Outcome != OutcomeFinished {
				t.Errorf("record %+v", rec)
			}
			action := ts.Actions()[0]
			if action.Session != rec.ID {
				t.Errorf("call session %q, want the request's id %q", action.Session, rec.ID)
			}
			if c.name == "mcp" && action.Header.Get("X-Ticket-Tenant") != "t1" {
				t.Errorf("the mcp tool's headers did not reach its server: %v", action.Header)
			}
			// vLLM cleans the session up when the request ends.
			if got := ts.Count(cleanupTool); got != 1 {
				t.Errorf("cleanup_session called %d times", got)
			}
		})
	}
}

func TestEngineRunToolWhole(t *testing.T) {
	for _, c := range engineToolCases {
		t.Run(c.name, func(t *testing.T) {
			ts := startToolServer(t, c.server)
			s := startSim(t, Config{ToolServers: []string{ts.URL()}})
			status, body := postResponses(t, s, responsesToolBody(c.tool, false), nil)
			if status != http.StatusOK {
				t.Fatalf("%d %s", status, body)
			}
			r := decodeResponse(t, body)
			if len(r.Output) != 2 || r.Output[0].Type != c.finalItem || r.Output[1].Type != "message" || r.text() == "" {
				t.Fatalf("output %s", body)
			}
			var item struct {
				ServerLabel string `json:"server_label"`
			}
			var out struct {
				Output []json.RawMessage `json:"output"`
			}
			_ = json.Unmarshal(body, &out)
			_ = json.Unmarshal(out.Output[0], &item)
			if item.ServerLabel != c.finalLabel {
				t.Errorf("server_label %q, want %q", item.ServerLabel, c.finalLabel)
			}
			// The call's tokens are output tokens.
			if r.Usage.OutputTokens <= 3 {
				t.Errorf("usage %+v", r.Usage)
			}
			if ts.Count(c.called) != 1 || s.Records()[0].ToolCalls != 1 {
				t.Errorf("calls %+v record %+v", ts.Calls(), s.Records()[0])
			}
		})
	}
}

// tool:1 fires right after the engine's first call returned: the tool ran, the client
// has seen its announcement at most, never the answer.
func TestEngineRunToolFaults(t *testing.T) {
	for _, c := range []struct {
		spec, outcome string
		stream        bool
	}{
		{"crash@tool:1", OutcomeCrashed, true},
		{"reset@tool:1", OutcomeReset, false},
		{"drop@tool:1", OutcomeDropped, true},
		{"status:500@tool:1", OutcomeError, false},
	} {
		t.Run(c.spec, func(t *testing.T) {
			ts := startToolServer(t, "tickets")
			s := startSim(t, Config{ToolServers: []string{ts.URL()}})
			tool := map[string]any{"type": "mcp", "server_label": "tickets"}
			req := newPost(t, testContext(t), s.URL()+"/v1/responses", jsonBody(t, responsesToolBody(tool, c.stream)), map[string]string{"X-Sim-Fault": c.spec})
			o := observeNamed(testContext(t), newClient(t), req, nil)
			for _, ev := range o.events {
				if ev.name == "response.output_text.delta" || ev.name == "response.completed" {
					t.Errorf("the answer went out after the fault: %v", o.names())
				}
			}
			if c.stream && c.spec != "status:500@tool:1" && !slices.Contains(o.names(), "response.mcp_call.completed") {
				t.Errorf("events %v", o.names())
			}
			if c.spec == "status:500@tool:1" && (o.status != 500 || o.err != nil) {
				t.Errorf("status %d err %v: vLLM answers a whole request that failed after its tools with a 500", o.status, o.err)
			}
			rec := waitRecord(t, s, ended)
			if rec.Outcome != c.outcome || rec.ToolCalls != 1 || ts.Count("create_ticket") != 1 {
				t.Errorf("record %+v, calls %+v", rec, ts.Calls())
			}
		})
	}
}

// Without a tool server, or with tool_choice "none", the engine runs nothing: the request
// is answered in text, as vLLM gives the model no such tool.
func TestEngineRunToolNotRun(t *testing.T) {
	ts := startToolServer(t, "tickets")
	tool := map[string]any{"type": "mcp", "server_label": "tickets"}
	for name, c := range map[string]struct {
		cfg  Config
		body map[string]any
	}{
		"no tool server":      {Config{}, responsesToolBody(tool, false)},
		"tool_choice none":    {Config{ToolServers: []string{ts.URL()}}, withField(responsesToolBody(tool, false), "tool_choice", "none")},
		"another server only": {Config{ToolServers: []string{ts.URL()}}, responsesToolBody(map[string]any{"type": "mcp", "server_label": "wiki"}, false)},
		"web_search":          {Config{ToolServers: []string{ts.URL()}}, responsesToolBody(map[string]any{"type": "web_search"}, false)},
	} {
		s := startSim(t, c.cfg)
		status, body := postResponses(t, s, c.body, nil)
		r := decodeResponse(t, body)
		if status != http.StatusOK || len(r.Output) != 1 || r.Output[0].Type != "message" || s.Records()[0].ToolCalls != 0 {
			t.Errorf("%s: %d %s", name, status, body)
		}
	}
	if n := len(ts.Actions()); n != 0 {
		t.Errorf("tool server called %d times", n)
	}
}

func withField(m map[string]any, k string, v any) map[string]any { m[k] = v; return m }

func TestToolServerConfig(t *testing.T) {
	if _, err := Start(Config{ToolServers: []string{"demo"}}); err == nil || !strings.Contains(err.Error(), "demo") {
		t.Errorf("demo tool server: %v", err)
	}
	if _, err := Start(Config{ToolServers: []string{"127.0.0.1:1"}}); err == nil || !strings.Contains(err.Error(), "tool server 127.0.0.1:1") {
		t.Errorf("unreachable tool server: %v", err)
	}
	cfg, err := parseFlags([]string{"--tool-server", "127.0.0.1:7001,http://127.0.0.1:7002/mcp"}, new(strings.Builder))
	if err != nil || !slices.Equal(cfg.ToolServers, []string{"127.0.0.1:7001", "http://127.0.0.1:7002/mcp"}) {
		t.Errorf("flags: %+v %v", cfg.ToolServers, err)
	}
	for spec, ok := range map[string]bool{"crash@tool:1": true, "hang@tool:2": true, "crash@tool:0": false, "crash@tool:x": false} {
		if _, err := parseFaultSpec(spec); (err == nil) != ok {
			t.Errorf("%s: %v", spec, err)
		}
	}
}
