package enginetool

import "testing"

// The tool types vLLM and SGLang run inside a Responses request (their serving code's
// builtin tool list and MCP tools) are engine-run; the ones whose call comes back to the
// client are not.
func TestEngineRun(t *testing.T) {
	cases := []struct {
		typ, environment, execution string
		want                        bool
	}{
		{"mcp", "", "", true},
		{"code_interpreter", "", "", true},
		{"web_search_preview", "", "", true},
		{"web_search_preview_2025_03_11", "", "", true},
		{"container", "", "", true},
		{"web_search", "", "", true},
		{"file_search", "", "", true},
		{"image_generation", "", "", true},
		{"shell", "container_auto", "", true},
		{"shell", "container_reference", "", true},
		{"shell", "local", "", false},
		{"shell", "", "", false},
		{"tool_search", "", "", true},
		{"tool_search", "", "server", true},
		{"tool_search", "", "client", false},
		{"function", "", "", false},
		{"custom", "", "", false},
		{"namespace", "", "", false},
		{"computer_use_preview", "", "", false},
		{"local_shell", "", "", false},
		{"apply_patch", "", "", false},
		// A type nobody knows yet: the gateway cannot tell who runs it.
		{"browser_automation_2027", "", "", true},
	}
	for _, c := range cases {
		if got := EngineRun(c.typ, c.environment, c.execution); got != c.want {
			t.Errorf("EngineRun(%q, %q, %q) = %v, want %v", c.typ, c.environment, c.execution, got, c.want)
		}
	}
}

func TestTableHasEachTypeOnce(t *testing.T) {
	seen := map[string]bool{}
	for _, tool := range Tools {
		if seen[tool.Type] {
			t.Errorf("type %q listed twice", tool.Type)
		}
		seen[tool.Type] = true
		if tool.Runner != Client && tool.Runner != Engine {
			t.Errorf("type %q has no runner", tool.Type)
		}
	}
}

// The items and events of vLLM's streaming_events.py around a built-in or MCP call (and
// OpenAI's own for the hosted tools) announce an engine-run call; a message, a reasoning
// item and a function call do not.
func TestAnnouncements(t *testing.T) {
	for _, item := range []string{"mcp_call", "mcp_list_tools", "code_interpreter_call", "web_search_call",
		"file_search_call", "image_generation_call", "tool_search_call"} {
		if !AnnouncesEngineCall([]byte(item)) {
			t.Errorf("item %q does not announce an engine-run call", item)
		}
	}
	for _, item := range []string{"message", "reasoning", "function_call", "mcp_call_x", "mcp", ""} {
		if AnnouncesEngineCall([]byte(item)) {
			t.Errorf("item %q announces an engine-run call", item)
		}
	}
	for _, ev := range []string{"response.mcp_call.in_progress", "response.mcp_call_arguments.delta",
		"response.mcp_call_arguments.done", "response.mcp_call.completed", "response.mcp_call.failed",
		"response.mcp_list_tools.in_progress", "response.code_interpreter_call.in_progress",
		"response.code_interpreter_call_code.delta", "response.code_interpreter_call.interpreting",
		"response.web_search_call.in_progress", "response.web_search_call.searching",
		"response.file_search_call.searching", "response.image_generation_call.partial_image"} {
		if !EngineCallEvent([]byte(ev)) {
			t.Errorf("event %q is not an engine-run call's", ev)
		}
	}
	for _, ev := range []string{"response.created", "response.in_progress", "response.output_item.added",
		"response.output_text.delta", "response.function_call_arguments.delta", "response.mcp_call",
		"mcp_call.in_progress", "response.mcp_callx.done", "response.completed"} {
		if EngineCallEvent([]byte(ev)) {
			t.Errorf("event %q is an engine-run call's", ev)
		}
	}
}
