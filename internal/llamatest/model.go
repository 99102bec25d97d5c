package llamatest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
)

// Words is the tiny model's output vocabulary. Every answer is a run of these words, each
// with a leading space (the tokens are SentencePiece pieces "▁word").
var Words = [...]string{
	"amber", "anchor", "apple", "arrow", "autumn", "basket", "beacon", "birch",
	"blossom", "bridge", "candle", "canyon", "cedar", "cloud", "comet", "copper",
	"coral", "cotton", "crystal", "delta", "desert", "ember", "falcon", "feather",
	"fern", "forest", "garden", "glacier", "granite", "harbor", "hazel", "island",
	"jasper", "lantern", "lemon", "linen", "maple", "meadow", "mirror", "mountain",
	"nectar", "ocean", "olive", "orchard", "pebble", "pepper", "pine", "planet",
	"prairie", "quartz", "rain", "river", "saddle", "sage", "shadow", "silver",
	"spruce", "stone", "thunder", "timber", "valley", "velvet", "willow", "winter",
}

// Shape of the model: llama architecture, the embedding as wide as the word list (see
// Model), two heads, two layers.
const (
	nEmbd    = len(Words)
	nHead    = 2
	nLayer   = 2
	nFF      = 2 * nEmbd
	trainCtx = 4096 // llama.context_length; the server's -c decides what is used

	// Token ids: SentencePiece's three specials first, then the 256 byte tokens
	// "<0x00>".."<0xFF>", then the words.
	tokUnk    = 0
	tokBOS    = 1
	tokEOS    = 2
	firstByte = 3
	// FirstWord is the token id of Words[0].
	FirstWord = firstByte + 256
	// VocabSize is the number of tokens.
	VocabSize = FirstWord + nEmbd
)

// ChatTemplate renders a conversation as plain "role: content" lines and ends with the
// assistant's prefix. It uses no special tokens, so the prompt is ordinary text.
const ChatTemplate = "{%- for message in messages -%}" +
	"{{ message['role'] + ': ' }}" +
	"{%- if message['content'] is string -%}{{ message['content'] }}" +
	"{%- elif message['content'] -%}{%- for part in message['content'] -%}{%- if part['type'] == 'text' -%}{{ part['text'] }}{%- endif -%}{%- endfor -%}" +
	"{%- endif -%}" +
	"{{ '\\n' }}" +
	"{%- endfor -%}" +
	"{%- if add_generation_prompt -%}{{ 'assistant:' }}{%- endif -%}"

// Model is the tiny model of one seed.
//
// The design makes the answer a function of the last token only, with a margin no
// sampler can cross. The embedding width equals the number of words: word i embeds as
// the unit vector e_i; every other token (specials, bytes) embeds as e_(id mod nEmbd), so
// it behaves like some word. The output row of word j is alpha·e_(pred j), where pred is
// the inverse of a seeded cyclic permutation succ of the words; the rows of all other
// tokens are zero. After the final RMS norm the residual of word i is about sqrt(nEmbd)·e_i,
// so the logit of succ(i) is about alpha·sqrt(nEmbd) = 32 and every other logit is near 0:
// even at temperature 2 the next word has all the probability, and the end-of-sequence
// token (logit 0) never wins, so every answer runs to max_tokens. The attention and
// feed-forward weights are small seeded noise: the engine really computes and caches
// keys and values, but the noise moves no logit by more than a fraction of the margin.
type Model struct {
	Seed uint64
	succ [nEmbd]int
}

// alpha scales the output rows: the winning logit is alpha·sqrt(nEmbd).
const alpha = 4

// noiseStd is the standard deviation of the attention and feed-forward weights.
const noiseStd = 0.02

// NewModel returns the model of seed.
func NewModel(seed uint64) *Model {
	m := &Model{Seed: seed}
	// Sattolo's shuffle: a uniformly random permutation with a single cycle, so that a long
	// answer walks through every word before it repeats.
	r := rand.New(rand.NewPCG(seed, 0x6c6c616d61))
	for i := range m.succ {
		m.succ[i] = i
	}
	for i := nEmbd - 1; i > 0; i-- {
		j := r.IntN(i)
		m.succ[i], m.succ[j] = m.succ[j], m.succ[i]
	}
	return m
}

// Next returns the word the model writes after token id tok.
func (m *Model) Next(tok int) string { return Words[m.succ[embedDim(tok)]] }

// embedDim is the one dimension in which token tok's embedding is 1: its own for a word,
// and for any other token that of the word it stands in for.
func embedDim(tok int) int {
	if tok >= FirstWord {
		return tok - FirstWord
	}
	return tok % nEmbd
}

// ChatReply is the answer of n words to any chat request (and to the Messages and
// Responses APIs, which llama-server renders through the same chat template): the
// template ends every prompt with "assistant:", whose last byte decides the first word.
func (m *Model) ChatReply(n int) string { return m.Completion("assistant:", n) }

// Completion is the answer of n words to a text completion of prompt. A prompt is
// tokenized to bytes (no word can be formed from its characters), so its last byte
// decides the first word.
func (m *Model) Completion(prompt string, n int) string {
	if prompt == "" || n <= 0 {
		return ""
	}
	first := m.Next(firstByte + int(prompt[len(prompt)-1]))
	return " " + first + m.After(first, n-1)
}

// After returns the n words the model writes after word w, each with its leading space.
func (m *Model) After(w string, n int) string {
	i := wordIndex(w)
	if i < 0 {
		return ""
	}
	var b bytes.Buffer
	for range n {
		i = m.succ[i]
		b.WriteString(" " + Words[i])
	}
	return b.String()
}

func wordIndex(w string) int {
	for i, x := range Words {
		if x == w {
			return i
		}
	}
	return -1
}

// WriteFile writes the model as a GGUF file.
func (m *Model) WriteFile(path string) error {
	var b bytes.Buffer
	if err := m.write(&b); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// GGUF returns the model file's bytes.
func (m *Model) GGUF() ([]byte, error) {
	var b bytes.Buffer
	err := m.write(&b)
	return b.Bytes(), err
}

func (m *Model) write(w *bytes.Buffer) error {
	tokens := make([]string, VocabSize)
	scores := make([]float32, VocabSize)
	types := make([]int32, VocabSize)
	// Token types of llama.cpp's vocabulary: 1 normal, 2 unknown, 3 control, 6 byte.
	tokens[tokUnk], types[tokUnk] = "<unk>", 2
	tokens[tokBOS], types[tokBOS] = "<s>", 3
	tokens[tokEOS], types[tokEOS] = "</s>", 3
	for b := range 256 {
		tokens[firstByte+b], types[firstByte+b] = fmt.Sprintf("<0x%02X>", b), 6
	}
	for i, word := range Words {
		tokens[FirstWord+i], types[FirstWord+i] = "▁"+word, 1
		// Scores only rank merges of the tokenizer; no word is reachable from the
		// characters of a prompt (no intermediate pieces exist), so prompts tokenize to
		// bytes and the scores are left equal.
		scores[FirstWord+i] = -1
	}
	meta := []kv{
		{"general.architecture", "llama"},
		{"general.name", "fencegate tiny"},
		{"general.alignment", uint32(ggufAlignment)},
		{"general.file_type", uint32(0)}, // all F32
		{"llama.vocab_size", uint32(VocabSize)},
		{"llama.context_length", uint32(trainCtx)},
		{"llama.embedding_length", uint32(nEmbd)},
		{"llama.block_count", uint32(nLayer)},
		{"llama.feed_forward_length", uint32(nFF)},
		{"llama.rope.dimension_count", uint32(nEmbd / nHead)},
		{"llama.rope.freq_base", float32(10000)},
		{"llama.attention.head_count", uint32(nHead)},
		{"llama.attention.head_count_kv", uint32(nHead)},
		{"llama.attention.layer_norm_rms_epsilon", float32(1e-5)},
		{"tokenizer.ggml.model", "llama"},
		{"tokenizer.ggml.tokens", tokens},
		{"tokenizer.ggml.scores", scores},
		{"tokenizer.ggml.token_type", types},
		{"tokenizer.ggml.unknown_token_id", uint32(tokUnk)},
		{"tokenizer.ggml.bos_token_id", uint32(tokBOS)},
		{"tokenizer.ggml.eos_token_id", uint32(tokEOS)},
		{"tokenizer.ggml.add_bos_token", true},
		{"tokenizer.ggml.add_eos_token", false},
		{"tokenizer.chat_template", ChatTemplate},
	}
	return writeGGUF(w, meta, m.tensors())
}

func (m *Model) tensors() []tensor {
	r := rand.New(rand.NewPCG(m.Seed, 0x7765696768747321))
	noise := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(r.NormFloat64() * noiseStd)
		}
		return out
	}
	ones := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = 1
		}
		return out
	}
	emb := make([]float32, VocabSize*nEmbd)
	for tok := range VocabSize {
		emb[tok*nEmbd+embedDim(tok)] = 1
	}
	var pred [nEmbd]int
	for i, s := range m.succ {
		pred[s] = i
	}
	out := make([]float32, VocabSize*nEmbd)
	for j := range nEmbd {
		out[(FirstWord+j)*nEmbd+pred[j]] = alpha
	}
	ts := []tensor{
		{"token_embd.weight", []int{nEmbd, VocabSize}, emb},
		{"output_norm.weight", []int{nEmbd}, ones(nEmbd)},
		{"output.weight", []int{nEmbd, VocabSize}, out},
	}
	for l := range nLayer {
		p := fmt.Sprintf("blk.%d.", l)
		ts = append(ts,
			tensor{p + "attn_norm.weight", []int{nEmbd}, ones(nEmbd)},
			tensor{p + "attn_q.weight", []int{nEmbd, nEmbd}, noise(nEmbd * nEmbd)},
			tensor{p + "attn_k.weight", []int{nEmbd, nEmbd}, noise(nEmbd * nEmbd)},
			tensor{p + "attn_v.weight", []int{nEmbd, nEmbd}, noise(nEmbd * nEmbd)},
			tensor{p + "attn_output.weight", []int{nEmbd, nEmbd}, noise(nEmbd * nEmbd)},
			tensor{p + "ffn_norm.weight", []int{nEmbd}, ones(nEmbd)},
			tensor{p + "ffn_gate.weight", []int{nEmbd, nFF}, noise(nEmbd * nFF)},
			tensor{p + "ffn_up.weight", []int{nEmbd, nFF}, noise(nEmbd * nFF)},
			tensor{p + "ffn_down.weight", []int{nFF, nEmbd}, noise(nFF * nEmbd)},
		)
	}
	return ts
}
