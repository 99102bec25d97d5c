package discover

import (
	"bytes"
	"maps"
	"os"
	"strings"
	"testing"
)

// fixture reads a testdata file without its header: the leading lines starting with "#"
// name where the body comes from.
func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	for bytes.HasPrefix(b, []byte("#")) {
		_, b, _ = bytes.Cut(b, []byte("\n"))
	}
	return b
}

func TestVLLMModels(t *testing.T) {
	f, err := VLLMModels(fixture(t, "vllm_models.txt"), "llama-3.1-8b")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"model":         "/models/hub/models--meta-llama--Llama-3.1-8B-Instruct/snapshots/0e9e39f249a16976918f6564b8830bc894c89659",
		"revision":      "0e9e39f249a16976918f6564b8830bc894c89659",
		"max_model_len": "8192",
		"lora":          "sql-lora,chat-lora",
	}
	if f.Engine != "vllm" || !maps.Equal(f.Fingerprint, want) {
		t.Fatalf("facts %+v, want %v", f, want)
	}
	// A pool named otherwise still reads the base card (vLLM's first), never an adapter's.
	if g, err := VLLMModels(fixture(t, "vllm_models.txt"), "other"); err != nil || g.Fingerprint["model"] != want["model"] {
		t.Fatalf("facts %+v, %v", g, err)
	}
	v, err := VLLMVersion(fixture(t, "vllm_version.txt"))
	if err != nil || v != "0.11.0" {
		t.Fatalf("version %q, %v", v, err)
	}
	// A model given as a hub id tells no revision.
	f, err = VLLMModels([]byte(`{"object":"list","data":[{"id":"m","root":"meta-llama/Llama-3.1-8B-Instruct","parent":null,"max_model_len":4096}]}`), "m")
	if err != nil || f.Fingerprint["revision"] != "" || f.Fingerprint["model"] != "meta-llama/Llama-3.1-8B-Instruct" {
		t.Fatalf("facts %+v, %v", f, err)
	}
	for _, bad := range []string{``, `{}`, `{"data":[]}`, `{"data":[{"id":"a","parent":"b"}]}`} {
		if _, err := VLLMModels([]byte(bad), "m"); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if _, err := VLLMVersion([]byte(`{"v":1}`)); err == nil {
		t.Error("a version without version")
	}
}

func TestSGLangServerInfo(t *testing.T) {
	f, err := SGLangServerInfo(fixture(t, "sglang_server_info.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if f.Slots != 0 {
		t.Errorf("slots %d, want 0: the recorded server runs with max_running_requests null", f.Slots)
	}
	if g, _ := SGLangServerInfo([]byte(`{"model_path":"m","max_running_requests":48}`)); g.Slots != 48 || g.CacheTokens != 0 {
		t.Errorf("slots %d, cache %d tokens; want the configured 48 and no cache said", g.Slots, g.CacheTokens)
	}
	if f.CacheTokens != 412345 {
		t.Errorf("cache %d tokens, want the recorded server's max_total_num_tokens, 412345", f.CacheTokens)
	}
	path := "/models/hub/models--Qwen--Qwen2.5-7B-Instruct/snapshots/a09a35458c702b33eeacc393d103063234e8bc28"
	want := map[string]string{
		"model":                  path,
		"revision":               "a09a35458c702b33eeacc393d103063234e8bc28",
		"tokenizer":              path,
		"dtype":                  "bfloat16",
		"cache_dtype":            "auto",
		"quantization":           "fp8",
		"tensor_parallel_size":   "2",
		"pipeline_parallel_size": "1",
		"block_size":             "1",
		"max_model_len":          "32768",
		"chat_template":          "qwen2-5",
		"lora":                   "sql,/adapters/chat-lora",
	}
	if f.Engine != "sglang" || f.Version != "0.5.4" || !maps.Equal(f.Fingerprint, want) {
		t.Fatalf("facts %+v\nwant %v", f, want)
	}
	// An explicit --revision wins over the path; arguments left at None are not facts;
	// lora_paths as a dict keeps its order.
	f, err = SGLangServerInfo([]byte(`{"model_path":"org/m","revision":"v2","quantization":null,"chat_template":null,"context_length":null,"lora_paths":{"b":"/b","a":"/a"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"model": "org/m", "revision": "v2", "lora": "b,a"}; !maps.Equal(f.Fingerprint, want) {
		t.Fatalf("facts %v, want %v", f.Fingerprint, want)
	}
	if f, _ := SGLangServerInfo([]byte(`{"model_path":"m","lora_paths":[{"lora_name":"x","lora_path":"/x"}]}`)); f.Fingerprint["lora"] != "x" {
		t.Fatalf("LoRARef list: %v", f.Fingerprint)
	}
	if _, err := SGLangServerInfo([]byte(`{"version":"1"}`)); err == nil {
		t.Error("no model_path, no error")
	}
}

func TestLlamaCppProps(t *testing.T) {
	body := fixture(t, "llamacpp_props.txt")
	f, err := LlamaCppProps(body)
	if err != nil {
		t.Fatal(err)
	}
	if f.Slots != 2 {
		t.Errorf("slots %d, want the recorded total_slots 2", f.Slots)
	}
	tmpl := "{%- for message in messages -%}{{ message['role'] + ': ' }}"
	if f.Engine != "llamacpp" || f.Version != "b11669-Debian" || f.Fingerprint["model"] != "/models/tiny.gguf" ||
		f.Fingerprint["quantization"] != "all F32" || f.Fingerprint["max_model_len"] != "4096" ||
		!strings.HasPrefix(f.Fingerprint["chat_template"], "sha256:") || f.Fingerprint["revision"] != "" || f.Fingerprint["lora"] != "" {
		t.Fatalf("facts %+v", f)
	}
	if !bytes.Contains(body, []byte(tmpl)) {
		t.Fatal("the fixture's template changed")
	}
	// Another template is another fact.
	other := bytes.Replace(body, []byte("assistant:"), []byte("Assistant:"), 1)
	g, err := LlamaCppProps(other)
	if err != nil || g.Fingerprint["chat_template"] == f.Fingerprint["chat_template"] {
		t.Fatalf("templates that differ compare equal: %v, %v", g.Fingerprint, err)
	}
	// /v1/models of llama.cpp is no /props.
	if _, err := LlamaCppProps(fixture(t, "llamacpp_models.txt")); err == nil {
		t.Error("/v1/models read as /props")
	}
}

func TestRevisionFromPath(t *testing.T) {
	for p, want := range map[string]string{
		"/root/.cache/huggingface/hub/models--org--m/snapshots/abc123/":       "abc123",
		"/root/.cache/huggingface/hub/models--org--m/snapshots/abc123/m.gguf": "abc123",
		"/models/snapshots/abc123":      "",
		"org/m":                         "",
		"":                              "",
		"/hub/models--org--m/snapshots": "",
		"hub/models--a--b/snapshots/0e9e39f249a16976918f6564b8830bc894c89659/x": "0e9e39f249a16976918f6564b8830bc894c89659",
	} {
		if got := RevisionFromPath(p); got != want {
			t.Errorf("%q: %q, want %q", p, got, want)
		}
	}
}
