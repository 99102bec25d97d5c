package sse

import (
	"bytes"

	"github.com/fencegate/fencegate/internal/enginetool"
)

// The OpenAI Responses stream: every event's data has a "type" and a "sequence_number":
//
//	response.created, response.in_progress (response.queued), then per output item:
//	response.output_item.added, (response.content_part.added, *.delta…, *.done,
//	response.content_part.done), response.output_item.done; then response.completed
//	(or response.incomplete). A failure is an "error" event or response.failed.
//
// What is output (docs/design.md §2): every *.delta event with content, a function_call
// item (it reveals the call), an item announcing a call of a tool the engine runs itself
// (mcp_call, code_interpreter_call, web_search_call, ...: internal/enginetool) and every
// event of such an item (response.mcp_call.in_progress, ...), since the engine may already
// act on it (docs/design.md §5), any event that carries non-empty text, and the terminal
// response.completed / response.incomplete (Finish and Done at once). The lifecycle events
// and the announcement of an empty message or content part are not: committing on them is
// how a gateway loses its failover.

// responsesEvent is what one pass over a Responses event found.
type responsesEvent struct {
	typ       [64]byte
	typLen    int
	output    bool // a non-empty delta, text or arguments
	function  bool // a function_call item (added, done, or in the final output)
	engine    bool // an item announcing a call of an engine-run tool
	usage     bool
	outTokens int
	sequence  int64
}

func summarizeResponses(name, data []byte) Summary {
	s := scanner{data: data}
	sum := Summary{CompletionTokens: -1, Choice: -1, Sequence: -1}
	if s.peek() != '{' {
		s.skip(0)
		return s.finishSummary(sum)
	}
	s.pos++
	ev := responsesEvent{sequence: -1}
	s.responsesObject(&ev)
	if s.bad || s.skipSpace() {
		return Summary{Class: Malformed, CompletionTokens: -1, Choice: -1, Sequence: -1}
	}
	sum.Sequence = ev.sequence
	typ := ev.typ[:ev.typLen]
	if len(typ) == 0 {
		typ = name
	}
	if ev.function {
		sum.Class |= ToolCalls | Output
	}
	if ev.engine || enginetool.EngineCallEvent(typ) {
		sum.Class |= Output
	}
	switch {
	case string(typ) == "response.completed", string(typ) == "response.incomplete":
		sum.Class |= Finish | Done
		sum.Finished = 1
		sum.Choice = 0
		if ev.usage {
			sum.Class |= Usage
			sum.CompletionTokens = ev.outTokens
		}
	case string(typ) == "response.failed", string(typ) == "error":
		sum.Class = Error
	case bytes.HasSuffix(typ, []byte(".delta")):
		if ev.output {
			sum.Class |= Output
			sum.Outputs = 1
		}
		sum.Choice = 0
	default:
		if ev.output {
			sum.Class |= Output
		}
	}
	return sum
}

// responsesObject scans the members of a Responses event (its '{' consumed, at depth 1).
func (s *scanner) responsesObject(ev *responsesEvent) {
	var buf [24]byte
	var long [64]byte
	for first := true; ; first = false {
		raw, ok := s.nextKey(first)
		if !ok {
			return
		}
		switch string(s.name(raw, &buf)) {
		case "type":
			if v := s.stringValue(1, &long); v != nil {
				ev.typLen = copy(ev.typ[:], v)
			}
		case "sequence_number":
			ev.sequence = s.wholeValue(1)
		case "delta", "text", "arguments":
			if s.nonEmptyString(1) {
				ev.output = true
			}
		case "item", "part":
			s.responsesItem(ev, 1)
		case "response":
			s.responsesResponse(ev)
		default:
			s.skip(1)
		}
	}
}

// responsesItem scans an output item or a content part (at depth): its type, and whether
// it already carries text.
func (s *scanner) responsesItem(ev *responsesEvent, depth int) {
	if s.peek() != '{' {
		s.skip(depth)
		return
	}
	s.pos++
	var buf [24]byte
	var long [64]byte
	for first := true; ; first = false {
		raw, ok := s.nextKey(first)
		if !ok {
			return
		}
		switch string(s.name(raw, &buf)) {
		case "type":
			switch v := s.stringValue(depth+1, &long); {
			case string(v) == "function_call":
				ev.function = true
			case enginetool.AnnouncesEngineCall(v):
				ev.engine = true
			}
		case "text":
			if s.nonEmptyString(depth + 1) {
				ev.output = true
			}
		case "content":
			s.responsesParts(ev, depth+1)
		default:
			s.skip(depth + 1)
		}
	}
}

// responsesParts scans an array of content parts or output items (at depth).
func (s *scanner) responsesParts(ev *responsesEvent, depth int) {
	if s.peek() != '[' {
		s.skip(depth)
		return
	}
	s.pos++
	for first := true; s.nextElem(first); first = false {
		s.responsesItem(ev, depth+1)
	}
}

// responsesResponse scans the response object of a lifecycle or terminal event (at depth
// 1): its usage and whether its output holds a function call. Its text does not make the
// event output: response.completed is output by its type, and the earlier lifecycle events
// carry no output yet.
func (s *scanner) responsesResponse(ev *responsesEvent) {
	if s.peek() != '{' {
		s.skip(1)
		return
	}
	s.pos++
	var buf [24]byte
	for first := true; ; first = false {
		raw, ok := s.nextKey(first)
		if !ok {
			return
		}
		switch string(s.name(raw, &buf)) {
		case "usage":
			if s.peek() == '{' {
				s.pos++
				ev.usage = true
				ev.outTokens = s.countMember("output_tokens", 3)
			} else {
				s.skip(2)
			}
		case "output":
			// The final output's engine-run calls were output when they were announced.
			inner := responsesEvent{}
			s.responsesParts(&inner, 2)
			ev.function = ev.function || inner.function
		default:
			s.skip(2)
		}
	}
}
