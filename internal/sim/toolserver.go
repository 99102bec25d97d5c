package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tool server, as vLLM's --tool-server (vllm/entrypoints/mcp/tool_server.py,
// MCPToolServer): the engine itself calls MCP servers for the tools a Responses request
// enables, inside the request, before the client sees any result. At start it connects to
// each server, initializes it and lists its tools, and keeps it under the name the server
// gives itself (serverInfo.name). Each request that calls a tool opens its own session
// (with an x-session-id header, vLLM's new_session), and when the request ends calls the
// server's cleanup_session tool, errors ignored, as vLLM's cleanup_session does.
//
// Server names vLLM gives a meaning (harmony's built-in tools, context.py call_tool):
//   - "python" runs code_interpreter: tool "python" with {"code": …};
//   - "browser" runs web_search_preview: tool "search" with {"query": …};
//   - "container" runs container: tool "exec" with {"cmd": […]}.
//
// An mcp tool whose server_label is code_interpreter, web_search_preview or container
// (vLLM's VLLM_GPT_OSS_SYSTEM_TOOL_MCP_LABELS) enables the same. Any other server_label
// that names one of the tool servers makes the sim call that server's first tool (or the
// first of allowed_tools): OpenAI's semantics of an mcp tool. vLLM today announces such a
// call (an mcp_call item) but runs only the three built-in servers; the sim runs it, which
// is harsher for a gateway, never kinder.
//
// A --tool-server entry is "host:port" (vLLM's form: the MCP SSE transport at
// http://host:port/sse) or an http(s):// URL (the streamable HTTP transport). vLLM's
// "demo" tool server (a Docker sandbox and a search API) is not simulated.

// toolServerTimeout bounds connecting to a tool server and listing its tools at start.
const toolServerTimeout = 10 * time.Second

// cleanupTool is the tool vLLM calls on every server a request used, when it ends.
const cleanupTool = "cleanup_session"

// mcpServer is one tool server the replica knows.
type mcpServer struct {
	name   string // serverInfo.name
	target string // as configured
	tools  []*mcp.Tool
}

// toolServers are the replica's tool servers by name; nil without --tool-server.
type toolServers struct {
	client  *http.Client
	servers map[string]*mcpServer
}

// connectToolServers connects to each configured server and lists its tools.
func connectToolServers(targets []string) (*toolServers, error) {
	if len(targets) == 0 {
		return nil, nil
	}
	ts := &toolServers{client: &http.Client{Transport: &http.Transport{Proxy: nil}}, servers: map[string]*mcpServer{}}
	for _, t := range targets {
		ctx, cancel := context.WithTimeout(context.Background(), toolServerTimeout)
		srv, err := ts.describe(ctx, t)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("sim: tool server %s: %w", t, err)
		}
		if _, dup := ts.servers[srv.name]; dup {
			// vLLM: "Tool %s already exists. Ignoring duplicate tool server".
			continue
		}
		ts.servers[srv.name] = srv
	}
	return ts, nil
}

// describe initializes target and lists its tools.
func (ts *toolServers) describe(ctx context.Context, target string) (*mcpServer, error) {
	cs, err := ts.connect(ctx, target, "", nil)
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	info := cs.InitializeResult()
	if info == nil || info.ServerInfo == nil || info.ServerInfo.Name == "" {
		return nil, errors.New("the server did not name itself (serverInfo.name)")
	}
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("listing its tools: %w", err)
	}
	srv := &mcpServer{name: info.ServerInfo.Name, target: target, tools: list.Tools}
	return srv, nil
}

// connect opens an MCP session on target; session, when set, goes in x-session-id, and
// headers in every request of the session.
func (ts *toolServers) connect(ctx context.Context, target, session string, headers map[string]string) (*mcp.ClientSession, error) {
	httpClient := ts.client
	if session != "" || len(headers) > 0 {
		httpClient = &http.Client{Transport: sessionHeader{id: session, headers: headers, next: ts.client.Transport}}
	}
	var transport mcp.Transport
	if strings.Contains(target, "://") {
		// No reconnection: a call is never resent behind the engine's back.
		transport = &mcp.StreamableClientTransport{Endpoint: target, HTTPClient: httpClient, MaxRetries: -1, DisableStandaloneSSE: true}
	} else {
		transport = &mcp.SSEClientTransport{Endpoint: "http://" + target + "/sse", HTTPClient: httpClient}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "fencegate-sim", Version: DefaultVersion}, nil)
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return nil, fmt.Errorf("connecting: %w", err)
	}
	return cs, nil
}

// sessionHeader adds vLLM's x-session-id, and the request's mcp tool headers, to every
// request of a session.
type sessionHeader struct {
	id      string
	headers map[string]string
	next    http.RoundTripper
}

func (h sessionHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	if h.id != "" {
		r.Header.Set("X-Session-Id", h.id)
	}
	return h.next.RoundTrip(r)
}

// server returns the tool server named name, or nil.
func (ts *toolServers) server(name string) *mcpServer {
	if ts == nil {
		return nil
	}
	return ts.servers[name]
}

// firstTool is the tool of s an mcp tool calls: the first of allowed (when given) that s
// has, else s's first tool by name; cleanup_session is never one.
func (s *mcpServer) firstTool(allowed []string) *mcp.Tool {
	tools := slices.Clone(s.tools)
	slices.SortFunc(tools, func(a, b *mcp.Tool) int { return strings.Compare(a.Name, b.Name) })
	for _, t := range tools {
		if t.Name == cleanupTool || (len(allowed) > 0 && !slices.Contains(allowed, t.Name)) {
			continue
		}
		return t
	}
	return nil
}

// toolSession is one request's session with one tool server.
type toolSession struct {
	server *mcpServer
	cs     *mcp.ClientSession
	called bool
}

// openSession opens the request's session with s, as vLLM's new_session.
func (ts *toolServers) openSession(ctx context.Context, s *mcpServer, requestID string, headers map[string]string) (*toolSession, error) {
	cs, err := ts.connect(ctx, s.target, requestID, headers)
	if err != nil {
		return nil, err
	}
	return &toolSession{server: s, cs: cs}, nil
}

// call runs tool with args and returns the text of its result, as vLLM's call_tool reads
// result.content[0].text.
func (t *toolSession) call(ctx context.Context, tool string, args json.RawMessage) (string, error) {
	var arguments map[string]any
	if err := json.Unmarshal(args, &arguments); err != nil {
		return "", fmt.Errorf("tool arguments %s: %w", args, err)
	}
	t.called = true
	res, err := t.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: arguments})
	if err != nil {
		return "", fmt.Errorf("calling %s on %s: %w", tool, t.server.name, err)
	}
	for _, c := range res.Content {
		if text, ok := c.(*mcp.TextContent); ok {
			return text.Text, nil
		}
	}
	return "", nil
}

// close ends the session; clean says the request ended in the replica's life (not in a
// crash), so the server's cleanup_session is called first, as vLLM does on exit.
func (t *toolSession) close(clean bool) {
	if clean && t.called {
		ctx, cancel := context.WithTimeout(context.Background(), toolServerTimeout)
		_, _ = t.cs.CallTool(ctx, &mcp.CallToolParams{Name: cleanupTool, Arguments: map[string]any{}}) // vLLM suppresses its errors
		cancel()
	}
	_ = t.cs.Close()
}
