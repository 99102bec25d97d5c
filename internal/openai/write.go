package openai

import "net/http"

// WriteError writes e as a complete JSON error response: Content-Type
// application/json, status e.Status (500 when unset) and the {"error":{...}}
// body. It is for errors before any byte of the response was sent; once a
// stream has started, the error goes out as a final SSE event instead.
func WriteError(w http.ResponseWriter, e *Error) {
	if e == nil {
		e = &Error{Message: "internal error", Type: TypeServer, Code: "internal_error"}
	}
	status := e.Status
	if status < 400 || status > 599 {
		status = http.StatusInternalServerError
	}
	body := e.AppendJSON(make([]byte, 0, 256))
	body = append(body, '\n')
	h := w.Header()
	SetRetryHeader(h, e)
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body) // the client may be gone; there is no one left to tell
}

// SetRetryHeader tells the official SDKs not to send again a request whose error says
// retryable: false. They retry every status of 500 or more (and 408, 409, 429) on their
// own, twice by default, as a new request without an Idempotency-Key, unless the response
// carries "x-should-retry: false", which both OpenAI's and Anthropic's SDKs obey. Without
// it, a whole answer that ended 502 after an engine-run tool acted would be run again by
// the client library, and the tool with it, though the gateway never reran it.
func SetRetryHeader(h http.Header, e *Error) {
	if e.Retryable != nil && !*e.Retryable {
		h.Set("X-Should-Retry", "false")
	}
}
