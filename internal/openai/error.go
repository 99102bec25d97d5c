package openai

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// Error types used by fencegate, as in OpenAI's "type" field.
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeAuthentication = "authentication_error"
	TypePermission     = "permission_error"
	TypeNotFound       = "not_found_error"
	TypeRateLimit      = "rate_limit_error"
	TypeServer         = "server_error"
	TypeUpstream       = "upstream_error"
)

// Error is the OpenAI error object. It marshals as {"error":{...}} with
// message, type, param (null when empty) and code (always a string), plus
// fencegate's extension fields, which are omitted when unset.
type Error struct {
	Message string
	Type    string // "invalid_request_error", "upstream_error", "rate_limit_error", "server_error", ...
	Param   string // the request field at fault; empty marshals as null
	Code    string // machine-readable reason, always a string in our output

	RequestID             string // "request_id", omitted if empty
	PartialOutput         *bool  // "partial_output": the client has seen part of the answer
	DeliveredOutputTokens *int   // "delivered_output_tokens"
	Retryable             *bool  // "retryable": a new request with the same input may succeed

	Status int `json:"-"` // HTTP status to use when headers are not sent yet
	// RetryAfter is the Retry-After to answer with (seconds), when the engine gave one.
	RetryAfter int `json:"-"`
}

// Error implements the error interface: "code: message", or "type: message"
// when there is no code.
func (e *Error) Error() string {
	switch {
	case e.Code != "":
		return e.Code + ": " + e.Message
	case e.Type != "":
		return e.Type + ": " + e.Message
	}
	return e.Message
}

// AppendJSON appends {"error":{...}} to dst, fields in the order message,
// type, param, code, request_id, partial_output, delivered_output_tokens,
// retryable. The output is byte for byte what encoding/json would produce for
// the same object, without its reflection cost on the streaming path.
func (e *Error) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"error":{"message":`...)
	dst = appendString(dst, e.Message)
	dst = append(dst, `,"type":`...)
	dst = appendString(dst, e.Type)
	dst = append(dst, `,"param":`...)
	if e.Param == "" {
		dst = append(dst, "null"...)
	} else {
		dst = appendString(dst, e.Param)
	}
	dst = append(dst, `,"code":`...)
	dst = appendString(dst, e.Code)
	dst = e.AppendExtensions(dst)
	return append(dst, "}}"...)
}

// MarshalJSON encodes the error as AppendJSON does, so an Error stored in a
// journal or embedded in a status document has the same shape clients see.
// It has a value receiver so that an Error held by value marshals the same.
func (e Error) MarshalJSON() ([]byte, error) {
	return e.AppendJSON(nil), nil
}

// errorWire is the decoding side of the {"error":{...}} shape.
type errorWire struct {
	Error *struct {
		Message               string          `json:"message"`
		Type                  string          `json:"type"`
		Param                 *string         `json:"param"`
		Code                  json.RawMessage `json:"code"`
		RequestID             string          `json:"request_id"`
		PartialOutput         *bool           `json:"partial_output"`
		DeliveredOutputTokens *int            `json:"delivered_output_tokens"`
		Retryable             *bool           `json:"retryable"`
	} `json:"error"`
}

// UnmarshalJSON reads the {"error":{...}} shape written by MarshalJSON. A
// numeric code is kept as its decimal text. Status is not part of the body
// and is left unchanged.
func (e *Error) UnmarshalJSON(data []byte) error {
	var w errorWire
	if err := json.Unmarshal(data, &w); err != nil {
		return fmt.Errorf("decode OpenAI error object: %w", err)
	}
	if w.Error == nil {
		return fmt.Errorf("decode OpenAI error object: no \"error\" member")
	}
	in := w.Error
	*e = Error{
		Message:               in.Message,
		Type:                  in.Type,
		Code:                  codeText(in.Code),
		RequestID:             in.RequestID,
		PartialOutput:         in.PartialOutput,
		DeliveredOutputTokens: in.DeliveredOutputTokens,
		Retryable:             in.Retryable,
		Status:                e.Status,
	}
	if in.Param != nil {
		e.Param = *in.Param
	}
	return nil
}

// codeText returns a JSON code value as text: a string's contents, a
// number's digits, "" for null or anything else.
func codeText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// AppendFields appends the error's members after message — type, param, code and the
// fencegate fields — without braces, for encoders of other APIs' error shapes that embed
// them (see package protocol). typ replaces the error's type when not empty.
func (e *Error) AppendFields(dst []byte, typ string) []byte {
	if typ == "" {
		typ = e.Type
	}
	dst = append(dst, `"type":`...)
	dst = appendString(dst, typ)
	dst = append(dst, `,"message":`...)
	dst = appendString(dst, e.Message)
	dst = append(dst, `,"code":`...)
	dst = appendString(dst, e.Code)
	return e.AppendExtensions(dst)
}

// AppendExtensions appends fencegate's members (each after a comma), those that are set:
// request_id, partial_output, delivered_output_tokens, retryable.
func (e *Error) AppendExtensions(dst []byte) []byte {
	if e.RequestID != "" {
		dst = append(dst, `,"request_id":`...)
		dst = appendString(dst, e.RequestID)
	}
	if e.PartialOutput != nil {
		dst = append(dst, `,"partial_output":`...)
		dst = strconv.AppendBool(dst, *e.PartialOutput)
	}
	if e.DeliveredOutputTokens != nil {
		dst = append(dst, `,"delivered_output_tokens":`...)
		dst = strconv.AppendInt(dst, int64(*e.DeliveredOutputTokens), 10)
	}
	if e.Retryable != nil {
		dst = append(dst, `,"retryable":`...)
		dst = strconv.AppendBool(dst, *e.Retryable)
	}
	return dst
}
