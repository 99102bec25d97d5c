package sim

import (
	"fmt"
	"maps"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Config describes one simulated replica. The zero value is usable: every
// field that is left zero gets the default named in its comment.
type Config struct {
	Name  string // replica name, also the salt of its output text; default "sim"
	Model string // served model name; default "sim-model"
	Addr  string // listen address; default "127.0.0.1:0"

	PrefillPerToken time.Duration // prefill time per uncached prompt token; default 0
	DecodePerToken  time.Duration // time per generated token; default 0

	MaxRunning       int // concurrent sequences; default 16. Beyond it, requests wait in a FIFO queue.
	MaxWaiting       int // queue limit; 0 = unbounded. When full, reply 429 (vLLM-shaped error) at once.
	DefaultMaxTokens int // when the request sets none; default 16

	// MaxModelLen is vLLM's --max-model-len, the context window: prompt plus
	// max_tokens may not exceed it, and /v1/models and /tokenize report it.
	// Default 8192.
	MaxModelLen int

	// StreamInterval is vLLM's --stream-interval: a stream sends a choice's
	// tokens in chunks of up to this many. As in vLLM's output processor, a
	// choice's first token goes out alone, then a chunk whenever
	// StreamInterval tokens are waiting, and the last chunk carries whatever
	// is left when the choice finishes. Default 1: a chunk per token.
	StreamInterval int

	RestartAfter time.Duration // after a crash, listen again after this long; 0 = stay down until Restart()

	// Task is what the served model does, as vLLM decides from the model
	// and its --runner/--convert options: TaskGenerate ("generate", the
	// default) serves chat, completions, Messages and Responses; TaskEmbed
	// ("embed") serves /v1/embeddings. vLLM registers only the routes of
	// the tasks a model supports, so the other family answers 404.
	Task string

	// EmbeddingDim is the length of an embed replica's vectors; default 384.
	EmbeddingDim int

	// EnableResponsesStore is vLLM's VLLM_ENABLE_RESPONSES_API_STORE=1:
	// the Responses API keeps responses (store, the request's default) so
	// that previous_response_id and GET /v1/responses/{id} find them. Off,
	// as in vLLM by default, store is ignored and both answer 404. The
	// store lives in the replica's process: a crash empties it.
	EnableResponsesStore bool

	// APIKey is vLLM's --api-key: every /v1 request must carry
	// "Authorization: Bearer <APIKey>", else 401 {"error":"Unauthorized"};
	// /health, /metrics and /tokenize stay open, as vLLM's middleware only
	// guards /v1. Empty: no key.
	APIKey string

	// Fingerprint holds labels exposed in vllm:cache_config_info and in the
	// /v1/models card. Keys given here override the defaults (see
	// defaultFingerprint); keys must be valid Prometheus label names.
	// "block_size" and "num_gpu_blocks", when set, also size the prefix
	// cache and the KV usage gauge.
	Fingerprint map[string]string

	// ToolCallIDStyle is how tool call ids look: ToolCallIDsVLLM
	// ("chatcmpl-tool-" and 32 hex digits, the default) or
	// ToolCallIDsMistral (9 letters and digits, as vLLM makes them for
	// Mistral models). Ids are random per request either way.
	ToolCallIDStyle string

	LegacyErrors bool // emit older vLLM flat error bodies {"object":"error","message":..,"type":..,"param":null,"code":400}

	// DoneAfterStreamError appends "data: [DONE]" after the mid-stream error
	// event of a status:N fault, as the real vLLM server does after every
	// error event. By default such a stream simply ends after the event.
	// The error fault chooses for itself: error sends [DONE] as vLLM does,
	// error:nodone does not.
	DoneAfterStreamError bool
}

const (
	defaultName       = "sim"
	defaultModel      = "sim-model"
	defaultAddr       = "127.0.0.1:0"
	defaultMaxRunning = 16
	defaultMaxTokens  = 16

	// maxModelLen is the default of Config.MaxModelLen.
	maxModelLen = 8192
)

// defaultFingerprint returns the labels a replica reports when Config leaves
// them unset. The names follow vLLM's cache_config_info where vLLM has one
// and the gateway's replica fingerprint otherwise.
func defaultFingerprint() map[string]string {
	return map[string]string{
		"block_size":            "16",
		"cache_dtype":           "auto",
		"enable_prefix_caching": "True",
		"num_gpu_blocks":        "2048",
		"revision":              "sim-r1",
		"quantization":          "none",
		"tokenizer":             "sim-words-v1",
		"chat_template":         "sim-chatml-v1",
		"tensor_parallel_size":  "1",
	}
}

var labelNamePattern = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// withDefaults returns a copy of c with defaults filled in, or an error
// naming the first field that cannot be used.
func (c Config) withDefaults() (Config, error) {
	if c.Name == "" {
		c.Name = defaultName
	}
	if c.Model == "" {
		c.Model = defaultModel
	}
	if c.Addr == "" {
		c.Addr = defaultAddr
	}
	if c.MaxRunning == 0 {
		c.MaxRunning = defaultMaxRunning
	}
	if c.DefaultMaxTokens == 0 {
		c.DefaultMaxTokens = defaultMaxTokens
	}
	if c.StreamInterval == 0 {
		c.StreamInterval = 1
	}
	if c.MaxModelLen == 0 {
		c.MaxModelLen = maxModelLen
	}
	if c.ToolCallIDStyle == "" {
		c.ToolCallIDStyle = ToolCallIDsVLLM
	}
	if c.Task == "" {
		c.Task = TaskGenerate
	}
	if c.EmbeddingDim == 0 {
		c.EmbeddingDim = defaultEmbeddingDim
	}
	switch {
	case c.PrefillPerToken < 0:
		return c, fmt.Errorf("sim: Config.PrefillPerToken is negative (%v)", c.PrefillPerToken)
	case c.DecodePerToken < 0:
		return c, fmt.Errorf("sim: Config.DecodePerToken is negative (%v)", c.DecodePerToken)
	case c.RestartAfter < 0:
		return c, fmt.Errorf("sim: Config.RestartAfter is negative (%v)", c.RestartAfter)
	case c.MaxRunning < 0:
		return c, fmt.Errorf("sim: Config.MaxRunning is negative (%d)", c.MaxRunning)
	case c.MaxWaiting < 0:
		return c, fmt.Errorf("sim: Config.MaxWaiting is negative (%d)", c.MaxWaiting)
	case c.DefaultMaxTokens < 0:
		return c, fmt.Errorf("sim: Config.DefaultMaxTokens is negative (%d)", c.DefaultMaxTokens)
	case c.ToolCallIDStyle != ToolCallIDsVLLM && c.ToolCallIDStyle != ToolCallIDsMistral:
		return c, fmt.Errorf("sim: Config.ToolCallIDStyle %q is neither %q nor %q", c.ToolCallIDStyle, ToolCallIDsVLLM, ToolCallIDsMistral)
	case c.MaxModelLen < 0:
		return c, fmt.Errorf("sim: Config.MaxModelLen is negative (%d)", c.MaxModelLen)
	case c.StreamInterval < 0:
		return c, fmt.Errorf("sim: Config.StreamInterval is negative (%d)", c.StreamInterval)
	case c.Task != TaskGenerate && c.Task != TaskEmbed:
		return c, fmt.Errorf("sim: Config.Task %q is neither %q nor %q", c.Task, TaskGenerate, TaskEmbed)
	case c.EmbeddingDim < 0:
		return c, fmt.Errorf("sim: Config.EmbeddingDim is negative (%d)", c.EmbeddingDim)
	}
	fp := defaultFingerprint()
	maps.Copy(fp, c.Fingerprint)
	for k := range fp {
		if !labelNamePattern.MatchString(k) || strings.HasPrefix(k, "__") {
			return c, fmt.Errorf("sim: Config.Fingerprint key %q is not a valid label name", k)
		}
	}
	for _, k := range []string{"block_size", "num_gpu_blocks"} {
		if n, err := strconv.Atoi(fp[k]); err != nil || n <= 0 {
			return c, fmt.Errorf("sim: Config.Fingerprint[%q] = %q is not a positive integer", k, fp[k])
		}
	}
	c.Fingerprint = fp
	return c, nil
}

// blockSize is the prefix-cache block size in tokens.
func (c Config) blockSize() int {
	n, _ := strconv.Atoi(c.Fingerprint["block_size"])
	return n
}

// numGPUBlocks is the KV cache capacity in blocks, the denominator of
// vllm:kv_cache_usage_perc and the size of the prefix cache.
func (c Config) numGPUBlocks() int {
	n, _ := strconv.Atoi(c.Fingerprint["num_gpu_blocks"])
	return n
}
