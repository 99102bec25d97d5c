package llamatest

import (
	"bytes"
	"testing"
)

// The file reads back as GGUF v3 with the metadata llama.cpp needs for a llama model and
// its tokenizer, and the tensor data starts and ends aligned.
func TestGGUFMetadata(t *testing.T) {
	b, err := NewModel(1).GGUF()
	if err != nil {
		t.Fatal(err)
	}
	if len(b)%ggufAlignment != 0 {
		t.Fatalf("file of %d bytes is not a multiple of the alignment", len(b))
	}
	if len(b) > 1<<20 {
		t.Fatalf("file of %d bytes; the model should be a few hundred KB", len(b))
	}
	n, meta, err := readGGUFMeta(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if n != 3+9*nLayer {
		t.Fatalf("%d tensors", n)
	}
	for key, want := range map[string]any{
		"general.architecture":                   "llama",
		"llama.embedding_length":                 uint32(nEmbd),
		"llama.block_count":                      uint32(nLayer),
		"llama.attention.head_count":             uint32(nHead),
		"llama.rope.dimension_count":             uint32(nEmbd / nHead),
		"llama.attention.layer_norm_rms_epsilon": float32(1e-5),
		"tokenizer.ggml.model":                   "llama",
		"tokenizer.ggml.eos_token_id":            uint32(tokEOS),
		"tokenizer.ggml.add_bos_token":           true,
		"tokenizer.chat_template":                ChatTemplate,
	} {
		if meta[key] != want {
			t.Errorf("%s = %#v, want %#v", key, meta[key], want)
		}
	}
	tokens, _ := meta["tokenizer.ggml.tokens"].([]any)
	types, _ := meta["tokenizer.ggml.token_type"].([]any)
	if len(tokens) != VocabSize || len(types) != VocabSize {
		t.Fatalf("%d tokens, %d types", len(tokens), len(types))
	}
	if tokens[firstByte+0x0A] != "<0x0A>" || types[firstByte+0x0A] != int32(6) {
		t.Errorf("byte token %v type %v", tokens[firstByte+0x0A], types[firstByte+0x0A])
	}
	if tokens[FirstWord] != "▁"+Words[0] || types[FirstWord] != int32(1) {
		t.Errorf("first word %v type %v", tokens[FirstWord], types[FirstWord])
	}
}

// One seed, one file; another seed, another model.
func TestModelDeterministic(t *testing.T) {
	a, _ := NewModel(7).GGUF()
	b, _ := NewModel(7).GGUF()
	c, _ := NewModel(8).GGUF()
	if !bytes.Equal(a, b) {
		t.Fatal("the same seed wrote different files")
	}
	if bytes.Equal(a, c) {
		t.Fatal("two seeds wrote the same file")
	}
}

// The successor of the words is one cycle through all of them, so an answer repeats only
// after every word was used.
func TestSuccessorIsOneCycle(t *testing.T) {
	m := NewModel(3)
	seen := map[int]bool{}
	i := 0
	for range nEmbd {
		if seen[i] {
			t.Fatalf("cycle shorter than %d words", nEmbd)
		}
		seen[i] = true
		i = m.succ[i]
	}
	if i != 0 {
		t.Fatal("not a cycle")
	}
}
