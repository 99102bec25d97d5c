package openai

import (
	"slices"
	"strings"
	"testing"
)

func TestResponsesEngineTools(t *testing.T) {
	cases := []struct {
		name       string
		tools      string
		types      []string
		labels     []string
		idempotent bool // with idempotent servers "docs" and "weather"
	}{
		{"no tools", ``, nil, nil, false},
		{"function tools only", `[{"type":"function","name":"f","parameters":{}},{"type":"custom","name":"g"}]`, nil, nil, false},
		{"an mcp tool", `[{"type":"mcp","server_label":"tickets","server_url":"http://t"}]`, []string{"mcp"}, []string{"tickets"}, false},
		{"idempotent mcp tools", `[{"type":"mcp","server_label":"docs"},{"type":"function","name":"f"},{"type":"mcp","server_label":"weather"}]`,
			[]string{"mcp"}, []string{"docs", "weather"}, true},
		{"idempotent mcp beside code_interpreter", `[{"type":"mcp","server_label":"docs"},{"type":"code_interpreter","container":{"type":"auto"}}]`,
			[]string{"mcp", "code_interpreter"}, []string{"docs"}, false},
		{"built-in tools", `[{"type":"web_search_preview"},{"type":"container"},{"type":"web_search_preview"},{"type":"file_search","vector_store_ids":["v"]},{"type":"image_generation"},{"type":"web_search"}]`,
			[]string{"web_search_preview", "container", "file_search", "image_generation", "web_search"}, nil, false},
		{"local and hosted shell", `[{"type":"shell"},{"type":"shell","environment":{"type":"local"}},{"type":"tool_search","execution":"client"}]`, nil, nil, false},
		{"hosted shell", `[{"type":"shell","environment":{"type":"container_auto"}}]`, []string{"shell"}, nil, false},
		{"an unknown type", `[{"type":"holodeck"}]`, []string{"holodeck"}, nil, false},
		{"null tools", `null`, nil, nil, false},
	}
	for _, c := range cases {
		body := `{"model":"m","input":"x"}`
		if c.tools != "" {
			body = `{"model":"m","input":"x","tools":` + c.tools + `}`
		}
		r, e := ParseRequest(Responses, []byte(body))
		if e != nil {
			t.Fatalf("%s: %v", c.name, e)
		}
		et := r.EngineTools
		if !slices.Equal(et.Types, c.types) || !slices.Equal(et.MCPLabels, c.labels) || et.Any() != (len(c.types) > 0) {
			t.Errorf("%s: engine tools %+v, want types %v labels %v", c.name, et, c.types, c.labels)
		}
		if got := et.Idempotent([]string{"docs", "weather"}); got != c.idempotent {
			t.Errorf("%s: idempotent %v, want %v", c.name, got, c.idempotent)
		}
		if et.Idempotent(nil) {
			t.Errorf("%s: idempotent with no server declared", c.name)
		}
	}
}

// A tools member the gateway cannot read is refused: it must know who runs each tool.
func TestResponsesToolsRefused(t *testing.T) {
	cases := []struct{ name, tools, param, code, msg string }{
		{"not an array", `"mcp"`, "tools", "invalid_type", "expected an array of tool objects"},
		{"an item not an object", `[3]`, "tools[0]", "invalid_type", "expected an object"},
		{"no type", `[{"type":"function","name":"f"},{"server_label":"x"}]`, "tools[1].type", "missing_required_parameter", "'tools[1].type'"},
		{"type not a string", `[{"type":7}]`, "tools[0].type", "invalid_type", "a string"},
		{"mcp without server_label", `[{"type":"mcp","server_url":"http://t"}]`, "tools[0].server_label", "missing_required_parameter", "'tools[0].server_label'"},
		{"mcp with an empty server_label", `[{"type":"mcp","server_label":""}]`, "tools[0].server_label", "invalid_type", "non-empty string"},
		{"environment not an object", `[{"type":"shell","environment":"local"}]`, "tools[0].environment", "invalid_type", "an object"},
	}
	for _, c := range cases {
		_, e := ParseRequest(Responses, []byte(`{"model":"m","input":"x","tools":`+c.tools+`}`))
		if e == nil || e.Status != 400 || e.Param != c.param || e.Code != c.code || !strings.Contains(e.Message, c.msg) {
			t.Errorf("%s: %+v", c.name, e)
		}
	}
}

// No other API carries engine-run tools: a chat or Messages request naming a built-in tool
// type is the engine's to judge, and nothing of it runs on the engine in vLLM, SGLang, TGI
// or llama.cpp.
func TestOtherAPIsHaveNoEngineTools(t *testing.T) {
	chat, e := ParseRequest(Chat, []byte(`{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}]}`))
	if e != nil || chat.EngineTools.Any() {
		t.Fatalf("chat: %v %+v", e, chat)
	}
	msg, e := ParseRequest(Messages, []byte(`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"tools":[{"type":"web_search_20250305","name":"web_search"}]}`))
	if e != nil || msg.EngineTools.Any() {
		t.Fatalf("messages: %v %+v", e, msg)
	}
}
