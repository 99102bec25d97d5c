package openai

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/fencegate/fencegate/internal/enginetool"
)

// EngineTools are the tools of a request that an engine runs itself, inside the request
// (internal/enginetool, docs/design.md §5). Only the Responses API has them: no engine
// fencegate fronts (vLLM, SGLang, TGI, llama.cpp) runs a tool inside a chat completion, a
// text completion or a Messages request.
type EngineTools struct {
	// Types are the engine-run tool types, each once, in the order of tools[].
	Types []string
	// MCPLabels are the server_label of each mcp tool, each once.
	MCPLabels []string
	// onlyMCP: every engine-run tool is an mcp tool.
	onlyMCP bool
}

// Any reports whether the request lets an engine run tools: once its body may have reached
// one, the engine may have acted.
func (t EngineTools) Any() bool { return len(t.Types) > 0 }

// Idempotent reports whether every engine-run tool is an mcp tool of a server the operator
// declared idempotent (policy.idempotent_mcp_servers): running such a request twice is
// declared harmless.
func (t EngineTools) Idempotent(servers []string) bool {
	if !t.Any() || !t.onlyMCP {
		return false
	}
	for _, l := range t.MCPLabels {
		if !slices.Contains(servers, l) {
			return false
		}
	}
	return true
}

// parseResponsesTools validates a Responses request's tools (an array of objects, each with
// a string type; an mcp tool with a string server_label, as OpenAI requires) and finds the
// ones an engine runs. The gateway must know who runs each tool, so a tools member it
// cannot read is refused rather than forwarded.
func parseResponsesTools(fields Members) (EngineTools, *Error) {
	var et EngineTools
	raw, ok := fields.present("tools")
	if !ok {
		return et, nil
	}
	var items []json.RawMessage
	if kindOf(raw) != "an array" || json.Unmarshal(raw, &items) != nil {
		return et, typeError("tools", "an array of tool objects", raw)
	}
	et.onlyMCP = true
	for i, it := range items {
		param := fmt.Sprintf("tools[%d]", i)
		if kindOf(it) != "an object" {
			return et, typeError(param, "an object", it)
		}
		// The body was validated whole already; a tool definition is small, so its members
		// are listed rather than scanned for the few that matter.
		tool := objectMembers(it)
		typRaw, ok := tool.present("type")
		if !ok {
			return et, invalid(param+".type", "missing_required_parameter", fmt.Sprintf("Missing required parameter: '%s.type'.", param))
		}
		var typ, environment, execution string
		if json.Unmarshal(typRaw, &typ) != nil {
			return et, typeError(param+".type", "a string", typRaw)
		}
		if env, ok := tool.present("environment"); ok {
			var e struct {
				Type string `json:"type"`
			}
			if kindOf(env) != "an object" || json.Unmarshal(env, &e) != nil {
				return et, typeError(param+".environment", "an object", env)
			}
			environment = e.Type
		}
		if ex, ok := tool.present("execution"); ok && json.Unmarshal(ex, &execution) != nil {
			return et, typeError(param+".execution", "a string", ex)
		}
		if !enginetool.EngineRun(typ, environment, execution) {
			continue
		}
		if !slices.Contains(et.Types, typ) {
			et.Types = append(et.Types, typ)
		}
		if typ != "mcp" {
			et.onlyMCP = false
			continue
		}
		raw, ok := tool.present("server_label")
		if !ok {
			return et, invalid(param+".server_label", "missing_required_parameter", fmt.Sprintf("Missing required parameter: '%s.server_label'.", param))
		}
		var label string
		if json.Unmarshal(raw, &label) != nil || label == "" {
			return et, typeError(param+".server_label", "a non-empty string", raw)
		}
		if !slices.Contains(et.MCPLabels, label) {
			et.MCPLabels = append(et.MCPLabels, label)
		}
	}
	if !et.Any() {
		et.onlyMCP = false
	}
	return et, nil
}
