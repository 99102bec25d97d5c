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
