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

// StripUsage appends data to dst without its top-level "usage" member(s), whatever
// their value (null included), for a client that did not ask for usage while the
// gateway asked the engine for it to count tokens. data itself is never modified,
// since a rerun may reuse the buffer; the other members are kept byte for byte, and
// only a comma next to each removed member goes with it (see Summary.UsageStart).
// Data that does not scan as a JSON object, or has no usage member, is appended
// unchanged. It scans data once and allocates nothing beyond growing dst. When the
// payload's Summary is at hand, cutting its UsageStart:UsageEnd span needs no scan
// at all.
func StripUsage(dst, data []byte) []byte {
	s := scanner{data: data}
	if s.peek() != '{' {
		return append(dst, data...)
	}
	s.pos++
	base := len(dst)
	from := 0     // data[from:] is still to be appended
	kept := false // some member before this one stays
	var buf [24]byte
	for first := true; ; first = false {
		prev := s.pos
		raw, ok := s.nextKey(first)
		if !ok {
			break
		}
		usage := string(s.name(raw, &buf)) == "usage"
		key := s.keyStart(raw)
		if !s.skip(1) {
			break
		}
		if !usage {
			kept = true
			continue
		}
		// Relative to what stays, this member is first when none before it
		// stays, so removed members never claim the same comma.
		start, end := memberSpan(data, !kept, prev, key, s.pos)
		dst = append(dst, data[from:start]...)
		from = end
	}
	if s.bad || s.skipSpace() {
		return append(dst[:base], data...)
	}
	return append(dst, data[from:]...)
}

// memberSpan returns the bytes to cut to remove one object member so that the
// rest is still a valid object: the member whose key starts at key and whose
// value ends at end, with the comma before it (everything from prev, the end of
// the previous value) or, for the first member, with the comma after it and the
// space after that comma. A lone member leaves just "{" and "}" with any space
// that was around it.
func memberSpan(data []byte, first bool, prev, key, end int) (int, int) {
	if !first {
		return prev, end
	}
	i := end
	for i < len(data) && isSpace(data[i]) {
		i++
	}
	if i == len(data) || data[i] != ',' {
		return key, end
	}
	i++
	for i < len(data) && isSpace(data[i]) {
		i++
	}
	return key, i
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
