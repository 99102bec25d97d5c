package sse

// Protocol names the wire format of a stream's events, which decides what in an event is
// output (docs/design.md §2). The SSE framing is the same for all of them.
type Protocol uint8

const (
	// Completions: OpenAI chat and text completion chunks ("choices", [DONE]).
	Completions Protocol = iota
	// Messages: the Anthropic Messages API (message_start … message_stop).
	Messages
	// Responses: the OpenAI Responses API (response.created … response.completed).
	Responses
)

func (p Protocol) String() string {
	switch p {
	case Messages:
		return "messages"
	case Responses:
		return "responses"
	}
	return "completions"
}

// SummarizeEvent reports what one event's data carries under protocol p. name is the
// event's "event:" field; for Messages and Responses the data's own "type" member decides,
// and the name is used only when the data has none.
func SummarizeEvent(p Protocol, name, data []byte) Summary {
	switch p {
	case Messages:
		return summarizeMessages(name, data)
	case Responses:
		return summarizeResponses(name, data)
	}
	return Summarize(data)
}

// longName decodes a string value scanned by str for comparison with the event types
// looked for, which are longer than keys; "" when it does not fit or is not plain ASCII.
func (s *scanner) longName(raw []byte, buf *[64]byte) []byte {
	if !s.escaped {
		return raw
	}
	return decodeASCII(raw, buf[:])
}

// stringValue consumes the next value: when it is a string it returns its name form
// (see longName), else nil.
func (s *scanner) stringValue(depth int, buf *[64]byte) []byte {
	if s.peek() != '"' {
		s.skip(depth)
		return nil
	}
	raw, ok := s.str()
	if !ok {
		return nil
	}
	return s.longName(raw, buf)
}

// finishSummary applies the rules common to every protocol's summary: an invalid payload
// is Malformed and nothing else.
func (s *scanner) finishSummary(sum Summary) Summary {
	if s.bad || s.skipSpace() {
		return Summary{Class: Malformed, CompletionTokens: -1, Choice: -1, Sequence: -1}
	}
	return sum
}
