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
// its output text differs (see choicesMemo).
type streamMemo struct {
	prefix  []byte // '{' and whole members, up to (not including) a ',' or '}'; empty: none
	choices choicesMemo
}

// summarize is Summarize, skipping what it remembers where data repeats it, and
// remembering this event's for the next one.
func (m *streamMemo) summarize(data []byte) Summary {
	if len(m.prefix) > 0 && bytes.HasPrefix(data, m.prefix) {
		return summarizeFrom(data, len(m.prefix), m)
	}
	return summarizeFrom(data, 0, m)
}

// remember keeps data[:end], the leading members that carried nothing Summarize looks for.
func (m *streamMemo) remember(data []byte, end int) {
	if end <= 1 || end > maxMemoPrefix {
		m.prefix = m.prefix[:0]
		return
	}
	m.prefix = append(m.prefix[:0], data[:end]...)
}
