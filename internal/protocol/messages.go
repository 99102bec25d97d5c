package protocol

import (
	"net/http"

	"github.com/fencegate/fencegate/internal/openai"
)

// messagesType maps an error to the Anthropic error types the SDKs know, by status: they
// pick their exception class from the status and read the type.
func messagesType(e *openai.Error) string {
	switch e.Status {
	case http.StatusBadRequest, http.StatusConflict, http.StatusUnprocessableEntity:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable, 529:
		return "overloaded_error"
	}
	return "api_error"
}

// messagesError appends {"type":"error","error":{"type":…,"message":…,"code":…,…}}: the
// Anthropic error shape, with fencegate's code and fields inside the error object.
func messagesError(dst []byte, e *openai.Error) []byte {
	dst = append(dst, `{"type":"error","error":{`...)
	dst = e.AppendFields(dst, messagesType(e))
	return append(dst, "}}"...)
}

// messagesInterruption is `event: error` with the Anthropic error shape, which the
// Anthropic SDKs raise; an interruption is an api_error whatever its HTTP status would have
// been (the headers already said 200).
func messagesInterruption(e *openai.Error) []byte {
	body := append([]byte(`{"type":"error","error":{`), e.AppendFields(nil, "api_error")...)
	body = append(body, "}}"...)
	return appendEvent(nil, "error", body)
}
