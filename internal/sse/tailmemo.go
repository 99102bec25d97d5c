package sse

// tailMemo lets a stream's chunks skip the members that follow the last one that carries
// something looked for, together with the object's end, when they repeat the previous
// chunk's byte for byte. llama.cpp's chunks open with "choices" and close with "created",
// "id", "model", "system_fingerprint" and "object", the same in every chunk: the prefix memo
// cannot skip those, and they are half of such a chunk.
//
// Such members carry nothing looked for: scanning them moves nothing in the Summary, and
// what follows them is the end of the object and, to the end of the data, whitespace. So
// from any member boundary after the first member, the same bytes lead to the same
// Summary and to a valid end.
type tailMemo struct {
	// rest is the remembered bytes, from the member boundary to the end of the data; empty:
	// none.
	rest []byte
}

// skip moves s to the end of its data when what is left of it, from a member boundary
// after the first member of the object, is the remembered bytes.
func (m *tailMemo) skip(s *scanner) bool {
	rest := s.data[s.pos:]
	if len(rest) != len(m.rest) || len(rest) == 0 || string(rest) != string(m.rest) {
		return false
	}
	s.pos = len(s.data)
	return true
}

// learn remembers rest, the data from a member boundary after the first member on, made of
// members that carried nothing looked for, the object's end and whitespace.
func (m *tailMemo) learn(rest []byte) {
	if len(rest) > maxMemoPrefix {
		m.rest = m.rest[:0]
		return
	}
	m.rest = append(m.rest[:0], rest...)
}
