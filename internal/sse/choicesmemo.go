package sse

// choicesMemo lets a stream's chunks skip their "choices" member where it repeats the
// previous chunk's but for the text of its one output string. A streamed chunk's choices
// differ from the last chunk's in the token's text alone ("content", "reasoning_content"
// or "text"): the index, the delta's other members and the choice's closing
// (`"logprobs":null,"finish_reason":null}]`) come back byte for byte, in vLLM's, SGLang's
// and llama.cpp's shapes alike.
//
// The scan of that member is a function of the Summary before it, whether it is the
// object's first member, and its bytes. It reads the output string's bytes for two things
// only: whether they form a valid string and whether it is empty (nonEmptyString); so two
// members that are the same bytes around one such string, whose strings are both valid and
// both empty or both not, scanned from the same Summary, leave the same Summary. The memo
// holds a member scanned from the Summary a chunk starts with (every member before it
// carried nothing looked for), and is tried only where a scan is still in that Summary: at
// the first member boundary it reaches. Where the bytes match, the member's string is still
// scanned (by the same str), so nothing is taken on trust but what the memo proved.
type choicesMemo struct {
	// member is the remembered member's bytes, from just after the previous member (or
	// after the '{') to the end of its value: member[:split] runs up to the output
	// string's opening quote included, member[split:] from just after its closing quote.
	member []byte
	split  int  // 0: nothing remembered
	first  bool // the member was the object's first
	// nonEmpty says whether the output string had any character.
	nonEmpty bool
	// sum is the Summary after the member, from the one a chunk starts with.
	sum Summary
}

// skip moves s past the member at s.pos, setting *sum to what scanning it would, when the
// member is the remembered one but for its output string, and first says whether it is the
// object's first. *sum must be the Summary a chunk starts with. Otherwise it moves nothing
// and reports false.
func (m *choicesMemo) skip(s *scanner, sum *Summary, first bool) bool {
	if m.split == 0 || first != m.first {
		return false
	}
	data, start := s.data, s.pos
	if len(data)-start < len(m.member) || string(data[start:start+m.split]) != string(m.member[:m.split]) {
		return false
	}
	s.pos = start + m.split - 1 // the output string's opening quote
	raw, ok := s.str()
	after := m.member[m.split:]
	if !ok || (len(raw) > 0) != m.nonEmpty ||
		len(data)-s.pos < len(after) || string(data[s.pos:s.pos+len(after)]) != string(after) {
		s.pos, s.bad = start, false
		return false
	}
	s.pos += len(after)
	*sum = m.sum
	return true
}

// learn remembers data[start:end], a "choices" member just scanned from the Summary a
// chunk starts with, leaving sum, when it read exactly one output string (its opening
// quote at quote, its closing one just before closed); otherwise it forgets the member it
// had.
func (m *choicesMemo) learn(data []byte, start, end int, first bool, s *scanner, sum Summary) {
	m.split = 0
	if s.outputs != 1 || end-start > maxMemoPrefix {
		return
	}
	quote, closed := s.outputAt, s.outputEnd
	m.member = append(append(m.member[:0], data[start:quote+1]...), data[closed:end]...)
	m.split = quote + 1 - start
	m.first = first
	m.nonEmpty = closed-quote > 2
	m.sum = sum
}

// forget drops the remembered member.
func (m *choicesMemo) forget() {
	m.member, m.split = m.member[:0], 0
}
