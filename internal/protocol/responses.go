package protocol

import (
	"github.com/fencegate/fencegate/internal/openai"
)

// responsesInterruption is the Responses API's `event: error` — type, code, message,
// param, the next sequence_number, and fencegate's fields — followed by a terminal
// response.failed whose error has the same code, because clients such as coding agents wait
// for a terminal event and would otherwise report a dropped stream. Its output is what the
// client received of the output items (ResponsesOutput). The error event also
// carries the error as an "error" member: the official SDKs raise a stream event as an
// error when its data has one, and read it as an event otherwise.
func responsesInterruption(e *openai.Error, st Stream) []byte {
	seq := max(st.NextSequence, 0)
	body := []byte(`{"type":"error","code":`)
	body = openai.AppendString(body, e.Code)
	body = append(body, `,"message":`...)
	body = openai.AppendString(body, e.Message)
	body = append(body, `,"param":null,"sequence_number":`...)
	body = appendInt(body, seq)
	body = e.AppendExtensions(body)
	body = append(body, `,"error":`...)
	inner := e.AppendJSON(nil) // {"error":{...}}
	body = append(body, inner[len(`{"error":`):len(inner)-1]...)
	body = append(body, '}')
	out := appendEvent(nil, "error", body)

	failed := []byte(`{"type":"response.failed","sequence_number":`)
	failed = appendInt(failed, seq+1)
	failed = append(failed, `,"response":{"id":`...)
	failed = openai.AppendString(failed, st.ResponseID)
	failed = append(failed, `,"object":"response","created_at":`...)
	failed = appendInt(failed, st.CreatedAt)
	failed = append(failed, `,"status":"failed","model":`...)
	failed = openai.AppendString(failed, st.Model)
	failed = append(failed, `,"output":`...)
	failed = st.Output.AppendJSON(failed)
	failed = append(failed, `,"error":{"code":`...)
	failed = openai.AppendString(failed, e.Code)
	failed = append(failed, `,"message":`...)
	failed = openai.AppendString(failed, e.Message)
	failed = append(failed, `},"incomplete_details":null}}`...)
	return appendEvent(out, "response.failed", failed)
}
