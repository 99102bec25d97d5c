package sim

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
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

	// CacheConfig holds the labels of vllm:cache_config_info, which vLLM
	// fills with the fields of its CacheConfig and nothing else: keys given
	// here override the defaults (see defaultCacheConfig), and a key that is
	// no CacheConfig field is refused, so that nothing can learn from the sim
	// what it could not learn from vLLM. "block_size" and "num_gpu_blocks"
	// also size the prefix cache and the KV usage gauge.
	CacheConfig map[string]string

	// Revision is the weights revision the replica was started with. vLLM
	// does not report a revision as such: it shows only where the weights
	// came from, the --model argument, as the root of its /v1/models card.
	// So a revision surfaces only there, as a Hugging Face cache snapshot
	// path (…/models--fencegate--<Model>/snapshots/<Revision>). Empty: the
	// root is the model's name, as when vLLM is given a hub id.
	Revision string

	// ModelPath, when set, is the root of the /v1/models card as is (the
	// --model argument), whatever Revision says.
	ModelPath string

	// Version is what GET /version reports; default DefaultVersion.
	Version string

	// Weights decides the text the replica generates: replicas with equal
	// Weights answer a request alike, others differ. Default: Name, so that
	// replicas are told apart by their answers. It is not reported anywhere,
	// as weights that changed under an unchanged name are not: a replica
	// given other Weights claims the same fingerprint and answers otherwise.
	Weights string

	// DivergeFirst makes the first this many generation requests answer as
	// other weights would, then the replica answers as its Weights again: a
	// passing disagreement, as batch-size effects make on real engines.
	DivergeFirst int

	// CacheFault makes the prefix cache corrupt answers: CacheFaultBlockBoundary
	// ("block-boundary") changes the answer of a sequence whose prompt came from the
	// cache up to its last token, the cached part ending at a block edge (a prompt of
	// k·block_size+1 tokens, sent again). Prefill costs are unchanged and nothing
	// reports the fault, as nothing does on a real engine. Empty: the cache is correct.
	CacheFault string

	// ToolCallIDStyle is how tool call ids look: ToolCallIDsVLLM
	// ("chatcmpl-tool-" and 32 hex digits, the default) or
	// ToolCallIDsMistral (9 letters and digits, as vLLM makes them for
	// Mistral models). Ids are random per request either way.
	ToolCallIDStyle string

	LegacyErrors bool // emit older vLLM flat error bodies {"object":"error","message":..,"type":..,"param":null,"code":400}

	// ToolServers are vLLM's --tool-server: MCP servers the engine calls itself for the
	// engine-run tools of a Responses request (toolserver.go), each "host:port" (the SSE
	// transport at /sse, as vLLM connects) or an http(s):// URL (streamable HTTP). Empty:
	// the replica runs no tool, as vLLM without --tool-server.
	ToolServers []string

	// KVEvents is vLLM's --kv-events-config: with enable_kv_cache_events, the replica
	// publishes its prefix cache's changes on ZMQ as vLLM does (kvpublish.go). Nil: none.
	KVEvents *KVEventsConfig

	// ServerDevMode is vLLM's VLLM_SERVER_DEV_MODE=1: the development endpoints, of which
	// the sim serves POST /reset_prefix_cache.
	ServerDevMode bool

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

// DefaultVersion is the vLLM version the sim reports by default.
const DefaultVersion = "0.11.0"

// defaultCacheConfig returns the cache_config_info labels a replica reports
// when Config leaves them unset: vLLM's CacheConfig fields, as strings (its
// metrics_info), at the values a one-GPU server has.
func defaultCacheConfig() map[string]string {
	return map[string]string{
		"block_size":               "16",
		"cache_dtype":              "auto",
		"enable_prefix_caching":    "True",
		"gpu_memory_utilization":   "0.9",
		"is_attention_free":        "False",
		"num_cpu_blocks":           "None",
		"num_gpu_blocks":           "2048",
		"num_gpu_blocks_override":  "None",
		"prefix_caching_hash_algo": "sha256",
		"sliding_window":           "None",
	}
}

// cacheConfigFields are the field names of vLLM's CacheConfig (vllm/config/cache.py),
// across the versions whose labels a gateway may meet: the only labels
// vllm:cache_config_info can have.
var cacheConfigFields = []string{
	"block_size", "cache_dtype", "enable_prefix_caching", "gpu_memory_utilization",
	"is_attention_free", "num_cpu_blocks", "num_gpu_blocks", "num_gpu_blocks_override",
	"prefix_caching_hash_algo", "sliding_window", "swap_space", "cpu_offload_gb",
	"calculate_kv_scales", "kv_cache_memory_bytes", "kv_offloading_size", "kv_offloading_backend",
	"kv_sharing_fast_prefill", "mamba_cache_dtype", "mamba_ssm_cache_dtype", "mamba_block_size",
	"prefix_match_unit", "kv_cache_layout",
}

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
	for _, t := range c.ToolServers {
		if t == "demo" {
			return c, fmt.Errorf("sim: Config.ToolServers: vLLM's demo tool server (a Docker sandbox and a search API) is not simulated; give MCP servers")
		}
		if t == "" {
			return c, fmt.Errorf("sim: Config.ToolServers has an empty entry")
		}
	}
	if c.CacheFault != "" && c.CacheFault != CacheFaultBlockBoundary {
		return c, fmt.Errorf("sim: Config.CacheFault %q is not %q", c.CacheFault, CacheFaultBlockBoundary)
	}
	if c.DivergeFirst < 0 {
		return c, fmt.Errorf("sim: Config.DivergeFirst is negative (%d)", c.DivergeFirst)
	}
	if c.Weights == "" {
		c.Weights = c.Name
	}
	if _, err := c.KVEvents.publishing(); err != nil {
		return c, err
	}
	if c.Version == "" {
		c.Version = DefaultVersion
	}
	if c.ModelPath == "" {
		c.ModelPath = c.Model
		if c.Revision != "" {
			c.ModelPath = "/models/hub/models--fencegate--" + c.Model + "/snapshots/" + c.Revision
		}
	}
	cc := defaultCacheConfig()
	maps.Copy(cc, c.CacheConfig)
	for k := range cc {
		if !slices.Contains(cacheConfigFields, k) {
			return c, fmt.Errorf("sim: Config.CacheConfig key %q is not a field of vLLM's CacheConfig", k)
		}
	}
	for _, k := range []string{"block_size", "num_gpu_blocks"} {
		if n, err := strconv.Atoi(cc[k]); err != nil || n <= 0 {
			return c, fmt.Errorf("sim: Config.CacheConfig[%q] = %q is not a positive integer", k, cc[k])
		}
	}
	c.CacheConfig = cc
	return c, nil
}

// blockSize is the prefix-cache block size in tokens.
func (c Config) blockSize() int {
	n, _ := strconv.Atoi(c.CacheConfig["block_size"])
	return n
}

// numGPUBlocks is the KV cache capacity in blocks, the denominator of
// vllm:kv_cache_usage_perc and the size of the prefix cache.
func (c Config) numGPUBlocks() int {
	n, _ := strconv.Atoi(c.CacheConfig["num_gpu_blocks"])
	return n
}
