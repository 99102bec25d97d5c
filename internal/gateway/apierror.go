package gateway

import (
	"net/http"

	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/protocol"
	"github.com/fencegate/fencegate/internal/sse"
)

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

// writeError answers r with e in the error shape of r's API.
func writeError(w http.ResponseWriter, r *http.Request, e *openai.Error) {
	if a := accessOf(r); a != nil {
		a.errCode = e.Code
	}
	protocol.WriteError(w, protocolOfPath(r.URL.Path), e)
}
