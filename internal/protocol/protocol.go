package protocol

import (
	"strconv"

	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/sse"
)

// Stream is what the gateway learned of a stream it forwards, that its own final events
// need: the Responses API numbers its events and names its response.
type Stream struct {
	// NextSequence is one more than the sequence_number of the last event forwarded.
	NextSequence int64
	// ResponseID and Model are the response's, from its response.created event.
	ResponseID string
	Model      string
	CreatedAt  int64
	// Output is what the client received of the response's output items, which
	// response.failed reports as its output.
	Output ResponsesOutput
}

// ErrorBody is the body of an error answered before any output, in p's shape. The status
// is e.Status.
func ErrorBody(p sse.Protocol, e *openai.Error) []byte {
	if p == sse.Messages {
		return messagesError(nil, e)
	}
	return e.AppendJSON(nil)
}

// Interruption is the final event (or events) of a stream that ends in an error after its
// headers were sent, in p's shape, so that the API's clients see an error and not an end:
// no [DONE], no message_stop, no response.completed.
func Interruption(p sse.Protocol, e *openai.Error, st Stream) []byte {
	switch p {
	case sse.Messages:
		return messagesInterruption(e)
	case sse.Responses:
		return responsesInterruption(e, st)
	}
	return sse.AppendData(nil, e.AppendJSON(nil))
}

// Done is the event that ends a stream whose engine finished the answer but closed the
// stream without its end event.
func Done(p sse.Protocol) []byte {
	switch p {
	case sse.Messages:
		return []byte("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	case sse.Responses:
		return nil // the terminal response.completed is itself the end
	}
	return sse.DoneEvent
}

// appendEvent appends an SSE event with a name.
func appendEvent(dst []byte, name string, data []byte) []byte {
	dst = append(dst, "event: "...)
	dst = append(dst, name...)
	dst = append(dst, '\n')
	return sse.AppendData(dst, data)
}

func appendInt(dst []byte, n int64) []byte { return strconv.AppendInt(dst, n, 10) }
