package sse

// Classify reports what a data payload carries, in one pass over the JSON
// that looks only at the few keys it needs and validates (but does not
// decode) everything else. It never allocates. See the Class constants for
// the meaning of each bit; Malformed is returned alone, since nothing in an
// invalid payload can be trusted.
func Classify(data []byte) Class {
	c, _ := classify(data)
	return c
}

// Count returns the number of choices in a chunk that carry output (see
// Output): one delivered output token per output-bearing choice delta. It is 0
// for malformed data and never allocates.
func Count(data []byte) int {
	_, n := classify(data)
	return n
}

// ClassifyCount is Classify and Count in one pass.
func ClassifyCount(data []byte) (Class, int) { return classify(data) }

func classify(data []byte) (Class, int) {
	if string(data) == "[DONE]" {
		return Done, 0
	}
	s := scanner{data: data}
	var class Class
	var outputs int
	if s.peek() == '{' {
		s.pos++
		class, outputs = s.topObject()
	} else {
		// Valid JSON that is not an object carries nothing we look for.
		s.skip(0)
	}
	if s.bad || s.skipSpace() {
		return Malformed, 0
	}
	if class&Error != 0 {
		class &^= NullError // an error it is; nothing to strip
	}
	return class, outputs
}

// topObject scans the members of the chunk object (its '{' consumed).
func (s *scanner) topObject() (Class, int) {
	var class Class
	var outputs int
	var buf [24]byte
	for first := true; ; first = false {
		raw, ok := s.nextKey(first)
		if !ok {
			return class, outputs
		}
		switch string(s.name(raw, &buf)) {
		case "choices":
			c, n := s.choices()
			class |= c
			outputs += n
		case "usage":
			if s.peek() == '{' {
				class |= Usage
			}
			s.skip(1)
		case "error":
			if s.notNull(1) {
				class |= Error
			} else if !s.bad {
				class |= NullError
			}
		case "object":
			if s.peek() == '"' {
				v, ok := s.str()
				if ok && string(s.name(v, &buf)) == "error" {
					class |= Error
				}
			} else {
				s.skip(1)
			}
		default:
			s.skip(1)
		}
	}
}

// choices scans the value of "choices" (depth 1 holds it).
func (s *scanner) choices() (Class, int) {
	if s.peek() != '[' {
		s.skip(1)
		return 0, 0
	}
	s.pos++
	var class Class
	var outputs int
	for first := true; s.nextElem(first); first = false {
		if s.peek() != '{' {
			s.skip(2)
			continue
		}
		s.pos++
		output, finish, tools := s.choice()
		if output {
			class |= Output
			outputs++
		}
		if finish {
			class |= Finish
		}
		if tools {
			class |= ToolCalls
		}
	}
	return class, outputs
}

// choice scans one choice object (its '{' consumed, at depth 3).
func (s *scanner) choice() (output, finish, tools bool) {
	var buf [24]byte
	for first := true; ; first = false {
		raw, ok := s.nextKey(first)
		if !ok {
			return output, finish, tools
		}
		switch string(s.name(raw, &buf)) {
		case "delta", "message":
			if s.peek() != '{' {
				s.skip(3)
				continue
			}
			s.pos++
			o, t := s.delta()
			output = output || o
			tools = tools || t
		case "text":
			if s.nonEmptyString(3) {
				output = true
			}
		case "finish_reason":
			if s.notNull(3) {
				finish = true
			}
		default:
			s.skip(3)
		}
	}
}

// delta scans a delta (stream) or message (non-stream) object, its '{'
// consumed, at depth 4, and reports whether it carries output and tool calls.
func (s *scanner) delta() (output, tools bool) {
	var buf [24]byte
	for first := true; ; first = false {
		raw, ok := s.nextKey(first)
		if !ok {
			return output, tools
		}
		switch string(s.name(raw, &buf)) {
		case "content", "reasoning_content", "reasoning":
			if s.nonEmptyString(4) {
				output = true
			}
		case "tool_calls":
			if s.nonEmptyArray(4) {
				output, tools = true, true
			}
		default:
			s.skip(4)
		}
	}
}
