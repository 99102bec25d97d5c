package sse

// DoneEvent is the event that ends a successful OpenAI-style stream.
var DoneEvent = []byte("data: [DONE]\n\n")

// KeepaliveEvent is a comment event; clients ignore it, so sending it never
// crosses the delivery boundary.
var KeepaliveEvent = []byte(": keepalive\n\n")

// AppendData appends a default (unnamed) event carrying json as its single data
// line: "data: " + json + "\n\n". json must not contain a line break; compact
// JSON never does.
func AppendData(dst, json []byte) []byte {
	dst = append(dst, "data: "...)
	dst = append(dst, json...)
	return append(dst, '\n', '\n')
}
