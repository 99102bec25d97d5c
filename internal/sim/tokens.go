package sim

import "encoding/json"

// vocabulary is the sim's whole output vocabulary. Every word carries its
// leading space, as a BPE tokenizer's mid-sentence tokens do, so output text
// is the plain concatenation of tokens. 64 words make two replicas' texts
// differ at almost every position.
var vocabulary = [...]string{
	" alpha", " bravo", " charlie", " delta", " echo", " foxtrot", " golf", " hotel",
	" india", " juliett", " kilo", " lima", " mike", " november", " oscar", " papa",
	" quebec", " romeo", " sierra", " tango", " uniform", " victor", " whiskey", " xray",
	" yankee", " zulu", " beta", " gamma", " epsilon", " zeta", " eta", " theta",
	" iota", " kappa", " lambda", " mu", " nu", " xi", " omicron", " pi",
	" rho", " sigma", " tau", " upsilon", " phi", " chi", " psi", " omega",
	" red", " orange", " yellow", " green", " blue", " indigo", " violet", " amber",
	" cyan", " magenta", " silver", " gold", " copper", " iron", " jade", " ruby",
}

// vocabularyJSON holds each word already encoded as a JSON string, so the
// streaming path never escapes text per token.
var vocabularyJSON = func() [len(vocabulary)][]byte {
	var out [len(vocabulary)][]byte
	for i, w := range vocabulary {
		out[i], _ = json.Marshal(w)
	}
	return out
}()

// vocabularyText is vocabularyJSON without the quotes, so several words
// can be joined into one JSON string (one chunk of a --stream-interval
// stream) by plain concatenation.
var vocabularyText = func() [len(vocabulary)][]byte {
	var out [len(vocabulary)][]byte
	for i, w := range vocabularyJSON {
		out[i] = w[1 : len(w)-1]
	}
	return out
}()

// vocabularyIDs holds the prompt-token id of each word, so generated text can
// extend the prefix cache exactly as the same text would when it comes back
// in the next turn's prompt.
var vocabularyIDs = func() [len(vocabulary)]uint32 {
	var out [len(vocabulary)]uint32
	for i, w := range vocabulary {
		out[i] = pieceID(w[1:])
	}
	return out
}()

const (
	minNaturalLength = 8
	maxNaturalLength = 40
)

// generator produces one sequence's output: token i is a pure function of
// (salt, seed, prompt, i), which is what makes replies reproducible across
// runs and tells replicas (different salts) apart.
type generator struct {
	key uint64
	// offset is where in the sequence of key this generation starts: a chat turn that
	// continues the sequence's own first offset tokens (continue.go).
	offset int
}

func newGenerator(salt string, seed int64, prompt string) generator {
	h := fnvOffset
	h = fnvString(h, salt)
	h = fnvByte(h, 0)
	for i := range 8 {
		h = fnvByte(h, byte(uint64(seed)>>(8*i)))
	}
	h = fnvByte(h, 0)
	h = fnvString(h, prompt)
	return generator{key: h}
}

// word returns the vocabulary index of output token i.
func (g generator) word(i int) int {
	i += g.offset
	return int(mix64(g.key+uint64(i+1)*0x9e3779b97f4a7c15) % uint64(len(vocabulary)))
}

// naturalLength is where the sequence would emit its end-of-sequence token,
// ending with finish_reason "stop".
func (g generator) naturalLength() int {
	span := uint64(maxNaturalLength - minNaturalLength + 1)
	return minNaturalLength + int(mix64(g.key^0xd1b54a32d192ed03)%span) - g.offset
}

// Tokens returns the first n token texts a replica whose name is salt
// produces for prompt with the given seed. Greedy requests (temperature 0 or
// unset, no seed) use seed 0. The prompt of a chat request is
// RenderChat(messages); that of a completion request is its prompt string
// (TokenPrompt(ids) for a prompt given as token ids). With n > 1, choice j
// of a prompt is generated with seed+j, as vLLM seeds the j-th child
// request of a parallel-sampling request; choice 0 is what n = 1 gives.
// Tokens does not stop at the natural length: use NaturalLength for that.
func Tokens(salt string, seed int64, prompt string, n int) []string {
	g := newGenerator(salt, seed, prompt)
	out := make([]string, n)
	for i := range out {
		out[i] = vocabulary[g.word(i)]
	}
	return out
}

// NaturalLength returns how many tokens the replica generates for prompt
// before it stops on its own. With max_tokens above it the reply has that
// many tokens and finish_reason "stop"; with max_tokens at or below it the
// reply has max_tokens tokens and finish_reason "length" (the end of the
// sequence would have come after the last token allowed). ignore_eos
// always runs to max_tokens.
func NaturalLength(salt string, seed int64, prompt string) int {
	return newGenerator(salt, seed, prompt).naturalLength()
}

const (
	fnvOffset uint64 = 14695981039346656037
	fnvPrime  uint64 = 1099511628211
)

func fnvByte(h uint64, b byte) uint64 { return (h ^ uint64(b)) * fnvPrime }

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = fnvByte(h, s[i])
	}
	return h
}

// mix64 is splitmix64's finaliser: it spreads nearby inputs (i, i+1) over
// the whole 64-bit range.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
