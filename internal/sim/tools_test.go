package sim

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

var (
	vllmToolCallID    = regexp.MustCompile(`^chatcmpl-tool-[0-9a-f]{12}4[0-9a-f]{3}[89ab][0-9a-f]{15}$`)
	mistralToolCallID = regexp.MustCompile(`^[a-zA-Z0-9]{9}$`)
)

// weatherTools is a request's tools: two functions with typed parameters.
func weatherTools() []map[string]any {
	return []map[string]any{
		{"type": "function", "function": map[string]any{
			"name": "get_weather",
			"parameters": map[string]any{"type": "object", "properties": map[string]any{
				"city": map[string]any{"type": "string"}, "days": map[string]any{"type": "integer"}, "metric": map[string]any{"type": "boolean"},
			}},
		}},
		{"type": "function", "function": map[string]any{"name": "get_time", "parameters": map[string]any{"type": "object", "properties": map[string]any{"zone": map[string]any{"type": "string"}}}}},
	}
}

func namedChoice(name string) map[string]any {
	return map[string]any{"type": "function", "function": map[string]any{"name": name}}
}

// streamedCall gathers a choice's tool call from stream chunks.
type streamedCall struct {
	ids     []string // every id sent (only the first delta has one)
	name    string
	index   []int // the call index of every delta
	args    string
	nulls   int // later deltas with "name": null
	reason  string
	content bool // any content delta
}

func streamedCalls(t *testing.T, events []string) map[int]*streamedCall {
	t.Helper()
	calls := map[int]*streamedCall{}
	for _, ev := range events {
		if ev == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Index int `json:"index"`
				Delta struct {
					Content   *string `json:"content"`
					ToolCalls []struct {
						ID       *string `json:"id"`
						Type     *string `json:"type"`
						Index    int     `json:"index"`
						Function struct {
							Name      json.RawMessage `json:"name"`
							Arguments string          `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(ev), &c); err != nil {
			t.Fatal(err)
		}
		for _, ch := range c.Choices {
			sc := calls[ch.Index]
			if sc == nil {
				sc = &streamedCall{}
				calls[ch.Index] = sc
			}
			if ch.Delta.Content != nil && *ch.Delta.Content != "" {
				sc.content = true
			}
			if ch.FinishReason != nil {
				sc.reason = *ch.FinishReason
			}
			for _, tc := range ch.Delta.ToolCalls {
				if tc.ID != nil {
					sc.ids = append(sc.ids, *tc.ID)
					var name string
					_ = json.Unmarshal(tc.Function.Name, &name)
					sc.name = name
					if tc.Type == nil || *tc.Type != "function" {
						t.Errorf("first delta without type function: %s", ev)
					}
				} else if string(tc.Function.Name) == "null" {
					sc.nulls++
				} else if tc.Function.Name != nil {
					t.Errorf("a later delta names the function: %s", ev)
				}
				sc.index = append(sc.index, tc.Index)
				sc.args += tc.Function.Arguments
			}
		}
	}
	return calls
}

func TestToolCallNamedStream(t *testing.T) {
	s := startSim(t, Config{Name: "tools"})
	req := chatRequest("weather in Paris?", map[string]any{"n": 2, "tools": weatherTools(), "tool_choice": namedChoice("get_time")})
	calls := streamedCalls(t, streamEvents(t, s, "/v1/chat/completions", req, nil))
	for j := range 2 {
		c := calls[j]
		if c == nil || len(c.ids) != 1 || !vllmToolCallID.MatchString(c.ids[0]) || c.name != "get_time" || c.reason != "stop" || c.content || c.nulls != 0 {
			t.Fatalf("choice %d: %+v", j, c)
		}
		for _, i := range c.index {
			if i != j {
				t.Errorf("choice %d: a named call's deltas must carry the choice index, got %v", j, c.index)
			}
		}
		var args map[string]any
		if err := json.Unmarshal([]byte(c.args), &args); err != nil || len(args) != 1 || args["zone"] == "" {
			t.Errorf("choice %d arguments %q: %v", j, c.args, err)
		}
	}
	if calls[0].ids[0] == calls[1].ids[0] || calls[0].args == calls[1].args {
		t.Errorf("two choices share an id or arguments: %+v %+v", calls[0], calls[1])
	}
	// Arguments are deterministic; ids are not.
	again := streamedCalls(t, streamEvents(t, s, "/v1/chat/completions", chatRequest("weather in Paris?", map[string]any{"n": 2, "tools": weatherTools(), "tool_choice": namedChoice("get_time")}), nil))
	if again[0].args != calls[0].args || again[0].ids[0] == calls[0].ids[0] {
		t.Errorf("second run: args %q (was %q), id %s (was %s)", again[0].args, calls[0].args, again[0].ids[0], calls[0].ids[0])
	}
	rec := waitRecord(t, s, func(r Record) bool { return ended(r) && r.ID == s.Records()[0].ID })
	if rec.TokensSent != len(argumentPieces(calls[0].args))+len(argumentPieces(calls[1].args)) {
		t.Errorf("record sent %d tokens, want the arguments' tokens", rec.TokensSent)
	}
}

func TestToolCallRequiredStream(t *testing.T) {
	s := startSim(t, Config{Name: "tools", StreamInterval: 2})
	req := chatRequest("weather?", map[string]any{"tools": weatherTools(), "tool_choice": "required", "seed": 3})
	calls := streamedCalls(t, streamEvents(t, s, "/v1/chat/completions", req, nil))
	c := calls[0]
	if c == nil || len(c.ids) != 1 || c.reason != "tool_calls" || c.nulls != len(c.index)-1 {
		t.Fatalf("call %+v", c)
	}
	for _, i := range c.index {
		if i != 0 {
			t.Errorf("call index %v, want 0 (its place in the list)", c.index)
		}
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(c.args), &args); err != nil {
		t.Fatalf("arguments %q: %v", c.args, err)
	}
	switch c.name {
	case "get_weather":
		if _, ok := args["days"].(float64); !ok || len(args) != 3 {
			t.Errorf("get_weather arguments %v", args)
		}
		if _, ok := args["metric"].(bool); !ok {
			t.Errorf("get_weather arguments %v", args)
		}
	case "get_time":
		if len(args) != 1 {
			t.Errorf("get_time arguments %v", args)
		}
	default:
		t.Errorf("called %q", c.name)
	}
}

func TestToolCallWhole(t *testing.T) {
	s := startSim(t, Config{Name: "tools", ToolCallIDStyle: ToolCallIDsMistral})
	for _, tc := range []struct {
		choice any
		reason string
	}{
		{namedChoice("get_weather"), "stop"},
		{"required", "tool_calls"},
	} {
		status, b := postJSON(t, newClient(t), s.URL()+"/v1/chat/completions", jsonBody(t, chatRequest("weather?", map[string]any{"tools": weatherTools(), "tool_choice": tc.choice, "max_tokens": 100})), nil)
		if status != 200 {
			t.Fatalf("status %d: %s", status, b)
		}
		var got struct {
			Choices []struct {
				Message struct {
					Content   *string `json:"content"`
					ToolCalls []struct {
						ID       string `json:"id"`
						Type     string `json:"type"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		ch := got.Choices[0]
		if ch.FinishReason != tc.reason || ch.Message.Content == nil || *ch.Message.Content != "" || len(ch.Message.ToolCalls) != 1 {
			t.Fatalf("%v: %s", tc.choice, b)
		}
		call := ch.Message.ToolCalls[0]
		if !mistralToolCallID.MatchString(call.ID) || call.Type != "function" || !json.Valid([]byte(call.Function.Arguments)) {
			t.Errorf("%v: call %+v", tc.choice, call)
		}
	}
}

func TestToolCallCutByMaxTokens(t *testing.T) {
	s := startSim(t, Config{})
	for _, tc := range []struct {
		choice any
		stream bool
		reason string
	}{
		{namedChoice("get_weather"), true, "length"},
		{namedChoice("get_weather"), false, "length"},
		{"required", true, "tool_calls"}, // vLLM's stream says tool_calls once a call was streamed
		{"required", false, "length"},
	} {
		body := chatRequest("weather?", map[string]any{"tools": weatherTools()[:1], "tool_choice": tc.choice, "max_tokens": 3})
		if tc.stream {
			c := streamedCalls(t, streamEvents(t, s, "/v1/chat/completions", body, nil))[0]
			if c.reason != tc.reason || len(argumentPieces(c.args)) != 3 || json.Valid([]byte(c.args)) {
				t.Errorf("%v stream: %+v", tc.choice, c)
			}
			continue
		}
		_, b := postJSON(t, newClient(t), s.URL()+"/v1/chat/completions", jsonBody(t, body), nil)
		if !strings.Contains(string(b), `"finish_reason":"`+tc.reason+`"`) || !strings.Contains(string(b), `"tool_calls":[{"id":`) {
			t.Errorf("%v whole: %s", tc.choice, b)
		}
	}
}

func TestToolChoiceValidation(t *testing.T) {
	s := startSim(t, Config{})
	cases := []struct {
		name   string
		extra  map[string]any
		status int
		want   string // in the message, or in the body for 200
	}{
		{"required without tools", map[string]any{"tool_choice": "required"}, 400, "When using `tool_choice`, `tools` must be set."},
		{"named without tools", map[string]any{"tool_choice": namedChoice("f")}, 400, "When using `tool_choice`, `tools` must be set."},
		{"unknown function", map[string]any{"tools": weatherTools(), "tool_choice": namedChoice("nope")}, 400, "does not match any of the specified `tools`"},
		{"bad string", map[string]any{"tools": weatherTools(), "tool_choice": "always"}, 400, "Invalid value for `tool_choice`: always!"},
		{"no function", map[string]any{"tools": weatherTools(), "tool_choice": map[string]any{"type": "function"}}, 400, "Invalid value for `function`"},
		{"no name", map[string]any{"tools": weatherTools(), "tool_choice": map[string]any{"type": "function", "function": map[string]any{}}}, 400, "Expected field `name`"},
		{"none", map[string]any{"tools": weatherTools(), "tool_choice": "none"}, 200, `"tool_calls":[]`},
		{"auto answers in text", map[string]any{"tools": weatherTools()}, 200, `"tool_calls":[]`},
		{"required with no tools is none", map[string]any{"tools": []any{}, "tool_choice": "required"}, 200, `"tool_calls":[]`},
	}
	for _, tc := range cases {
		status, b := postJSON(t, newClient(t), s.URL()+"/v1/chat/completions", jsonBody(t, chatRequest("x", tc.extra)), nil)
		if status != tc.status {
			t.Errorf("%s: status %d: %s", tc.name, status, b)
			continue
		}
		if status == 200 {
			if !strings.Contains(string(b), tc.want) {
				t.Errorf("%s: %s", tc.name, b)
			}
			continue
		}
		if e := decodeError(t, b); !strings.Contains(e.Error.Message, tc.want) || e.Error.Type != "BadRequestError" {
			t.Errorf("%s: %+v", tc.name, *e.Error)
		}
	}
}

func TestToolCallsMatchVLLM(t *testing.T) {
	tools := []map[string]any{{"type": "function", "function": map[string]any{"name": "get_weather",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}}
	// The call's 7 tokens make the fixtures' chunks with these intervals.
	named := startSim(t, Config{StreamInterval: 3})
	compareStream(t, "vllm_chat_stream_tool_named.sse", streamEvents(t, named, "/v1/chat/completions",
		chatRequest("weather?", map[string]any{"tools": tools, "tool_choice": namedChoice("get_weather")}), nil))
	required := startSim(t, Config{StreamInterval: 6})
	compareStream(t, "vllm_chat_stream_tool_required.sse", streamEvents(t, required, "/v1/chat/completions",
		chatRequest("weather?", map[string]any{"tools": tools, "tool_choice": "required"}), nil))
	status, b := postJSON(t, newClient(t), named.URL()+"/v1/chat/completions",
		jsonBody(t, chatRequest("weather?", map[string]any{"tools": tools, "tool_choice": namedChoice("get_weather")})), nil)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, b)
	}
	compareBody(t, "vllm_chat_tool_named.json", b)
}

func TestArgumentPieces(t *testing.T) {
	in := `{"city": "alpha bravo", "days": 3}`
	got := argumentPieces(in)
	want := []string{`{"`, `city`, `":`, ` "`, `alpha`, ` bravo`, `",`, ` "`, `days`, `":`, ` 3`, `}`}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("pieces %q, want %q", got, want)
	}
}

func TestToolCallIDStyles(t *testing.T) {
	seen := map[string]bool{}
	for range 50 {
		v, m := newToolCallID(ToolCallIDsVLLM), newToolCallID(ToolCallIDsMistral)
		if !vllmToolCallID.MatchString(v) || !mistralToolCallID.MatchString(m) || seen[v] || seen[m] {
			t.Fatalf("ids %q %q", v, m)
		}
		seen[v], seen[m] = true, true
	}
	if _, err := Start(Config{ToolCallIDStyle: "openai"}); err == nil {
		t.Error("an unknown ToolCallIDStyle was accepted")
	}
	cfg, err := parseFlags([]string{"--tool-call-id-style", "mistral"}, io.Discard)
	if err != nil || cfg.ToolCallIDStyle != ToolCallIDsMistral {
		t.Errorf("--tool-call-id-style mistral: %q, %v", cfg.ToolCallIDStyle, err)
	}
}
