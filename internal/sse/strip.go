package sse

// StripNullError appends data to dst without its top-level "error": null member(s); data
// itself is never modified, since a rerun may reuse the buffer. The other members are kept
// as the engine wrote them. It is for the rare events Classify marks NullError: clients that
// treat any "error" key as an error must not see one in an ordinary chunk. Data that does
// not scan as a JSON object is appended unchanged.
func StripNullError(dst, data []byte) []byte {
	s := scanner{data: data}
	if s.peek() != '{' {
		return append(dst, data...)
	}
	s.pos++
	base := len(dst)
	dst = append(dst, data[:s.pos]...)
	kept := 0
	var buf [24]byte
	for first := true; ; first = false {
		start := s.pos
		raw, ok := s.nextKey(first)
		if !ok {
			break
		}
		if string(s.name(raw, &buf)) == "error" && s.isNull() {
			continue
		}
		if !s.skip(1) {
			break
		}
		if kept > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, trimSeparator(data[start:s.pos])...)
		kept++
	}
	if s.bad {
		return append(dst[:base], data...)
	}
	return append(dst, data[s.pos-1:]...) // the closing brace and what follows it
}

// trimSeparator drops the comma (and the whitespace around it) in front of a member.
func trimSeparator(b []byte) []byte {
	i := 0
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	if i < len(b) && b[i] == ',' {
		i++
	}
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return b[i:]
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
