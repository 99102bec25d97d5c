package agent

import (
	"encoding/json"
	"net/http"

	"github.com/fencegate/fencegate/internal/openai"
)

// writeError sends an OpenAI-shaped error with a type that fits status.
func writeError(w http.ResponseWriter, status int, code, message string) {
	typ := openai.TypeServer
	switch {
	case status == http.StatusUnauthorized:
		typ = openai.TypeAuthentication
	case status == http.StatusForbidden:
		typ = openai.TypePermission
	case status == http.StatusNotFound:
		typ = openai.TypeNotFound
	case status == http.StatusBadGateway:
		typ = openai.TypeUpstream
	case status < 500:
		typ = openai.TypeInvalidRequest
	}
	openai.WriteError(w, &openai.Error{Status: status, Code: code, Type: typ, Message: message})
}

// writeJSON sends v as a JSON response.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal_error", "encoding the reply: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n')) // a client that left cannot be told anything
}
