package gateway

import (
	"net/http"

	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/protocol"
	"github.com/fencegate/fencegate/internal/sse"
)

// protocolOf is the wire format of an endpoint's answers.
func protocolOf(ep openai.Endpoint) sse.Protocol {
	switch ep {
	case openai.Messages:
		return sse.Messages
	case openai.Responses:
		return sse.Responses
	}
	return sse.Completions
}

// protocolOfPath is the wire format of the answers on a request path: every error of a
// /v1/messages request, from authentication on, is in the Anthropic shape.
func protocolOfPath(path string) sse.Protocol {
	switch path {
	case "/v1/messages":
		return sse.Messages
	case "/v1/responses":
		return sse.Responses
	}
	return sse.Completions
}

// writeAPIError answers with e in p's error shape and e's status.
func writeAPIError(w http.ResponseWriter, p sse.Protocol, e *openai.Error) {
	if p == sse.Completions || p == sse.Responses {
		openai.WriteError(w, e)
		return
	}
	status := e.Status
	if status < 400 || status > 599 {
		status = http.StatusInternalServerError
	}
	h := w.Header()
	openai.SetRetryHeader(h, e)
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(protocol.ErrorBody(p, e), '\n'))
}

// writeError answers r with e in the error shape of r's API.
func writeError(w http.ResponseWriter, r *http.Request, e *openai.Error) {
	if a := accessOf(r); a != nil {
		a.errCode = e.Code
	}
	writeAPIError(w, protocolOfPath(r.URL.Path), e)
}
