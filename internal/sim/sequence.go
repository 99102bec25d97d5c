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
	length  int    // output tokens it produces
	reason  string // its finish reason: "stop" or "length"
	words   []int  // vocabulary indices generated so far
	pending []int  // request-wide indices of tokens computed but not yet written
	written int    // tokens written to the client
	blocks  int    // KV blocks it holds beyond the prompt blocks its prompt shares
}

// newSequences lays out the request's sequences in choice order: prompt by
// prompt, and within a prompt by j.
func newSequences(salt string, spec *generationSpec) []*sequence {
	seqs := make([]*sequence, 0, spec.sequences())
	for pi := range spec.prompts {
		p := &spec.prompts[pi]
		for j := range spec.n {
			gen := newGenerator(salt, spec.seed+int64(j), p.key)
			length, reason := p.maxTokens, "length"
			if natural := gen.naturalLength(); !spec.ignoreEOS && natural < length {
				length, reason = natural, "stop"
			}
			seqs = append(seqs, &sequence{
				choice: pi*spec.n + j,
				prompt: p,
				gen:    gen,
				length: length,
				reason: reason,
				words:  make([]int, 0, length),
			})
		}
	}
	return seqs
}

// usage is what a chunk of this sequence's choice reports with continuous
// usage stats: as vLLM's stream generators do, the prompt of the choice and
// the tokens the choice has produced so far, never the request's totals.
func (q *sequence) usage() chunkUsage {
	return chunkUsage{prompt: len(q.prompt.ids), completion: len(q.words)}
}

// text is the output generated so far.
func (q *sequence) text() string {
	var b strings.Builder
	for _, w := range q.words {
		b.WriteString(vocabulary[w])
	}
	return b.String()
}

// unwrittenText appends the JSON-escaped text of the tokens computed but
// not yet written to buf.
func (q *sequence) unwrittenText(buf []byte) []byte {
	for _, w := range q.words[q.written:] {
		buf = append(buf, vocabularyText[w]...)
	}
	return buf
}

// cacheIDs is the prompt followed by the answer, as the next turn of a chat
// would send it back: what a finished sequence leaves in the prefix cache.
func (q *sequence) cacheIDs() []uint32 {
	ids := make([]uint32, 0, len(q.prompt.ids)+len(q.words))
	ids = append(ids, q.prompt.ids...)
	for _, w := range q.words {
		ids = append(ids, vocabularyIDs[w])
	}
	return ids
}
