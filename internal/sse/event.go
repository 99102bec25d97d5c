package sse

import "strings"

// Event is one complete server-sent event. Its slices point into the slice given
// to Decoder.Append, into the Decoder's own buffer or, for multi-line data, into
// its scratch space: they stay valid until the next call to Decoder.Append or
// Decoder.Reset and, for the first, while the caller leaves that slice unchanged.
type Event struct {
	// Raw is the whole event as received, including the blank line that ends
	// it, so it can be forwarded verbatim.
	Raw []byte
	// Data is the value of the data field. Several data lines are joined with
	// '\n' (only then is Data a copy). Nil when the event has no data field,
	// except that an event with an "error" field and no data (how older
	// llama.cpp servers report a failure) carries that field's value here.
	Data []byte
	// Name is the value of the event field, nil when there is none.
	Name []byte
	// Class says what the event carries.
	Class Class
	// Outputs is the number of choices with output in the event's data (see Count).
	Outputs int
	// Finished, FinishedHigh, CompletionTokens, UsageStart and UsageEnd are
	// those of the Summary of the event's data (see Summary), found in the
	// same pass as Class. An event without data has no usage:
	// CompletionTokens is -1.
	Finished             uint64
	FinishedHigh         int
	CompletionTokens     int
	UsageStart, UsageEnd int
	// Choice is the Summary's: the index of the only choice, or -1.
	Choice int
	// Sequence is the Summary's: a Responses event's sequence_number, or -1.
	Sequence int64
}

// setSummary copies a Summary of the event's data into it. The fields are
// Event's own rather than an embedded Summary so that Event literals naming
// Class or Outputs keep compiling.
func (e *Event) setSummary(s *Summary) {
	e.Class = s.Class
	e.Outputs = s.Outputs
	e.Finished = s.Finished
	e.FinishedHigh = s.FinishedHigh
	e.CompletionTokens = s.CompletionTokens
	e.UsageStart, e.UsageEnd = s.UsageStart, s.UsageEnd
	e.Choice = s.Choice
	e.Sequence = s.Sequence
}

// Class is a bit set describing what an event carries.
type Class uint16

const (
	// Comment marks an event made only of comment lines (": keepalive"), or one whose
	// data is JSON null: neither carries anything for the client.
	Comment Class = 1 << iota
	// Done marks data that is exactly [DONE].
	Done
	// Output marks a chunk where some choice carries generated output: non-empty
	// content, reasoning_content or reasoning, a non-empty tool_calls array
	// (in delta for streams, in message for the non-stream shape), or non-empty
	// text (completions).
	Output
	// Finish marks a chunk where some choice has a non-null finish_reason.
	Finish
	// Usage marks a chunk with a top-level "usage" object.
	Usage
	// Error marks a chunk with a non-null top-level "error" or with
	// "object":"error".
	Error
	// Malformed marks data that is not valid JSON (and not [DONE]).
	Malformed
	// NullError marks a chunk with a top-level "error": null. It is not an error, but
	// clients that treat any "error" key as one (the official Go SDK does) would stop
	// there, so a proxy must remove it before forwarding.
	NullError
	// ToolCalls marks a chunk where some choice has a non-empty tool_calls array (it is
	// also Output).
	ToolCalls
)

// OutputBearing reports whether an event carrying c crosses the delivery
// boundary: it has output or a finish reason.
func (c Class) OutputBearing() bool { return c&(Output|Finish) != 0 }

var classNames = [...]string{"Comment", "Done", "Output", "Finish", "Usage", "Error", "Malformed", "NullError", "ToolCalls"}

// String lists the set bits, e.g. "Output|Finish"; "0" for the empty set.
func (c Class) String() string {
	if c == 0 {
		return "0"
	}
	var b strings.Builder
	for i, name := range classNames {
		if c&(1<<i) == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		b.WriteString(name)
	}
	if rest := c &^ (1<<len(classNames) - 1); rest != 0 {
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		b.WriteString("unknown")
	}
	return b.String()
}
