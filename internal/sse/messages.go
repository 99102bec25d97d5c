package sse

// The Anthropic Messages stream:
//
//	message_start, then per content block: content_block_start, content_block_delta…,
//	content_block_stop; then message_delta (stop_reason, usage), message_stop.
//	ping may come anywhere; error ends a failed stream.
//
// What is output (docs/design.md §2): a content_block_delta that carries text, thinking or
// tool input; a content_block_start of a tool_use block (it reveals the call) or of a
// block that already holds text; a message_delta with a stop_reason (Finish). message_start,
// ping and the start of an empty text or thinking block are not: committing on them is how
// a gateway loses its failover. message_stop is the end of the stream (Done).

// messagesEvent is what one pass over a Messages event found.
type messagesEvent struct {
	typ        [64]byte
	typLen     int
	output     bool // a delta or a block start with content
	toolUse    bool // a tool_use block start
	stopReason bool // a message_delta with a non-null stop_reason
	usage      bool
	outTokens  int
	index      int64
}

func summarizeMessages(name, data []byte) Summary {
	s := scanner{data: data}
	sum := Summary{CompletionTokens: -1, Choice: -1, Sequence: -1}
	var ev messagesEvent
	ev.index = -1
	if s.peek() != '{' {
		s.skip(0)
		return s.finishSummary(sum)
	}
	s.pos++
	s.messagesObject(&ev)
	if s.bad || s.skipSpace() {
		return Summary{Class: Malformed, CompletionTokens: -1, Choice: -1, Sequence: -1}
	}
	typ := ev.typ[:ev.typLen]
	if len(typ) == 0 {
		typ = name
	}
	switch string(typ) {
	case "content_block_start":
		if ev.toolUse {
			sum.Class |= Output | ToolCalls
		} else if ev.output {
			sum.Class |= Output
			sum.Outputs = 1
		}
		sum.Choice = 0
	case "content_block_delta":
		if ev.output {
			sum.Class |= Output
			sum.Outputs = 1
		}
		sum.Choice = 0
	case "message_delta":
		if ev.stopReason {
			sum.Class |= Finish
			sum.Finished = 1
		}
		if ev.usage {
			sum.Class |= Usage
			sum.CompletionTokens = ev.outTokens
		}
		sum.Choice = 0
	case "message_stop":
		sum.Class |= Done
	case "ping":
		sum.Class |= Comment // a keepalive, as the gateway's own comments are
	case "error":
		sum.Class |= Error
	}
	return sum
}

// messagesObject scans the members of a Messages event (its '{' consumed, at depth 1).
func (s *scanner) messagesObject(ev *messagesEvent) {
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
		case "index":
			ev.index = s.wholeValue(1)
		case "delta":
			s.messagesInner(ev, 1)
		case "content_block":
			s.messagesInner(ev, 1)
		case "usage":
			if s.peek() == '{' {
				s.pos++
				ev.usage = true
				ev.outTokens = s.countMember("output_tokens", 2)
			} else {
				s.skip(1)
			}
		default:
			s.skip(1)
		}
	}
}

// messagesInner scans a delta or content_block object: does it carry content, is it a
// tool_use block, does it set a stop_reason.
func (s *scanner) messagesInner(ev *messagesEvent, depth int) {
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
			switch string(s.stringValue(depth+1, &long)) {
			case "tool_use", "server_tool_use":
				ev.toolUse = true
			}
		case "text", "thinking", "partial_json":
			if s.nonEmptyString(depth + 1) {
				ev.output = true
			}
		case "stop_reason":
			if s.notNull(depth + 1) {
				ev.stopReason = true
			}
		default:
			s.skip(depth + 1)
		}
	}
}

// countMember scans an object (its '{' consumed, at depth) and returns the whole-number
// value of its member key, or -1.
func (s *scanner) countMember(key string, depth int) int {
	n := -1
	var buf [24]byte
	for first := true; ; first = false {
		raw, ok := s.nextKey(first)
		if !ok {
			return n
		}
		if string(s.name(raw, &buf)) != key {
			s.skip(depth)
			continue
		}
		if v := s.wholeValue(depth); v >= 0 && v <= maxCount {
			n = int(v)
		} else {
			n = -1
		}
	}
}
