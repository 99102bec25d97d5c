// Package enginetool is the one table of tool types that an engine runs itself, inside the
// request, before anything reaches the client (docs/design.md §5): the Responses API's
// built-in and MCP tools, which vLLM and SGLang execute through their tool server. A request
// that carries one "may act" once its body may have reached an engine, and a stream item that
// announces a call of one is output. The request side (internal/openai) and the stream side
// (internal/sse) both read this table, so the two never disagree.
//
// It is a pure core package: it imports only the standard library, must never import any
// other fencegate package, and starts no goroutines.
package enginetool

import "bytes"

// Runner says who runs the calls of a tool type.
type Runner uint8

const (
	// Client: the model's call comes back to the client, which runs it (or not) and sends
	// the result in its next request. Nothing happens on the engine.
	Client Runner = iota + 1
	// Engine: the engine runs the call itself, inside the request, and feeds the result
	// back to the model before it answers.
	Engine
)

// Tool is one row of the table: a type of the Responses API's tools[].
type Tool struct {
	// Type is the tool's "type".
	Type string
	// Runner is who runs its calls (for shell and tool_search, see EngineRun: it depends
	// on the declaration).
	Runner Runner
	// Item is the output item type that announces a call in the answer ("" for a client
	// tool whose item the table does not need).
	Item string
	// Engines names the engines that run it today; empty for a type only OpenAI's own
	// servers run, which is counted as engine-run all the same: an engine that adds it runs
	// it inside the request, and counting it costs only the rerun of such a request.
	Engines string
}

// Tools is the table, in the order docs/design.md §5 lists it. Sources: vLLM's
// entrypoints/openai/responses (serving.py: builtin_tool_list, utils.py extract_tool_types,
// context.py call_tool, streaming_events.py) and entrypoints/mcp/tool_server.py; SGLang's
// entrypoints/openai/serving_responses.py and tool_server.py; the Responses API's tool
// union (openai-go responses.ToolUnionParam).
var Tools = []Tool{
	// vLLM with --tool-server: the MCP tool server named by server_label (by default
	// code_interpreter, container and web_search_preview map to its python, container and
	// browser tool servers). The stream announces mcp_call items.
	{Type: "mcp", Runner: Engine, Item: "mcp_call", Engines: "vLLM"},
	// vLLM and SGLang: the python tool (demo: a Docker sandbox; or an MCP server).
	{Type: "code_interpreter", Runner: Engine, Item: "code_interpreter_call", Engines: "vLLM, SGLang"},
	// vLLM and SGLang: the browser tool (search, open, find).
	{Type: "web_search_preview", Runner: Engine, Item: "web_search_call", Engines: "vLLM, SGLang"},
	{Type: "web_search_preview_2025_03_11", Runner: Engine, Item: "web_search_call", Engines: "vLLM, SGLang"},
	// vLLM: the container tool (exec in a stateful container); announced as an mcp_call.
	{Type: "container", Runner: Engine, Item: "mcp_call", Engines: "vLLM"},
	// Run by OpenAI's servers; no engine fencegate fronts runs them yet.
	{Type: "web_search", Runner: Engine, Item: "web_search_call"},
	{Type: "web_search_2025_08_26", Runner: Engine, Item: "web_search_call"},
	{Type: "file_search", Runner: Engine, Item: "file_search_call"},
	{Type: "image_generation", Runner: Engine, Item: "image_generation_call"},
	{Type: "programmatic_tool_calling", Runner: Engine},
	// shell runs on the server with a container environment, on the client without one
	// ("local"); tool_search runs on the server unless its execution is "client".
	{Type: "shell", Runner: Engine, Item: "shell_call"},
	{Type: "tool_search", Runner: Engine, Item: "tool_search_call"},
	// The client runs these: the call is output the client acts on.
	{Type: "function", Runner: Client, Item: "function_call"},
	{Type: "custom", Runner: Client, Item: "custom_tool_call"},
	{Type: "namespace", Runner: Client},
	{Type: "computer", Runner: Client, Item: "computer_call"},
	{Type: "computer_use_preview", Runner: Client, Item: "computer_call"},
	{Type: "local_shell", Runner: Client, Item: "local_shell_call"},
	{Type: "apply_patch", Runner: Client, Item: "apply_patch_call"},
}

// engineItems are the output item types that announce a call of an engine-run tool, and
// mcp_list_tools, the item with which an engine reports listing an MCP server's tools.
var engineItems = func() []string {
	items := []string{"mcp_list_tools"}
	for _, t := range Tools {
		if t.Runner == Engine && t.Item != "" && !contains(items, t.Item) {
			items = append(items, t.Item)
		}
	}
	return items
}()

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Lookup returns the table's row for a tool type.
func Lookup(typ string) (Tool, bool) {
	for _, t := range Tools {
		if t.Type == typ {
			return t, true
		}
	}
	return Tool{}, false
}

// EngineRun reports whether a tool declared with type typ runs on the engine. environment
// is a shell tool's environment.type and execution a tool_search tool's execution ("" when
// absent). A type the table does not know counts as engine-run: the gateway cannot tell who
// runs it, and the safe side is not to run a request twice that may have acted.
func EngineRun(typ, environment, execution string) bool {
	switch typ {
	case "shell":
		return environment != "" && environment != "local"
	case "tool_search":
		return execution != "client"
	}
	t, ok := Lookup(typ)
	return !ok || t.Runner == Engine
}

// AnnouncesEngineCall reports whether an output item of type item announces a call of a
// tool the engine runs (an mcp_call, a web_search_call, ...).
func AnnouncesEngineCall(item []byte) bool {
	for _, it := range engineItems {
		if string(item) == it {
			return true
		}
	}
	return false
}

// EngineCallEvent reports whether a Responses stream event type belongs to such an item:
// "response." followed by the item type and then "." or "_" (response.mcp_call.in_progress,
// response.mcp_call_arguments.delta, response.web_search_call.searching,
// response.code_interpreter_call_code.delta, ...).
func EngineCallEvent(typ []byte) bool {
	rest, ok := bytes.CutPrefix(typ, []byte("response."))
	if !ok {
		return false
	}
	for _, it := range engineItems {
		if len(rest) > len(it) && string(rest[:len(it)]) == it && (rest[len(it)] == '.' || rest[len(it)] == '_') {
			return true
		}
	}
	return false
}
