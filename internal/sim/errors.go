package sim

import (
	"encoding/json"
	"net/http"
	"strings"
)

// apiError is an error reply in the making: vLLM's shape is derived from it
// by errorJSON.
type apiError struct {
	status  int
	message string
	param   string // the offending request field; "" is written as null
	typ     string // the error type when it is not errorType(status)

	// plain marks an error vLLM's app-wide exception handlers answer
	// (request validation), which have the OpenAI shape on every
	// endpoint, the Anthropic Messages endpoint included.
	plain bool
}

// errType is the error's type as vLLM names it.
func (e apiError) errType() string {
	if e.typ != "" {
		return e.typ
	}
	return errorType(e.status)
}

// errorType names an HTTP status the way vLLM's error bodies do.
func errorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "BadRequestError"
	case http.StatusNotFound:
		return "NotFoundError"
	case http.StatusTooManyRequests:
		return "TooManyRequestsError"
	case http.StatusInternalServerError:
		return "InternalServerError"
	case http.StatusServiceUnavailable:
		return "ServiceUnavailableError"
	}
	return strings.ReplaceAll(http.StatusText(status), " ", "") + "Error"
}

// errorInfo is vLLM's ErrorInfo. Code is an integer, as vLLM sends it (the
// OpenAI API sends a string; the gateway normalises).
type errorInfo struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    int     `json:"code"`
}

// legacyError is the flat body of older vLLM versions.
type legacyError struct {
	Object  string  `json:"object"`
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    int     `json:"code"`
}

// errorJSON renders e as the replica's vLLM version would: the current
// {"error":{...}} shape, or the flat one when Config.LegacyErrors is set.
func (s *Server) errorJSON(e apiError) []byte {
	var param *string
	if e.param != "" {
		param = &e.param
	}
	var v any = struct {
		Error errorInfo `json:"error"`
	}{errorInfo{Message: e.message, Type: e.errType(), Param: param, Code: e.status}}
	if s.cfg.LegacyErrors {
		v = legacyError{Object: "error", Message: e.message, Type: e.errType(), Param: param, Code: e.status}
	}
	body, _ := json.Marshal(v) // plain strings and ints cannot fail to encode
	return body
}

// writeError sends e as a complete HTTP error response.
func (s *Server) writeError(w http.ResponseWriter, e apiError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	_, _ = w.Write(s.errorJSON(e)) // a client that left cannot be told anything
}
