package gateway

import (
	"net/http"
	"net/http/pprof"
)

// route is one endpoint: its pattern (as http.ServeMux reads it), what it asks of its
// caller, and which listeners serve it. Every endpoint is in routes, so none can be added
// without deciding who may call it (the table test in roles_test.go holds each to it).
type route struct {
	pattern string
	access  access
	// operator routes are served on the admin listener, or on the one listener when there
	// is no admin listener; the others (the API) on the public listener.
	operator bool
	// adminOnly routes are served on the admin listener alone (pprof).
	adminOnly bool
	// bare routes are served without a request id and the client write deadline (pprof's
	// profiles run longer than any write deadline).
	bare    bool
	handler http.HandlerFunc
}

// servedOn reports whether listener on serves the route.
func (rt route) servedOn(on listener) bool {
	switch {
	case rt.pattern == "GET /healthz":
		return true
	case rt.adminOnly:
		return on == listenerAdmin
	case rt.operator:
		return on != listenerAPI
	}
	return on != listenerAdmin
}

// routes lists every endpoint of the gateway.
func (s *Server) routes() []route {
	return []route{
		{pattern: "POST /v1/chat/completions", access: accessAPI, handler: s.handleChat},
		{pattern: "POST /v1/completions", access: accessAPI, handler: s.handleCompletions},
		{pattern: "POST /v1/messages", access: accessAPI, handler: s.handleMessages},
		{pattern: "POST /v1/responses", access: accessAPI, handler: s.handleResponses},
		{pattern: "POST /v1/embeddings", access: accessAPI, handler: s.handleEmbeddings},
		{pattern: "GET /v1/models", access: accessAPI, handler: s.handleModels},
		{pattern: "GET /v1/requests/{id}", access: accessAPI, handler: s.handleGetRequest},
		{pattern: "GET /healthz", access: accessOpen, handler: s.handleHealthz},
		{pattern: "GET /readyz", access: accessProbe, operator: true, handler: s.handleReadyz},
		{pattern: "GET /metrics", access: accessMetrics, operator: true, handler: s.metrics.handler().ServeHTTP},
		{pattern: "POST /admin/replicas/{model}/{replica}", access: accessAdmin, operator: true, handler: s.handleReplicaState},
		{pattern: "POST /admin/refresh", access: accessAdmin, operator: true, handler: s.handleRefresh},
		{pattern: "POST /admin/reload", access: accessAdmin, operator: true, handler: s.handleReload},
		{pattern: "GET /admin/requests/{id}/trace", access: accessAdmin, operator: true, handler: s.handleRequestTrace},
		{pattern: "GET /ui/{$}", access: accessConsole, operator: true, handler: s.handleConsoleOverview},
		{pattern: "GET /ui/requests", access: accessConsole, operator: true, handler: s.handleConsoleRequests},
		{pattern: "GET /ui/requests/{id}", access: accessConsole, operator: true, handler: s.handleConsoleRequest},
		{pattern: "GET /ui/requests/{id}/trace", access: accessConsole, operator: true, handler: s.handleConsoleTrace},
		{pattern: "/debug/pprof/", access: accessAdmin, adminOnly: true, bare: true, handler: pprof.Index},
		{pattern: "/debug/pprof/cmdline", access: accessAdmin, adminOnly: true, bare: true, handler: pprof.Cmdline},
		{pattern: "/debug/pprof/profile", access: accessAdmin, adminOnly: true, bare: true, handler: pprof.Profile},
		{pattern: "/debug/pprof/symbol", access: accessAdmin, adminOnly: true, bare: true, handler: pprof.Symbol},
		{pattern: "/debug/pprof/trace", access: accessAdmin, adminOnly: true, bare: true, handler: pprof.Trace},
	}
}
