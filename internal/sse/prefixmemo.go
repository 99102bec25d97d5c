package sse

import "bytes"

// maxMemoPrefix bounds the bytes a Decoder keeps of an event to skip in the next one.
const maxMemoPrefix = 512

// streamMemo lets a stream's events skip the leading members the previous event already
// proved valid and meaningless. A chat or completions stream repeats them byte for byte in
// every chunk ("id", "object", "created", "model", "system_fingerprint"): a third of the
// bytes of a token's chunk, and of the scan's work. A parser's state after a run of bytes
// depends on those bytes alone, so when an event starts with exactly the bytes after which
// the previous one was at a member boundary of its top-level object with nothing found yet,
// its scan resumes there in that state: the same Summary, for fewer bytes scanned.
//
// It also remembers the chunk's "choices" member, for the next chunk to skip it where only
// its output text differs (see choicesMemo), and the members after the last one that
// carried something looked for (see tailMemo).
type streamMemo struct {
	prefix  []byte // '{' and whole members, up to (not including) a ',' or '}'; empty: none
	choices choicesMemo
	tail    tailMemo
}

// summarize is Summarize into *sum, skipping what it remembers where data repeats it, and
// remembering this event's for the next one.
func (m *streamMemo) summarize(sum *Summary, data []byte) {
	m.summarizeLine(sum, data)
}

// summarizeLine is summarize for the value of a data line as it was found, CRs not yet
// looked for, and reports whether the summary proves that data holds none. The data of an
// event never holds a CR (one ends the line), so neither does anything the memo learned
// from one; should data turn out to hold one, the caller must forget what the memo learned
// from it. Where the JSON is valid, every byte of data is either one the memo remembered
// or one the scan read: in a string, number or literal a CR is invalid, and between them
// the scan notes one (scanner.sawCR).
func (m *streamMemo) summarizeLine(sum *Summary, data []byte) (noCR bool) {
	if len(m.prefix) > 0 && bytes.HasPrefix(data, m.prefix) {
		return summarizeFrom(sum, data, len(m.prefix), m)
	}
	return summarizeFrom(sum, data, 0, m)
}

// forget drops all the memo holds.
func (m *streamMemo) forget() {
	m.prefix = m.prefix[:0]
	m.choices.forget()
	m.tail.rest = m.tail.rest[:0]
}

// remember keeps data[:end], the leading members that carried nothing Summarize looks for.
func (m *streamMemo) remember(data []byte, end int) {
	if end <= 1 || end > maxMemoPrefix {
		m.prefix = m.prefix[:0]
		return
	}
	m.prefix = append(m.prefix[:0], data[:end]...)
}
