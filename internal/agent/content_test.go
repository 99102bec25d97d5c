package agent

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/fencegate/fencegate/internal/sim"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func digestOf(t *testing.T, dir string) string {
	t.Helper()
	d, _, err := ContentDigest(dir)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The digest follows the files that decide answers — tokenizer, chat template, model
// configuration, weight index — and ignores the rest of the directory.
func TestContentDigestFollowsWhatDecidesAnswers(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"config.json":                      `{"architectures":["LlamaForCausalLM"],"vocab_size":32000}`,
		"generation_config.json":           `{"temperature":0.6}`,
		"tokenizer.json":                   `{"model":{"type":"BPE","vocab":{"a":0,"b":1}}}`,
		"tokenizer_config.json":            `{"chat_template":"{% for m in messages %}{{ m.content }}{% endfor %}"}`,
		"special_tokens_map.json":          `{"eos_token":"</s>"}`,
		"model.safetensors.index.json":     `{"weight_map":{"lm_head.weight":"model-00001-of-00002.safetensors"}}`,
		"README.md":                        "# a model",
		"model-00001-of-00002.safetensors": "tensor bytes",
	})
	base := digestOf(t, dir)
	_, files, _ := ContentDigest(dir)
	if slices.Contains(files, "README.md") || slices.Contains(files, "model-00001-of-00002.safetensors") || !slices.Contains(files, "tokenizer.json") {
		t.Fatalf("hashed %v", files)
	}
	if digestOf(t, dir) != base {
		t.Fatal("the digest is not stable")
	}
	unrelated := map[string]string{
		"README.md":                        "# the same model, described better",
		"LICENSE":                          "a licence",
		"model-00001-of-00002.safetensors": "the shards are not read",
	}
	writeFiles(t, dir, unrelated)
	if got := digestOf(t, dir); got != base {
		t.Fatal("an unrelated file changed the digest")
	}
	for name, body := range map[string]string{
		"tokenizer.json":        `{"model":{"type":"BPE","vocab":{"a":0,"c":1}}}`,
		"tokenizer_config.json": `{"chat_template":"{% for m in messages %}{{ m.role }}: {{ m.content }}{% endfor %}"}`,
		"chat_template.jinja":   `{{ messages }}`,
		"config.json":           `{"architectures":["LlamaForCausalLM"],"vocab_size":32001}`,
		"tokenizer.model":       "sentencepiece",
	} {
		t.Run(name, func(t *testing.T) {
			d := t.TempDir()
			for _, n := range []string{"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
				"special_tokens_map.json", "model.safetensors.index.json"} {
				b, _ := os.ReadFile(filepath.Join(dir, n))
				writeFiles(t, d, map[string]string{n: string(b)})
			}
			if digestOf(t, d) != base {
				t.Fatal("a copy of the directory has another digest")
			}
			writeFiles(t, d, map[string]string{name: body})
			if digestOf(t, d) == base {
				t.Fatalf("changing %s left the digest unchanged", name)
			}
		})
	}
	if _, _, err := ContentDigest(t.TempDir()); err == nil {
		t.Error("an empty directory has a digest")
	}
	if _, _, err := ContentDigest(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing directory has a digest")
	}
}

// gguf writes a GGUF v3 file: one string metadata pair (the chat template), one tensor
// info, padding, then the tensor data.
func gguf(template string, data []byte) []byte {
	var b bytes.Buffer
	le := func(v any) { binary.Write(&b, binary.LittleEndian, v) }
	str := func(s string) { le(uint64(len(s))); b.WriteString(s) }
	b.WriteString("GGUF")
	le(uint32(3))
	le(uint64(1)) // tensors
	le(uint64(2)) // metadata pairs
	str("tokenizer.chat_template")
	le(uint32(8))
	str(template)
	str("tokenizer.ggml.tokens")
	le(uint32(9))
	le(uint32(8))
	le(uint64(2))
	str("a")
	str("b")
	str("output.weight")
	le(uint32(1))
	le(uint64(uint64(len(data) / 4)))
	le(uint32(0)) // F32
	le(uint64(0))
	for b.Len()%32 != 0 {
		b.WriteByte(0)
	}
	b.Write(data)
	return b.Bytes()
}

// A GGUF file is hashed up to its tensor data: the template and tokens it carries count,
// the tensor bytes do not.
func TestContentDigestReadsGGUFHead(t *testing.T) {
	write := func(template string, data []byte) string {
		d := t.TempDir()
		writeFiles(t, d, map[string]string{"model-Q4_K_M.gguf": string(gguf(template, data))})
		return digestOf(t, d)
	}
	base := write("{{ messages }}", []byte{1, 2, 3, 4, 5, 6, 7, 8})
	if write("{{ messages }}", []byte{9, 9, 9, 9, 9, 9, 9, 9}) != base {
		t.Error("the tensor data changed the digest")
	}
	if write("{{ messages | reverse }}", []byte{1, 2, 3, 4, 5, 6, 7, 8}) == base {
		t.Error("another chat template left the digest unchanged")
	}
	d := t.TempDir()
	writeFiles(t, d, map[string]string{"broken.gguf": "GGUF\x03\x00\x00\x00\x01"})
	if _, _, err := ContentDigest(d); err == nil {
		t.Error("a truncated GGUF file has a digest")
	}
	writeFiles(t, d, map[string]string{"broken.gguf": "GGML whatever"})
	if _, _, err := ContentDigest(d); err == nil {
		t.Error("a file that is not GGUF has a digest")
	}
}

// The agent reports the digest in every renewal, beside what it scrapes.
func TestRenewalCarriesContentDigest(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"config.json": `{}`, "tokenizer.json": `{}`})
	want := digestOf(t, dir)
	s := startSim(t, sim.Config{})
	a := startAgent(t, Config{Engine: s.URL(), ModelDir: dir})
	a.scrapeOnce(testContext(t))
	if _, fp := a.engineState(); fp[FingerprintContent] != want || fp["block_size"] != "16" {
		t.Fatalf("fingerprint %v, want content_sha256 %s", fp, want)
	}
	if _, err := Start(Config{Engine: s.URL(), ModelDir: t.TempDir()}); err == nil {
		t.Fatal("an agent started on a model directory without model files")
	}
}
