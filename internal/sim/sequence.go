package sim

import "strings"

// sequence is one output sequence of a request: a choice of the reply. A
// chat request has n of them; a completion request n per prompt. Like
// vLLM's child requests, each has its own seed (the request's seed plus its
// index within its prompt), its own length and finish reason.
type sequence struct {
	choice  int         // index of its choice in the reply: prompt index × n + j
	prompt  *promptSpec // the prompt it continues
	gen     generator
	length  int       // output tokens it produces
	reason  string    // its finish reason: "stop" or "length"
	tokens  []int     // vocabulary indices generated so far (a tool call's piece indices)
	call    *toolCall // the tool call it makes instead of text; nil for text
	pending []int     // request-wide indices of tokens computed but not yet written
	written int       // tokens written to the client
	blocks  int       // KV blocks it holds beyond the prompt blocks its prompt shares
}

// newSequences lays out the request's sequences in choice order: prompt by
// prompt, and within a prompt by j. Tool calls get fresh ids in idStyle.
func newSequences(salt, idStyle string, spec *generationSpec) []*sequence {
	seqs := make([]*sequence, 0, spec.sequences())
	for pi := range spec.prompts {
		for j := range spec.n {
			seqs = append(seqs, newSequence(salt, idStyle, spec, pi, j))
		}
	}
	return seqs
}

// newSequence is the sequence of choice j of prompt pi, its text decided by salt.
func newSequence(salt, idStyle string, spec *generationSpec, pi, j int) *sequence {
	p := &spec.prompts[pi]
	gen := newGenerator(salt, spec.seed+int64(j), p.key)
	gen = continuation(salt, spec.seed+int64(j), gen, p.open)
	q := &sequence{choice: pi*spec.n + j, prompt: p, gen: gen}
	natural := gen.naturalLength()
	if spec.tools.mode != toolsNone {
		q.call = newToolCall(&spec.tools, gen, q.choice, newToolCallID(idStyle))
		natural = len(q.call.pieces)
	}
	q.length, q.reason = p.maxTokens, "length"
	if (!spec.ignoreEOS || q.call != nil) && natural < q.length {
		q.length, q.reason = natural, "stop"
	}
	q.tokens = make([]int, 0, q.length)
	return q
}

// usage is what a chunk of this sequence's choice reports with continuous
// usage stats: as vLLM's stream generators do, the prompt of the choice and
// the tokens the choice has produced so far, never the request's totals.
func (q *sequence) usage() chunkUsage {
	return chunkUsage{prompt: len(q.prompt.ids), completion: len(q.tokens)}
}

// token returns the vocabulary index (or tool-call piece index) of the
// sequence's token i.
func (q *sequence) token(i int) int {
	if q.call != nil {
		return i
	}
	return q.gen.word(i)
}

// finishReason is the finish_reason vLLM reports for the sequence, which
// for a tool call depends on the tool choice and on streaming (tools.go).
func (q *sequence) finishReason(spec *generationSpec) string {
	if q.call != nil && spec.tools.mode == toolsRequired && (spec.stream || q.reason == "stop") {
		return "tool_calls"
	}
	return q.reason
}

// text is the output generated so far.
func (q *sequence) text() string {
	if q.call != nil {
		return "" // vLLM sends empty content beside the calls
	}
	var b strings.Builder
	for _, w := range q.tokens {
		b.WriteString(vocabulary[w])
	}
	return b.String()
}

// unwrittenText appends the JSON-escaped text of the tokens computed but
// not yet written to buf.
func (q *sequence) unwrittenText(buf []byte) []byte {
	if q.call != nil {
		for _, i := range q.tokens[q.written:] {
			buf = append(buf, q.call.pieces[i]...)
		}
		return buf
	}
	for _, w := range q.tokens[q.written:] {
		buf = append(buf, vocabularyText[w]...)
	}
	return buf
}

// cacheIDs is the prompt followed by the answer, as the next turn of a chat
// would send it back: what a finished sequence leaves in the prefix cache.
func (q *sequence) cacheIDs() []uint32 {
	ids := make([]uint32, 0, len(q.prompt.ids)+len(q.tokens))
	ids = append(ids, q.prompt.ids...)
	if q.call != nil {
		return ids // a call's JSON would come back as a tool message, not as this text
	}
	for _, w := range q.tokens {
		ids = append(ids, vocabularyIDs[w])
	}
	return ids
}
