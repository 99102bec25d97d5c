package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxExcerpt bounds the part of a non-JSON engine body quoted in a message:
// enough for an error page's title and first line, not a whole page.
const maxExcerpt = 512

// NormalizeEngineError turns the error an engine sent (HTTP status and body)
// into the OpenAI shape with a string code and an OpenAI-style type. It
// understands vLLM's current and legacy bodies, SGLang's, TGI's, llama.cpp's,
// FastAPI's {"detail":...} (string or validation list), OpenAI's own, and
// falls back to an excerpt of a non-JSON body or the status text of an empty
// one. The engine's string code and OpenAI-style type are kept; otherwise type
// and code follow from the status (see defaultsFor).
//
// Status is the upstream status. For an error reported inside a 200 stream
// (status below 400) it is the engine's numeric code if it gave one in 4xx or
// 5xx, else 500.
func NormalizeEngineError(status int, body []byte) *Error {
	ee := parseEngineError(body)
	if status < 400 || status > 599 {
		status = http.StatusInternalServerError
		if ee.numCode >= 400 && ee.numCode <= 599 {
			status = ee.numCode
		}
	}
	// The status that decides type and code: TGI's error_type is more
	// precise than its status (a failed generation comes back as 424).
	kind := status
	if ee.hint != 0 {
		kind = ee.hint
	}
	if ee.message == "" {
		ee.message = statusMessage(status)
	}
	typ, code := defaultsFor(kind, ee.message, ee.typ)
	if knownTypes[ee.typ] {
		typ = ee.typ
	}
	if ee.code != "" {
		code = ee.code
	}
	return &Error{Message: ee.message, Type: typ, Param: ee.param, Code: code, Status: status}
}

// knownTypes are the OpenAI-style types an engine may send that clients
// already understand; anything else (vLLM's "BadRequestError", llama.cpp's
// "unavailable_error") is replaced by the type for the status.
var knownTypes = map[string]bool{
	TypeInvalidRequest: true,
	TypeAuthentication: true,
	TypePermission:     true,
	TypeNotFound:       true,
	TypeRateLimit:      true,
	TypeServer:         true,
}

// defaultsFor returns the type and code for an engine error of the given
// status. engineType is only consulted for llama.cpp's context-size type.
func defaultsFor(status int, message, engineType string) (typ, code string) {
	switch {
	case status == http.StatusNotFound:
		if strings.Contains(strings.ToLower(message), "model") {
			return TypeInvalidRequest, "model_not_found"
		}
		return TypeInvalidRequest, "not_found"
	case status == http.StatusTooManyRequests:
		return TypeRateLimit, "rate_limit_exceeded"
	case status == http.StatusUnauthorized:
		// The engine refused the gateway's credentials: a deployment
		// problem, not the client's key.
		return TypeAuthentication, "engine_unauthorized"
	case status == http.StatusForbidden:
		return TypePermission, "engine_forbidden"
	case status == http.StatusRequestEntityTooLarge:
		return TypeInvalidRequest, "request_too_large"
	case status == http.StatusServiceUnavailable:
		return TypeServer, "engine_overloaded"
	case status >= 500:
		return TypeServer, "engine_error"
	}
	if engineType == "exceed_context_size_error" || mentionsContextLimit(message) {
		return TypeInvalidRequest, "context_length_exceeded"
	}
	return TypeInvalidRequest, "invalid_request"
}

// mentionsContextLimit recognises the engines' "prompt too long" messages
// (vLLM: "maximum context length", llama.cpp: "context size").
func mentionsContextLimit(message string) bool {
	m := strings.ToLower(message)
	return strings.Contains(m, "context length") || strings.Contains(m, "context size") ||
		strings.Contains(m, "context window")
}

func statusMessage(status int) string {
	if text := http.StatusText(status); text != "" {
		return fmt.Sprintf("engine returned %d %s", status, text)
	}
	return fmt.Sprintf("engine returned status %d", status)
}

// engineError is what could be read from an engine's error body.
type engineError struct {
	message string
	typ     string
	param   string
	code    string // the engine's own string code
	numCode int    // the engine's numeric code (vLLM, llama.cpp), 0 if none
	hint    int    // a status implied by the body (TGI's error_type), 0 if none
}

func parseEngineError(body []byte) engineError {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		return engineError{}
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &top); err != nil {
		var s string
		if json.Unmarshal(trimmed, &s) == nil {
			return engineError{message: s}
		}
		return engineError{message: excerpt(trimmed)}
	}
	if raw, ok := top["error"]; ok && !isNull(raw) {
		if inner, ok := asObject(raw); ok {
			// {"error":{...}}: OpenAI, vLLM, SGLang, llama.cpp.
			return fromFields(inner)
		}
		// {"error":"...","error_type":"..."}: TGI, and vLLM's API key check.
		ee := engineError{message: asString(raw)}
		if ee.message == "" {
			ee.message = excerpt(raw)
		}
		ee.typ = asString(top["error_type"])
		ee.hint = tgiStatus[ee.typ]
		ee.typ = "" // TGI's types are not OpenAI types
		return ee
	}
	if asString(top["object"]) == "error" {
		return fromFields(top) // vLLM's legacy flat body
	}
	if raw, ok := top["detail"]; ok {
		return fromDetail(raw) // FastAPI
	}
	if msg := asString(top["message"]); msg != "" {
		return fromFields(top)
	}
	return engineError{message: excerpt(trimmed)}
}

// tgiStatus maps TGI's error_type to the status whose type and code fit it.
var tgiStatus = map[string]int{
	"validation":            http.StatusBadRequest,
	"tokenizer":             http.StatusBadRequest,
	"overloaded":            http.StatusTooManyRequests,
	"generation":            http.StatusInternalServerError,
	"incomplete_generation": http.StatusInternalServerError,
}

// fromFields reads message, type, param and code members.
func fromFields(obj map[string]json.RawMessage) engineError {
	ee := engineError{
		message: asString(obj["message"]),
		typ:     asString(obj["type"]),
		param:   asString(obj["param"]),
	}
	raw := bytes.TrimSpace(obj["code"])
	switch {
	case len(raw) > 0 && raw[0] == '"':
		ee.code = asString(raw)
	case len(raw) > 0:
		if n, err := strconv.Atoi(string(raw)); err == nil {
			ee.numCode = n
		}
	}
	return ee
}

// fromDetail reads FastAPI's detail: a string, or a list of validation
// errors {"loc":[...],"msg":"..."}.
func fromDetail(raw json.RawMessage) engineError {
	if s := asString(raw); s != "" {
		return engineError{message: s}
	}
	var items []struct {
		Loc []any  `json:"loc"`
		Msg string `json:"msg"`
	}
	if json.Unmarshal(raw, &items) != nil || len(items) == 0 {
		return engineError{message: excerpt(raw)}
	}
	var ee engineError
	var msg strings.Builder
	for i, it := range items {
		path := locPath(it.Loc)
		if i == 0 {
			ee.param = path
		}
		if i > 0 {
			msg.WriteString("; ")
		}
		if path != "" {
			msg.WriteString(path)
			msg.WriteString(": ")
		}
		msg.WriteString(it.Msg)
	}
	ee.message = msg.String()
	return ee
}

// locPath renders a FastAPI location like ["body","messages",0,"role"] as
// "messages[0].role", the form our own param uses.
func locPath(loc []any) string {
	var b strings.Builder
	for i, part := range loc {
		switch p := part.(type) {
		case string:
			if i == 0 && (p == "body" || p == "query" || p == "path" || p == "header") {
				continue
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(p)
		case float64:
			fmt.Fprintf(&b, "[%d]", int(p))
		}
	}
	return b.String()
}

// excerpt returns the start of b as readable text: trimmed, cut on a
// character boundary and marked with "…" so it is at most maxExcerpt bytes,
// invalid UTF-8 replaced.
func excerpt(b []byte) string {
	s := strings.ToValidUTF8(string(bytes.TrimSpace(b)), "\uFFFD")
	if len(s) <= maxExcerpt {
		return s
	}
	n := maxExcerpt - len("…")
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func isNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

func asObject(raw json.RawMessage) (map[string]json.RawMessage, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, false
	}
	var m map[string]json.RawMessage
	return m, json.Unmarshal(raw, &m) == nil
}

// asString returns raw's value if it is a JSON string, else "".
func asString(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}
