package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ToolServer is a real MCP server on loopback, built with the official SDK, whose tools
// count their calls: the other end of a replica's --tool-server in tests, the demo and the
// chaos tool, standing for the ticket system or sandbox that a duplicate call would hit
// twice. It serves the streamable HTTP transport at URL() and, for vLLM's host:port form,
// the SSE transport at /sse. Each tool answers with a short text; "cleanup_session" (which
// vLLM calls when a request that used the server ends) is served and counted apart.
type ToolServer struct {
	name  string
	ln    net.Listener
	http  *http.Server
	mu    sync.Mutex
	calls []ToolCall
}

// ToolCall is one call a ToolServer received.
type ToolCall struct {
	Tool string
	// Session is the caller's x-session-id (vLLM sends its request id).
	Session string
	// Header is the HTTP header of the call, with the headers the request's mcp tool
	// declared (vLLM forwards them).
	Header    http.Header
	Arguments json.RawMessage
	At        time.Time
}

// Tool names the tool servers vLLM gives a meaning run (toolserver.go).
const (
	ToolServerPython    = "python"    // tool "python": code_interpreter
	ToolServerBrowser   = "browser"   // tool "search": web_search_preview
	ToolServerContainer = "container" // tool "exec": container
)

// StartToolServer serves an MCP server named name on 127.0.0.1 with the given tools; with
// none, the tool vLLM calls on a server of that name (python, search or exec), else
// "create_ticket".
func StartToolServer(name string, tools ...string) (*ToolServer, error) {
	if len(tools) == 0 {
		switch name {
		case ToolServerPython:
			tools = []string{"python"}
		case ToolServerBrowser:
			tools = []string{"search"}
		case ToolServerContainer:
			tools = []string{"exec"}
		default:
			tools = []string{"create_ticket"}
		}
	}
	ts := &ToolServer{name: name}
	schema := map[string]any{"type": "object", "properties": map[string]any{"title": map[string]any{"type": "string"}}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("sim: tool server %s: %w", name, err)
	}
	// A server per session, which knows the header of the request that opened it: the SSE
	// transport gives a tool no HTTP header of its own.
	get := func(r *http.Request) *mcp.Server {
		srv := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1.0.0"}, nil)
		for _, t := range append(slices.Clone(tools), cleanupTool) {
			srv.AddTool(&mcp.Tool{Name: t, Description: "counts its calls", InputSchema: schema}, ts.handler(t, r.Header.Clone()))
		}
		return srv
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(get, nil))
	sse := mcp.NewSSEHandler(get, nil)
	mux.Handle("/sse", sse)
	mux.Handle("/sse/", sse)
	ts.ln, ts.http = ln, &http.Server{Handler: mux, ReadHeaderTimeout: time.Minute}
	go func() { _ = ts.http.Serve(ln) }() // ends at Close
	return ts, nil
}

func (ts *ToolServer) handler(tool string, sessionHeader http.Header) mcp.ToolHandler {
	return func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		c := ToolCall{Tool: tool, At: time.Now(), Header: sessionHeader}
		if req.Params != nil {
			c.Arguments = append(json.RawMessage(nil), req.Params.Arguments...)
		}
		if req.Extra != nil && req.Extra.Header != nil {
			c.Header = req.Extra.Header.Clone()
		}
		c.Session = c.Header.Get("X-Session-Id")
		ts.mu.Lock()
		ts.calls = append(ts.calls, c)
		n := 0
		for _, x := range ts.calls {
			if x.Tool == tool {
				n++
			}
		}
		ts.mu.Unlock()
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s.%s call %d done", ts.name, tool, n)}}}, nil
	}
}

// Name is the name the server gives itself (serverInfo.name).
func (ts *ToolServer) Name() string { return ts.name }

// URL is the streamable HTTP endpoint, for --tool-server.
func (ts *ToolServer) URL() string { return "http://" + ts.ln.Addr().String() + "/mcp" }

// HostPort is vLLM's form of --tool-server: the SSE transport at http://HostPort()/sse.
func (ts *ToolServer) HostPort() string { return ts.ln.Addr().String() }

// Calls returns the calls received so far, cleanup_session included, in order.
func (ts *ToolServer) Calls() []ToolCall {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]ToolCall(nil), ts.calls...)
}

// Count is the number of calls of tool so far.
func (ts *ToolServer) Count(tool string) int {
	n := 0
	for _, c := range ts.Calls() {
		if c.Tool == tool {
			n++
		}
	}
	return n
}

// Actions are the calls of the server's own tools (cleanup_session left out).
func (ts *ToolServer) Actions() []ToolCall {
	var out []ToolCall
	for _, c := range ts.Calls() {
		if c.Tool != cleanupTool {
			out = append(out, c)
		}
	}
	return out
}

// Close stops the server and closes its connections (an SSE session's stream stays open
// until then).
func (ts *ToolServer) Close() error {
	if err := ts.http.Close(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
