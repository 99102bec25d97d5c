package protocol

import (
	"net/http"

	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/sse"
)

// Of is the wire format of an endpoint's answers.
func Of(ep openai.Endpoint) sse.Protocol {
	switch ep {
	case openai.Messages:
		return sse.Messages
	case openai.Responses:
		return sse.Responses
	}
	return sse.Completions
}

// WriteError answers with e in p's error shape (ErrorBody) and e's status.
func WriteError(w http.ResponseWriter, p sse.Protocol, e *openai.Error) {
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
	w.Write(append(ErrorBody(p, e), '\n'))
}
