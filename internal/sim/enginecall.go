package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Engine-run tools: a Responses request whose tools the replica's tool servers serve
// (toolserver.go) makes one call of such a tool before it answers, as vLLM's gpt-oss
// (harmony) path does (serving.py _generate_with_builtin_tools): the model writes the call,
// the engine runs it on the tool server, then the model writes the answer. The client sees
// the call announced in the stream (streaming_events.py) or listed in the whole answer's
// output (harmony.py harmony_to_response_output), never before the engine ran it, and
// never its result. The fault point tool:N fires right after the engine's Nth call returned.
//
// What the sim simplifies: the model always calls the first tool it can run, once; the
// call's tokens count in usage.output_tokens but not in computed:K or sent:K, which number
// the answer's tokens; the answer does not depend on the tool's result.

// engineCallKind is how vLLM announces a call in a stream.
type engineCallKind int

const (
	// callCode: recipient "python" (code_interpreter): a code_interpreter_call item whose
	// code streams as response.code_interpreter_call_code.delta.
	callCode engineCallKind = iota + 1
	// callBrowser: recipient "browser.search" (web_search_preview): vLLM streams the
	// arguments as an mcp_call (its recipient is not "functions."), then announces the
	// web_search_call at once (emit_browser_tool_events) and completes the mcp_call.
	callBrowser
	// callMCP: recipient "<server>.<tool>" (container, an mcp tool): an mcp_call item whose
	// name and server_label are both the recipient (_resolve_mcp_name_label).
	callMCP
)

// engineToolDecl is one tool of a Responses request that an engine may run.
type engineToolDecl struct {
	typ         string
	serverLabel string
	allowed     []string
	headers     map[string]string // an mcp tool's headers, which vLLM sends its tool server
}

// enginePlan is the call a request will make: which server and tool, and how it shows.
type enginePlan struct {
	kind    engineCallKind
	server  *mcpServer
	tool    string
	headers map[string]string
}

// builtinServers maps the built-in tool types to the tool server vLLM runs them on.
var builtinServers = map[string]string{
	"code_interpreter":              "python",
	"web_search_preview":            "browser",
	"web_search_preview_2025_03_11": "browser",
	"container":                     "container",
}

// engineToolDecls reads the engine-run tools out of a Responses request's tools.
func engineToolDecls(items []json.RawMessage) []engineToolDecl {
	var decls []engineToolDecl
	for _, it := range items {
		var t struct {
			Type         string            `json:"type"`
			ServerLabel  string            `json:"server_label"`
			AllowedTools json.RawMessage   `json:"allowed_tools"`
			Headers      map[string]string `json:"headers"`
		}
		if json.Unmarshal(it, &t) != nil {
			continue
		}
		if _, builtin := builtinServers[t.Type]; !builtin && t.Type != "mcp" {
			continue
		}
		d := engineToolDecl{typ: t.Type, serverLabel: t.ServerLabel, headers: t.Headers}
		// allowed_tools: a list of names, or {"tool_names": [...]}; "*" allows all.
		var names []string
		if json.Unmarshal(t.AllowedTools, &names) != nil {
			var filter struct {
				ToolNames []string `json:"tool_names"`
			}
			_ = json.Unmarshal(t.AllowedTools, &filter)
			names = filter.ToolNames
		}
		for _, n := range names {
			if n == "*" {
				names = nil
				break
			}
		}
		d.allowed = names
		decls = append(decls, d)
	}
	return decls
}

// planEngineCall picks the call a request makes: the first of its engine-run tools that
// one of the replica's tool servers serves. None when tool_choice is "none", or no server
// serves them (vLLM then gives the model no such tool). The call's session carries the
// headers of the request's mcp tool for that server, as vLLM's init_tool_sessions sends.
func (s *Server) planEngineCall(decls []engineToolDecl, toolChoice json.RawMessage) *enginePlan {
	p := s.pickEngineCall(decls, toolChoice)
	if p == nil {
		return nil
	}
	for _, d := range decls {
		if d.typ == "mcp" && (d.serverLabel == p.server.name || builtinServers[d.serverLabel] == p.server.name) {
			p.headers = d.headers
		}
	}
	return p
}

func (s *Server) pickEngineCall(decls []engineToolDecl, toolChoice json.RawMessage) *enginePlan {
	if s.tools == nil || string(toolChoice) == `"none"` {
		return nil
	}
	for _, d := range decls {
		name := builtinServers[d.typ]
		if d.typ == "mcp" {
			name = builtinServers[d.serverLabel]
			if name == "" {
				name = d.serverLabel
			}
		}
		srv := s.tools.server(name)
		if srv == nil {
			continue
		}
		switch name {
		case "python":
			return &enginePlan{kind: callCode, server: srv, tool: "python"}
		case "browser":
			return &enginePlan{kind: callBrowser, server: srv, tool: "search"}
		case "container":
			return &enginePlan{kind: callMCP, server: srv, tool: "exec"}
		}
		if t := srv.firstTool(d.allowed); t != nil {
			return &enginePlan{kind: callMCP, server: srv, tool: t.Name}
		}
	}
	return nil
}

// engineCall is the call as the model wrote it, and what came of it.
type engineCall struct {
	*enginePlan
	recipient string          // harmony's recipient of the call
	args      json.RawMessage // the MCP call's arguments
	text      string          // what the model wrote: the code, or the arguments JSON
	pieces    [][]byte        // text cut into tokens, each JSON-escaped
	ran       bool            // the tool server answered
}

// newEngineCall writes plan's call with gen, deterministic as any output text.
func newEngineCall(plan *enginePlan, gen generator) *engineCall {
	c := &engineCall{enginePlan: plan}
	r := mix64(gen.key ^ 0x7a3b9c1d5e2f4a6b)
	words := strings.TrimSpace(vocabulary[r%uint64(len(vocabulary))] + vocabulary[(r>>8)%uint64(len(vocabulary))])
	var args []byte
	switch plan.kind {
	case callCode:
		c.recipient = "python"
		c.text = "print(" + string(appendPyString(nil, words)) + ")"
		args, _ = json.Marshal(map[string]string{"code": c.text})
	case callBrowser:
		c.recipient = "browser.search"
		args = appendPyString([]byte(`{"query": `), words)
		args = append(args, '}')
	default:
		c.recipient = plan.server.name + "." + plan.tool
		if plan.tool == "exec" && plan.server.name == "container" {
			args = appendPyString([]byte(`{"cmd": ["echo", `), words)
			args = append(args, "]}"...)
		} else {
			var schema json.RawMessage
			for _, t := range plan.server.tools {
				if t.Name == plan.tool {
					schema, _ = json.Marshal(t.InputSchema)
				}
			}
			args = []byte(toolArguments(schema, gen))
		}
	}
	if c.text == "" {
		c.text = string(args)
	}
	c.args = args
	for _, p := range argumentPieces(c.text) {
		escaped, _ := json.Marshal(p)
		c.pieces = append(c.pieces, escaped[1:len(escaped)-1])
	}
	return c
}

// escapedText is the whole text JSON-escaped, without quotes.
func (c *engineCall) escapedText() []byte {
	var b []byte
	for _, p := range c.pieces {
		b = append(b, p...)
	}
	return b
}

// engineTurn is the turn in which the model writes the call and the engine runs it. A
// stream announces the call as vLLM does; then the engine calls the tool server, and the
// tool:N faults fire. It reports false when the request ended.
func (g *generation) engineTurn() bool {
	c := newEngineCall(g.spec.engine, g.seqs[0].gen)
	g.call = c
	w, _ := g.out.(*responsesWire)
	for i, piece := range c.pieces {
		if !g.pause(g.s.cfg.DecodePerToken) {
			return false
		}
		g.callTokens++
		if w == nil {
			continue
		}
		if i == 0 {
			w.callStart(c)
		}
		w.callDelta(c, piece)
		if !g.write() {
			return false
		}
	}
	if w != nil {
		w.callDone(c)
		if !g.write() {
			return false
		}
	}
	session, err := g.s.tools.openSession(g.ctx, c.server, g.rec.ID, c.headers)
	if err == nil {
		g.session = session
		_, err = session.call(g.ctx, c.tool, c.args)
	}
	if err != nil {
		if g.ctx.Err() != nil {
			g.endByContext()
			return false
		}
		// vLLM lets the tool's exception out of the generator: a 500 before a stream's
		// headers, a cut connection after them.
		g.failAt(apiError{status: http.StatusInternalServerError, message: fmt.Sprintf("tool server %s: %v", c.server.name, err)}, false)
		return false
	}
	c.ran = true
	g.s.book.update(g.rec, func(r *Record) { r.ToolCalls++ })
	if w != nil {
		w.index++ // the answer is the next output item
	}
	return !g.fire(pointTool, 1)
}

// closeToolSession ends the request's tool session, with vLLM's cleanup_session unless the
// replica died.
func (g *generation) closeToolSession() {
	if g.session != nil {
		g.session.close(!replicaDown(g.ctx))
	}
}

// outputItem is the call as the whole answer lists it (harmony_to_response_output): the
// browser's as a web_search_call with vLLM's "cursor:" query, the others as an mcp_call
// whose server_label and name come from the recipient (python's server_label is
// code_interpreter). vLLM does not put the tool's output in it.
func (c *engineCall) outputItem() json.RawMessage {
	if c.kind == callBrowser {
		var args struct {
			Query string `json:"query"`
		}
		_ = json.Unmarshal(c.args, &args)
		b := []byte(`{"id":"ws_` + randomHex() + `","action":{"query":`)
		b = append(b, jsonText("cursor:"+args.Query)...)
		return append(b, `,"type":"search","sources":null},"status":"completed","type":"web_search_call"}`...)
	}
	label, name := "code_interpreter", "python"
	if c.kind == callMCP {
		label, name = c.server.name, c.tool
	}
	return mcpCallItem("mcp_"+randomHex(), c.text, name, label, "completed")
}

// mcpCallItem is openai-python's McpCall dumped with its nulls.
func mcpCallItem(id, arguments, name, label, status string) json.RawMessage {
	b := []byte(`{"id":"` + id + `","arguments":`)
	b = append(b, jsonText(arguments)...)
	b = append(b, `,"name":`...)
	b = append(b, jsonText(name)...)
	b = append(b, `,"server_label":`...)
	b = append(b, jsonText(label)...)
	b = append(b, `,"type":"mcp_call","approval_request_id":null,"error":null,"output":null,"status":"`...)
	b = append(b, status...)
	return append(b, `"}`...)
}

// The stream's events around a call (streaming_events.py). Each event's fields are in
// openai-python's model order, sequence_number and type last.

// callStart opens the call's item with its first token.
func (w *responsesWire) callStart(c *engineCall) {
	if c.kind == callCode {
		w.callID = "tool_" + randomHex()
		w.event("response.output_item.added")
		w.buf = append(w.buf, `{"item":{"type":"code_interpreter_call","id":"`+w.callID+`","code":null,"container_id":"auto","outputs":null,"status":"in_progress"},`...)
		w.index0()
		w.tail("response.output_item.added")
		w.itemEvent("response.code_interpreter_call.in_progress")
		return
	}
	w.callID = "mcp_" + randomHex()
	w.event("response.output_item.added")
	w.buf = append(w.buf, `{"item":`...)
	w.buf = append(w.buf, mcpCallItem(w.callID, "", c.recipient, c.recipient, "in_progress")...)
	w.buf = append(w.buf, ',')
	w.index0()
	w.tail("response.output_item.added")
	w.itemEvent("response.mcp_call.in_progress")
}

// callDelta streams one token of the call.
func (w *responsesWire) callDelta(c *engineCall, piece []byte) {
	typ := "response.mcp_call_arguments.delta"
	if c.kind == callCode {
		typ = "response.code_interpreter_call_code.delta"
	}
	w.event(typ)
	w.buf = append(w.buf, `{"delta":"`...)
	w.buf = append(w.buf, piece...)
	w.buf = append(w.buf, `","item_id":"`+w.callID+`",`...)
	w.index0()
	w.tail(typ)
}

// callDone is the action turn's events, sent before the engine runs the call.
func (w *responsesWire) callDone(c *engineCall) {
	text := c.escapedText()
	switch c.kind {
	case callCode:
		w.event("response.code_interpreter_call_code.done")
		w.buf = append(w.buf, `{"code":"`...)
		w.buf = append(w.buf, text...)
		w.buf = append(w.buf, `","item_id":"`+w.callID+`",`...)
		w.index0()
		w.tail("response.code_interpreter_call_code.done")
		w.itemEvent("response.code_interpreter_call.interpreting")
		w.itemEvent("response.code_interpreter_call.completed")
		w.event("response.output_item.done")
		w.buf = append(w.buf, `{"item":{"type":"code_interpreter_call","id":"`+w.callID+`","code":"`...)
		w.buf = append(w.buf, text...)
		w.buf = append(w.buf, `","container_id":"auto","outputs":[],"status":"completed"},`...)
		w.index0()
		w.tail("response.output_item.done")
		return
	case callBrowser:
		// emit_browser_tool_events: a fresh item id, then the mcp completion events of
		// the same turn name it too.
		var args struct {
			Query string `json:"query"`
		}
		_ = json.Unmarshal(c.args, &args)
		w.callID = "tool_" + randomHex()
		action := append(append([]byte(`{"query":`), jsonText(args.Query)...), `,"type":"search","sources":null}`...)
		for _, status := range []string{"in_progress", "completed"} {
			typ := "response.output_item.added"
			if status == "completed" {
				w.itemEvent("response.web_search_call.completed")
				typ = "response.output_item.done"
			}
			w.event(typ)
			w.buf = append(w.buf, `{"item":{"id":"`+w.callID+`","action":`...)
			w.buf = append(w.buf, action...)
			w.buf = append(w.buf, `,"status":"`+status+`","type":"web_search_call"},`...)
			w.index0()
			w.tail(typ)
			if status == "in_progress" {
				w.itemEvent("response.web_search_call.in_progress")
				w.itemEvent("response.web_search_call.searching")
			}
		}
	}
	// emit_mcp_completion_events: ResponseMcpCallArgumentsDoneEvent keeps vLLM's extra
	// name after its own fields.
	w.event("response.mcp_call_arguments.done")
	w.buf = append(w.buf, `{"arguments":"`...)
	w.buf = append(w.buf, text...)
	w.buf = append(w.buf, `","item_id":"`+w.callID+`",`...)
	w.index0()
	w.buf = append(w.buf, `,"sequence_number":`...)
	w.buf = strconv.AppendInt(w.buf, int64(w.seq), 10)
	w.buf = append(w.buf, `,"type":"response.mcp_call_arguments.done","name":`...)
	w.buf = append(w.buf, jsonText(c.recipient)...)
	w.buf = append(w.buf, "}\n\n"...)
	w.seq++
	w.itemEvent("response.mcp_call.completed")
	w.event("response.output_item.done")
	w.buf = append(w.buf, `{"item":`...)
	w.buf = append(w.buf, mcpCallItem(w.callID, c.text, c.recipient, c.recipient, "completed")...)
	w.buf = append(w.buf, ',')
	w.index0()
	w.tail("response.output_item.done")
}

// itemEvent is an event of the open call item with no other field (in_progress,
// searching, interpreting, completed).
func (w *responsesWire) itemEvent(typ string) {
	w.event(typ)
	w.buf = append(w.buf, `{"item_id":"`+w.callID+`",`...)
	w.index0()
	w.tail(typ)
}

// index0 appends the open item's "output_index".
func (w *responsesWire) index0() {
	w.buf = append(w.buf, `"output_index":`...)
	w.buf = strconv.AppendInt(w.buf, int64(w.index), 10)
}
