// Package discover turns what an inference engine says about itself over HTTP into
// fingerprint facts: vLLM's /v1/models and /version, SGLang's server info (/server_info,
// formerly /get_server_info), llama.cpp server's /props. Each engine tells a different part
// of what decides its answers, and none tells all of it; a fact an engine does not state is
// left out rather than guessed, so that it can never contradict the configuration by
// accident (docs/design.md §3).
//
// It parses bytes it is given and does no I/O of its own. It imports no other fencegate
// package.
package discover

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// Paths an engine is asked, per engine kind; the parser of each answer is named after
// it. ModelsPath is the OpenAI-compatible model list every engine serves, which vLLM's
// cards make a source of facts.
const (
	ModelsPath        = "/v1/models" // VLLMModels
	VLLMVersionPath   = "/version"   // VLLMVersion
	LlamaCppPropsPath = "/props"     // LlamaCppProps
)

// SGLangPaths are SGLang's server info (SGLangServerInfo), in the order to try them: SGLang
// renamed /get_server_info to /server_info (the old path answers with a deprecation warning
// in its log), so the new one is tried first.
var SGLangPaths = []string{"/server_info", "/get_server_info"}

// Facts is what one engine reported about itself.
type Facts struct {
	// Engine is the kind that was read: vllm, sglang or llamacpp.
	Engine string
	// Version is the engine's own version (vLLM's /version, SGLang's version, llama.cpp's
	// build_info). It is shown, not compared: a rolling upgrade must not stop reruns.
	Version string
	// Fingerprint holds the facts under the gateway's fingerprint keys (config.FingerprintKeys).
	Fingerprint map[string]string
	// Slots is how many requests the engine decodes at once, when it says (llama.cpp's
	// total_slots, SGLang's max_running_requests when set); 0: it does not. vLLM states no
	// max_num_seqs anywhere it can be read.
	Slots int
	// CacheTokens is the engine's KV cache in tokens, when its server info says (SGLang's
	// max_total_num_tokens); 0: it does not. vLLM says it in its metrics instead
	// (vllm:cache_config_info's num_gpu_blocks × block_size).
	CacheTokens int64
}

func (f *Facts) set(k, v string) {
	if v == "" {
		return
	}
	if f.Fingerprint == nil {
		f.Fingerprint = map[string]string{}
	}
	f.Fingerprint[k] = v
}

// VLLMModels reads vLLM's GET /v1/models (OpenAIServingModels.show_available_models): the
// card of the served model gives the weights it loaded (root, the --model argument),
// their revision when root is a Hugging Face cache snapshot, and max_model_len; the cards
// whose parent is that model are its LoRA adapters, in the order vLLM lists them. served
// names the pool's model; when no card has that id, the first base card is used.
func VLLMModels(body []byte, served string) (Facts, error) {
	f := Facts{Engine: "vllm"}
	if !gjson.ValidBytes(body) {
		return f, fmt.Errorf("vllm /v1/models: not JSON")
	}
	data := gjson.GetBytes(body, "data")
	if !data.IsArray() || len(data.Array()) == 0 {
		return f, fmt.Errorf("vllm /v1/models: no model cards")
	}
	var base gjson.Result
	for _, c := range data.Array() {
		isBase := c.Get("parent").Type == gjson.Null
		if isBase && c.Get("id").String() == served {
			base = c
			break
		}
		if isBase && !base.Exists() {
			base = c
		}
	}
	if !base.Exists() {
		return f, fmt.Errorf("vllm /v1/models: no base model card")
	}
	root := base.Get("root").String()
	f.set("model", root)
	f.set("revision", RevisionFromPath(root))
	if n := base.Get("max_model_len"); n.Type == gjson.Number {
		f.set("max_model_len", strconv.FormatInt(n.Int(), 10))
	}
	var adapters []string
	for _, c := range data.Array() {
		if p := c.Get("parent"); p.Type == gjson.String && p.String() == base.Get("id").String() {
			adapters = append(adapters, c.Get("id").String())
		}
	}
	f.set("lora", strings.Join(adapters, ","))
	return f, nil
}

// VLLMVersion reads vLLM's GET /version: {"version": "..."}.
func VLLMVersion(body []byte) (string, error) {
	v := gjson.GetBytes(body, "version")
	if !gjson.ValidBytes(body) || v.Type != gjson.String {
		return "", fmt.Errorf("vllm /version: no version")
	}
	return v.String(), nil
}

// SGLangServerInfo reads SGLang's server info: its ServerArgs as a dict, the scheduler's
// info and its version (http_server.py get_server_info / server_info). Arguments left at
// None (quantization, chat_template, context_length) mean "the model's own", which the
// reply does not resolve, so they are left out.
func SGLangServerInfo(body []byte) (Facts, error) {
	f := Facts{Engine: "sglang"}
	if !gjson.ValidBytes(body) || !gjson.GetBytes(body, "model_path").Exists() {
		return f, fmt.Errorf("sglang server info: no model_path")
	}
	str := func(path string) string {
		r := gjson.GetBytes(body, path)
		switch r.Type {
		case gjson.String:
			return r.String()
		case gjson.Number:
			return strconv.FormatInt(r.Int(), 10)
		}
		return ""
	}
	model := str("model_path")
	f.Version = str("version")
	if n := gjson.GetBytes(body, "max_running_requests"); n.Type == gjson.Number && n.Int() > 0 {
		f.Slots = int(n.Int())
	}
	if n := gjson.GetBytes(body, "max_total_num_tokens"); n.Type == gjson.Number && n.Int() > 0 {
		f.CacheTokens = n.Int()
	}
	f.set("model", model)
	f.set("revision", str("revision"))
	if f.Fingerprint["revision"] == "" {
		f.set("revision", RevisionFromPath(model))
	}
	f.set("tokenizer", str("tokenizer_path"))
	f.set("dtype", str("dtype"))
	f.set("cache_dtype", str("kv_cache_dtype"))
	f.set("quantization", str("quantization"))
	f.set("tensor_parallel_size", str("tp_size"))
	f.set("pipeline_parallel_size", str("pp_size"))
	f.set("block_size", str("page_size"))
	f.set("max_model_len", str("context_length"))
	f.set("chat_template", str("chat_template"))
	f.set("lora", sglangAdapters(gjson.GetBytes(body, "lora_paths")))
	return f, nil
}

// sglangAdapters names the adapters of SGLang's lora_paths, in order. The argument has
// taken several shapes: a list of "name=path" or bare paths, a dict of name to path, and a
// list of LoRARef dicts (lora_name, lora_path).
func sglangAdapters(v gjson.Result) string {
	var names []string
	switch {
	case v.IsArray():
		for _, e := range v.Array() {
			switch {
			case e.Type == gjson.String:
				name, _, _ := strings.Cut(e.String(), "=")
				names = append(names, name)
			case e.IsObject():
				names = append(names, e.Get("lora_name").String())
			}
		}
	case v.IsObject():
		v.ForEach(func(k, _ gjson.Result) bool {
			names = append(names, k.String())
			return true
		})
	}
	return strings.Join(names, ",")
}

// LlamaCppProps reads llama.cpp server's GET /props (server_routes: handle_props): the GGUF
// file it serves (model_path), its file type (model_ftype, the quantization), the chat
// template it applies (hashed: its text is long), each slot's context (n_ctx) and the
// build. Servers before model_ftype was added simply report no quantization.
func LlamaCppProps(body []byte) (Facts, error) {
	f := Facts{Engine: "llamacpp"}
	if !gjson.ValidBytes(body) || !gjson.GetBytes(body, "default_generation_settings").Exists() {
		return f, fmt.Errorf("llama.cpp /props: no default_generation_settings")
	}
	model := gjson.GetBytes(body, "model_path").String()
	f.Version = gjson.GetBytes(body, "build_info").String()
	f.set("model", model)
	f.set("revision", RevisionFromPath(model))
	f.set("quantization", gjson.GetBytes(body, "model_ftype").String())
	if t := gjson.GetBytes(body, "chat_template"); t.Type == gjson.String && t.String() != "" {
		f.set("chat_template", TextDigest(t.String()))
	}
	if n := gjson.GetBytes(body, "default_generation_settings.n_ctx"); n.Type == gjson.Number {
		f.set("max_model_len", strconv.FormatInt(n.Int(), 10))
	}
	var adapters []string
	gjson.GetBytes(body, "default_generation_settings.params.lora").ForEach(func(_, a gjson.Result) bool {
		adapters = append(adapters, a.Get("id").String()+":"+a.Get("scale").String())
		return true
	})
	f.set("lora", strings.Join(adapters, ","))
	if n := gjson.GetBytes(body, "total_slots"); n.Type == gjson.Number && n.Int() > 0 {
		f.Slots = int(n.Int())
	}
	return f, nil
}

// RevisionFromPath finds the revision in a Hugging Face cache path
// (…/models--org--name/snapshots/<commit>/…): the only place an engine that was given a
// local path reveals which commit of the weights it loaded. Other paths and hub ids give "".
func RevisionFromPath(p string) string {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	for i := 0; i+1 < len(parts); i++ {
		if parts[i] == "snapshots" && i > 0 && strings.HasPrefix(parts[i-1], "models--") {
			return parts[i+1]
		}
	}
	return ""
}

// TextDigest names a long text (a chat template) by its SHA-256, so that two engines'
// templates compare without carrying the text around.
func TextDigest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}
