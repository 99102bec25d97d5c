package agent

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/fencegate/fencegate/internal/upstream"
	"github.com/tidwall/gjson"
)

// engineDialTimeout bounds connecting to the engine, which runs on the same
// host or next to it: a dial that takes longer means the engine is down.
const engineDialTimeout = 5 * time.Second

// newEngineClient returns the client of fenced data requests: upstream's
// HTTP/1.1 client, with keep-alive connections pooled per engine. It keeps
// the abort exact (docs/design.md §6): a response is read in the handler's
// goroutine straight from its connection, and one closed before its end, or
// whose context ends, closes that connection and no other, at once — so the
// engine sees the request abandoned. A connection returns to the pool only
// after a response read to its end. The client never resends a request.
func newEngineClient() (*upstream.Client, error) {
	return upstream.New(upstream.Options{DialTimeout: engineDialTimeout})
}

// callEngine sends the request to the engine and reads the response's status
// and header. When ctx ends (the attempt is aborted or finished) the
// connection is closed, which unblocks any read. The caller must Close the
// response.
//
// A streamed request to a generic engine is sent with "Connection: close"
// and its connection never pooled: llama.cpp's server, a generic engine to
// the agent, closes the connection after every streamed answer while offering
// keep-alive, and a request written on it before that close is read would
// fail having reached no engine, or one that then died, which no one can tell
// apart (docs/design.md §3; the gateway does the same for llama.cpp). vLLM and
// SGLang keep their connections.
func (a *Agent) callEngine(ctx context.Context, r *http.Request, body []byte) (*upstream.Response, error) {
	h := make(http.Header, len(r.Header))
	copyRequestHeaders(h, r.Header)
	req := &upstream.Request{
		Method: r.Method,
		Base:   a.engineBase,
		Path:   a.enginePathFor(r.URL),
		Header: h,
		Body:   body,
		Close:  a.cfg.EngineKind == KindGeneric && gjson.GetBytes(body, "stream").Bool(),
	}
	resp, err := a.engineClient.Do(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("engine at %s: %w", a.engineBase, err)
	}
	return resp, nil
}

// enginePathFor is the origin-form target of a request on the agent at the
// engine: the engine's base path joined with the request's path, and the
// request's query.
func (a *Agent) enginePathFor(u *url.URL) string {
	return a.engineURLFor(u).RequestURI()
}

// engineURLFor maps a request URL on the agent to the engine: the engine's
// base path joined with the request's path, and the request's query.
func (a *Agent) engineURLFor(u *url.URL) *url.URL {
	target := *a.engine
	target.Path = strings.TrimSuffix(a.engine.Path, "/") + u.Path
	target.RawPath = ""
	target.RawQuery = u.RawQuery
	return &target
}
