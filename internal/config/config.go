package config

import "time"

// Config is the whole gateway configuration. The zero value of every optional field means
// "use the default", which Validate fills in.
type Config struct {
	// Listen is the gateway's HTTP address. Default 127.0.0.1:8080.
	Listen string `yaml:"listen"`
	// AdminListen, when set, is a second address that alone serves /metrics, /readyz,
	// /admin/* and /debug/pprof/; the public listener then serves only /v1/* and /healthz.
	// Bound to a loopback address, its admin calls need no admin key; bound elsewhere they
	// do (auth.admin_keys is then required). Unset: one listener serves everything, pprof
	// is off, admin calls need an admin key (off without one: a client's address on a
	// shared listener proves nothing), and /readyz tells others only what is ready.
	AdminListen string `yaml:"admin_listen"`
	// Metrics configures the gateway's own /metrics.
	Metrics Metrics `yaml:"metrics"`
	// Server bounds what a slow or hostile client can hold of the HTTP server.
	Server Server `yaml:"server"`
	// TLS, when set, serves HTTPS on Listen instead of plain HTTP.
	TLS TLS `yaml:"tls"`
	// Models lists the pools: one per served model name.
	Models []Model `yaml:"models"`
	// Policy is the failover policy of docs/design.md §3.
	Policy Policy `yaml:"policy"`
	// Health configures active probes and passive health.
	Health Health `yaml:"health"`
	// Limits bounds what a client may send.
	Limits Limits `yaml:"limits"`
	// Auth, when it lists keys, requires a bearer API key on every /v1 request.
	Auth Auth `yaml:"auth"`
	// Store is where the request journal and idempotency keys live: "sqlite:PATH" (the
	// default, sqlite:fencegate.db), "postgres://..." for several gateways sharing one
	// database, or "memory:" (lost at exit; for tests).
	Store string `yaml:"store"`
	// GatewayID names this gateway as the owner of the requests it runs. Default: host name
	// plus a random suffix, new at every start.
	GatewayID string `yaml:"gateway_id"`
	// Idempotency configures Idempotency-Key handling.
	Idempotency Idempotency `yaml:"idempotency"`
	// Traces says which requests keep a trace document — the request, its attempts, what
	// the client received and how it ended — to read at GET /admin/requests/{id}/trace and
	// to replay (docs/design.md §7). Off by default: inputs may be private.
	Traces Traces `yaml:"traces"`
	// Leases configures the leases of attempts on replicas with an agent.
	Leases Leases `yaml:"leases"`
	// Shutdown configures how a stopping gateway ends its running requests.
	Shutdown Shutdown `yaml:"shutdown"`
	// AgentSecretFile holds the secret shared with the agents (their --secret-file), sent
	// on every renewal and cancel. Optional: agents without a secret accept control calls
	// from loopback only.
	AgentSecretFile string `yaml:"agent_secret_file"`
}

// Shutdown configures the drain on SIGTERM.
type Shutdown struct {
	// DrainGrace is how long running requests may go on after the gateway was told to
	// stop; those still running then end with a gateway_shutdown error event. The process
	// exits within the grace plus a few seconds whatever the clients do. Default 25s.
	DrainGrace Duration `yaml:"drain_grace"`
}

// Leases configures attempt leases (docs/design.md §4).
type Leases struct {
	// TTL: an agent aborts an attempt whose lease was not renewed for this long. It bounds
	// how long a cut-off replica keeps decoding, and how long a rerun after a partition
	// waits. Default 3s.
	TTL Duration `yaml:"ttl"`
	// RenewEvery is the period of the batched renewal (the heartbeat). Default 1s, three
	// renewals per TTL, so one lost renewal never expires a healthy lease.
	RenewEvery Duration `yaml:"renew_every"`
	// DriftMargin is added to the gateway's computation of a lease's expiry (clock rate
	// drift, the agent's timer firing late). Default 500ms.
	DriftMargin Duration `yaml:"drift_margin"`
	// HeartbeatTimeout: an agent that acknowledged no renewal for this long is unreachable,
	// and its attempts uncertain. Default two renewals.
	HeartbeatTimeout Duration `yaml:"heartbeat_timeout"`
}

// Idempotency configures Idempotency-Key handling and the journal's retention.
type Idempotency struct {
	// Retention is how long a request and its key are kept. Default 24h.
	Retention Duration `yaml:"retention"`
	// OwnerLease is how long a gateway's ownership of a running request lasts without
	// renewal; after a gateway dies, another may take over a request that crossed no
	// boundary once this has passed. Renewed every third of it. Default 10s.
	OwnerLease Duration `yaml:"owner_lease"`
	// MaxReplayBytes bounds the stored response of a keyed request. Default 8 MiB.
	MaxReplayBytes int `yaml:"max_replay_bytes"`
}

// Model is one pool: the replicas that serve one model name.
type Model struct {
	Name     string    `yaml:"name"`
	Replicas []Replica `yaml:"replicas"`
	// MaxOutstanding bounds this gateway's requests in flight on one replica (0: none).
	MaxOutstanding int `yaml:"max_outstanding"`
	// MaxQueue: a replica whose engine reports this many waiting requests gets no new work.
	// When every replica is at a limit, new requests get 429 with Retry-After at once instead
	// of queueing without bound. Default 32; 0 keeps the default, -1 disables.
	MaxQueue int `yaml:"max_queue"`
	// Queue is where requests wait when every replica is at its capacity (docs/design.md
	// §3, "The queue").
	Queue Queue `yaml:"queue"`
	// ReplicasFrom discovers replicas from DNS (a Kubernetes headless Service): every
	// address the name resolves to is a replica, besides those listed in Replicas.
	ReplicasFrom *Discovery `yaml:"replicas_from"`
	// APIKeyFile and APIKeyEnv are the default engine credentials of the pool's replicas
	// (see Replica.APIKeyFile).
	APIKeyFile string `yaml:"api_key_file"`
	APIKeyEnv  string `yaml:"api_key_env"`
	// Affinity sends requests that share a long prompt prefix to the replica likely to have
	// it cached, within a load bound.
	Affinity Affinity `yaml:"affinity"`
	// Canary, when set, checks that the replicas of each fingerprint group answer a fixed
	// greedy probe alike (docs/design.md §3). Off when absent.
	Canary *Canary `yaml:"canary"`
	// KVEvents is where the pool's engines publish their KV cache events, for every
	// replica that sets none ({host}: each replica's host). Off when absent.
	KVEvents *KVEvents `yaml:"kv_events"`
}

// Queue configures a pool's queue: a request that finds every replica at its capacity
// (max_outstanding) waits for a slot, in its key's priority class and fair share, instead
// of being refused. Without max_outstanding no request waits here (the engines queue
// them).
type Queue struct {
	// MaxWait is how long a request waits before 503 queue_timeout. Default 30s.
	MaxWait Duration `yaml:"max_wait"`
	// MaxLen bounds the waiting requests; when full, the lowest class is shed first, and
	// within it the key furthest over its share (429 queue_full). Default 1024; -1: no
	// queue (all at capacity: 429 pool_overloaded at once).
	MaxLen int `yaml:"max_len"`
}

// Canary configures the consistency canary of a pool: on a schedule, and whenever a
// replica joins or comes back, every replica of a fingerprint group gets the same greedy
// probe (temperature 0, a fixed seed); a replica whose answer differs from its group's
// majority, also on a second try, is marked diverges.
type Canary struct {
	// Every is the period of the check. Default 5m.
	Every Duration `yaml:"every"`
	// MaxTokens is the length of the probe's answer. Default 16.
	MaxTokens int `yaml:"max_tokens"`
	// CompareTokens: only the first this many tokens of the answers are compared, since
	// engines are not bitwise deterministic across batch sizes and a long greedy answer
	// may drift late. Default 8, at most MaxTokens.
	CompareTokens int `yaml:"compare_tokens"`
	// MaxLogprobDistance, when above 0 and both engines report logprobs, also fails two
	// answers whose compared tokens are equal but whose logprobs differ by more than this
	// on average (natural log units). 0: tokens alone decide.
	MaxLogprobDistance float64 `yaml:"max_logprob_distance"`
	// ExcludeFrom says what a diverging replica is kept from: "reruns" (the default: no
	// rerun goes to it or leaves it) or "all" (no new work at all).
	ExcludeFrom string `yaml:"exclude_from"`
	// Prompt is the probe's user message. Default: a short fixed instruction.
	Prompt string `yaml:"prompt"`
	// CacheCheck: every replica also answers a greedy prompt twice, cold and with its prefix
	// cached, at lengths on both sides of multiples of its KV block size; a replica whose
	// answer changes is marked cache_diverges (docs/design.md §3). Default true.
	CacheCheck *bool `yaml:"cache_check"`
	// CacheBlocks are the multiples of the block size the cache check's prompts straddle
	// (k·block−1 and k·block+1 tokens). Default [1, 2]; each 1–8.
	CacheBlocks []int `yaml:"cache_blocks"`
	// CacheBlockSize is the block size used for a replica whose engine reports none
	// (llama.cpp, whose prompt cache reuses a common prefix token by token). Default 16.
	CacheBlockSize int `yaml:"cache_block_size"`
}

// CacheChecked says whether the canary runs the cache check.
func (c *Canary) CacheChecked() bool { return c.CacheCheck == nil || *c.CacheCheck }

// Defaults of the canary.
const (
	DefaultCanaryEvery         = 5 * time.Minute
	DefaultCanaryMaxTokens     = 16
	DefaultCanaryCompareTokens = 8
	DefaultCanaryPrompt        = "Count from one to twenty in words, separated by spaces."
	CanaryExcludeReruns        = "reruns"
	CanaryExcludeAll           = "all"
	DefaultCanaryCacheBlock    = 16
)

// DefaultCanaryCacheBlocks are the multiples of the block size the cache check straddles.
var DefaultCanaryCacheBlocks = []int{1, 2}

const (
	// MaxCanaryCacheBlocks bounds cache_blocks' values, and so the probes' length.
	MaxCanaryCacheBlocks = 8
)

// Affinity configures prefix affinity.
type Affinity struct {
	// PrefixBytes: prompts at least this long are routed by a hash of their first
	// PrefixBytes bytes. Default 512; -1 disables affinity.
	PrefixBytes int `yaml:"prefix_bytes"`
	// LoadBound: the preferred replica is used while its load is at most LoadBound times
	// the least loaded replica's (plus one). Default 1.5.
	LoadBound float64 `yaml:"load_bound"`
	// LoadSlack: the preferred replica is also used while its load exceeds the least
	// loaded replica's by at most LoadSlack requests, whatever LoadBound says. Default 6;
	// -1: none.
	LoadSlack int `yaml:"load_slack"`
	// Policy: cache_aware (default) sends a prompt to the replica the gateway sent the
	// longest prefix of it to, within LoadBound, as far as that replica's KV cache holds;
	// prefix_hash to the replica a hash of its first PrefixBytes bytes prefers.
	Policy string `yaml:"policy"`
}

// Affinity policies.
const (
	AffinityCacheAware = "cache_aware"
	AffinityPrefixHash = "prefix_hash"
)

// Discovery finds a pool's replicas in DNS. Addresses that appear join after a passing
// probe; addresses that vanish drain (running requests finish, no new work) and are then
// removed.
type Discovery struct {
	// DNS is the name whose A/AAAA records are the replicas.
	DNS string `yaml:"dns"`
	// Port is the replicas' port (the engine's, or its agent's).
	Port int `yaml:"port"`
	// Every is how often the name is resolved again. Default 10s.
	Every Duration `yaml:"every"`
	// Scheme is http (default) or https.
	Scheme string `yaml:"scheme"`
	// Agent: the discovered addresses are fencegate agents (fenced mode).
	Agent bool `yaml:"agent"`
	// Engine, Priority and Fingerprint apply to every discovered replica, as for a listed one.
	Engine      string            `yaml:"engine"`
	Priority    int               `yaml:"priority"`
	Fingerprint map[string]string `yaml:"fingerprint"`
	// NameTemplate names each discovered replica in logs, metrics, /readyz and the journal:
	// {ip}, {port}, {host} (the address's reverse DNS name) and {pod} (its first label), e.g.
	// "{pod}". Default "{ip}:{port}", which changes whenever a pod restarts with a new
	// address; "{pod}" is stable for the pods of a StatefulSet behind a headless Service,
	// whose reverse names Kubernetes' DNS answers with the pod's hostname. A name needing a
	// reverse name that cannot be found keeps the name the address had, else is "{ip}:{port}".
	NameTemplate string `yaml:"name_template"`
}

// DefaultDiscoveryEvery is Discovery.Every's default.
const DefaultDiscoveryEvery = 10 * time.Second

// Replica is one inference engine endpoint.
type Replica struct {
	// URL is the engine's (or its agent's) base URL, e.g. http://127.0.0.1:9001.
	URL string `yaml:"url"`
	// Name identifies the replica in logs, metrics and the journal. Default: host:port of URL.
	Name string `yaml:"name"`
	// Priority is the replica's tier: lower tiers serve first; a higher tier serves new
	// requests only when no replica of a lower tier is available (reruns may use any tier).
	Priority int `yaml:"priority"`
	// Fingerprint describes what makes this replica's output interchangeable with another's
	// (the keys of FingerprintKeys). Every value is an assertion: what the engine reports
	// about itself (its metrics, /v1/models, /version, SGLang's server info, llama.cpp's
	// /props, the agent's content digest) is checked against it, and a mismatch keeps the
	// replica out of the pool. Keys left out are filled from what the engine reports.
	Fingerprint map[string]string `yaml:"fingerprint"`
	// KVCacheDomain names a group of replicas that share a KV cache; their fingerprints
	// must be identical.
	KVCacheDomain string `yaml:"kv_cache_domain"`
	// APIKeyFile or APIKeyEnv name where the engine's own API key is (vLLM's and SGLang's
	// --api-key): a file holding it, or an environment variable. The gateway sends it as
	// "Authorization: Bearer" to the engine (and through its agent); it never appears in
	// logs or /readyz. Default: the model's.
	APIKeyFile string `yaml:"api_key_file"`
	APIKeyEnv  string `yaml:"api_key_env"`
	// Engine names the engine behind the URL: vllm, sglang, llamacpp, tgi or generic.
	// Default: found from the engine's metrics (vllm:*, sglang:*), else generic. It decides
	// engine-specific requests, such as per-chunk token usage (vLLM and SGLang).
	Engine string `yaml:"engine"`
	// Agent marks a replica reached through a fencegate agent (fenced mode): its attempts
	// hold leases, so an attempt that goes silent can be proven stopped and rerun.
	Agent bool `yaml:"agent"`
	// KVEvents is where this replica's engine publishes its KV cache events (vLLM's
	// --kv-events-config); default: the model's.
	KVEvents *KVEvents `yaml:"kv_events"`
}

// FingerprintKeys are the fingerprint keys fencegate knows (others are rejected):
//
//	revision                weights revision (a Hugging Face commit, or any label)
//	model                   the weights the engine loaded (its model path or id)
//	content_sha256          the agent's digest of the model directory's answer-deciding files
//	quantization, dtype     weight quantization and compute dtype
//	tokenizer, chat_template
//	cache_dtype, block_size the KV cache's dtype and block (page) size
//	tensor_parallel_size, pipeline_parallel_size
//	max_model_len           the context window
//	lora                    the adapters loaded, comma-separated in order
var FingerprintKeys = []string{"revision", "model", "content_sha256", "quantization", "dtype", "tokenizer",
	"chat_template", "cache_dtype", "tensor_parallel_size", "pipeline_parallel_size", "block_size",
	"max_model_len", "lora"}

// Policy is the failover policy. See docs/design.md §3.
type Policy struct {
	// MaxAttempts bounds the attempts of one logical request (first try included). Default 2.
	MaxAttempts int `yaml:"max_attempts"`
	// IdleTimeout: an open upstream stream that has started answering and then stays silent
	// this long is "uncertain". Default 30s.
	IdleTimeout Duration `yaml:"idle_timeout"`
	// FirstTokenTimeout: an upstream that accepted the request but sends nothing for this long
	// is "uncertain". It is longer than IdleTimeout because queueing and prefill are slow but
	// healthy; a slow first token is never a reason to fail over. Default 120s.
	FirstTokenTimeout Duration `yaml:"first_token_timeout"`
	// NonStreamTimeout replaces both timeouts above for non-streaming requests, whose engine
	// sends nothing until the whole answer is ready: a long answer is silence, not a stall.
	// Default 10m.
	NonStreamTimeout Duration `yaml:"non_stream_timeout"`
	// Keepalive: while the client has received nothing, a streaming response sends its
	// headers and an SSE comment this often so that idle-connection timeouts of proxies in
	// between do not cut it. Comments do not cross the delivery boundary. Default 15s.
	Keepalive Duration `yaml:"keepalive"`
	// RetryBudget bounds pool-wide reruns.
	RetryBudget RetryBudget `yaml:"retry_budget"`
	// MaxRerunPrefillTokens: a rerun whose prompt is estimated above this many tokens is
	// refused up front (rerun_too_expensive). 0: no limit.
	MaxRerunPrefillTokens int `yaml:"max_rerun_prefill_tokens"`
	// MaxRerunPrefillTime: the same limit in time, at PrefillTokensPerSecond. 0: no limit.
	MaxRerunPrefillTime Duration `yaml:"max_rerun_prefill_time"`
	// PrefillTokensPerSecond is the pool's prefill speed used for MaxRerunPrefillTime.
	// Default 10000.
	PrefillTokensPerSecond float64 `yaml:"prefill_tokens_per_second"`
	// ClientWriteTimeout: a client that accepts no bytes of its response for this long is
	// treated as gone (its upstream is cancelled, the outcome is client_stalled), so a
	// client that stops reading holds no replica and no gateway resources. Default 30s.
	ClientWriteTimeout Duration `yaml:"client_write_timeout"`
	// MaxRequestDuration bounds a whole request, streaming or not, attempts and reruns
	// included; past it the request ends with request_timeout. 0 (default): no bound.
	MaxRequestDuration Duration `yaml:"max_request_duration"`
	// MaxHeldBytes bounds the events an engine may send before its first output (they are
	// held back until then). An attempt that sends more is failed. Default 1 MiB.
	MaxHeldBytes int `yaml:"max_held_bytes"`
	// AllowCrossFingerprintRerun lets a rerun go to a replica whose fingerprint differs
	// from the first attempt's. Off by default: the answer could differ in kind.
	AllowCrossFingerprintRerun bool `yaml:"allow_cross_fingerprint_rerun"`
	// RerunEngineTools: a request whose tools the engine runs itself (a Responses request's
	// mcp, code_interpreter, web_search_preview, ...) may have acted once its body may have
	// reached an engine. "never" (the default): it is rerun only after a failure that proves
	// the engine never started it. "idempotent_mcp_servers": a request whose engine-run
	// tools are all mcp tools of IdempotentMCPServers is rerun as any other.
	RerunEngineTools RerunEngineTools `yaml:"rerun_engine_tools"`
	// IdempotentMCPServers are the server_labels of MCP servers whose tools the operator
	// declares idempotent (running one twice is harmless), for rerun_engine_tools
	// idempotent_mcp_servers.
	IdempotentMCPServers []string `yaml:"idempotent_mcp_servers"`
}

// RetryBudget is a token bucket shared by a pool: every request deposits Ratio tokens, time
// deposits MinPerSecond tokens per second, and a rerun withdraws one. Default 20% and 3/s, as
// Envoy's retry budget.
type RetryBudget struct {
	Ratio        *float64 `yaml:"ratio"`
	MinPerSecond *float64 `yaml:"min_per_second"`
	// Burst caps the tokens the bucket holds. Default 10.
	Burst *float64 `yaml:"burst"`
}

// Health configures replica health tracking.
type Health struct {
	// ProbeEvery is the period of the active GET /health probe. Default 5s.
	ProbeEvery Duration `yaml:"probe_every"`
	// ProbeTimeout bounds one probe. Default 2s.
	ProbeTimeout Duration `yaml:"probe_timeout"`
	// DeadCooldown: after a dial failure (or a failed probe) a replica receives no new work
	// for this long unless a probe succeeds first. Also the length of a first ejection
	// (EjectAfter). Default 10s.
	DeadCooldown Duration `yaml:"dead_cooldown"`
	// DialTimeout bounds the TCP connect to a replica. Default 2s.
	DialTimeout Duration `yaml:"dial_timeout"`
	// ScrapeEvery is the period of reading each engine's /metrics (load and fingerprint).
	// Default 1s.
	ScrapeEvery Duration `yaml:"scrape_every"`
	// EjectAfter: a replica whose attempts fail this many times in a row after reaching it
	// (reset or closed connections, engine 5xx, broken streams, stalls; not dial failures,
	// overloads, rejected requests or cancels) is ejected: no new work for dead_cooldown,
	// doubling with each ejection that follows soon after up to 8× dead_cooldown, however
	// its health probe answers. Never the last healthy replica of a pool. Default 5; -1:
	// never eject.
	EjectAfter int `yaml:"eject_after"`
}

// Server configures the HTTP listeners' limits, against clients that are slow or hostile
// rather than merely gone.
type Server struct {
	// ReadHeaderTimeout bounds reading a request's headers. Default 10s.
	ReadHeaderTimeout Duration `yaml:"read_header_timeout"`
	// BodyReadTimeout bounds reading a request's body, from the end of its headers: a body
	// that trickles in slower is cut and answered 408. Default 60s (a body of the default
	// largest size, 32 MiB, must come at 560 KB/s).
	BodyReadTimeout Duration `yaml:"body_read_timeout"`
	// IdleTimeout closes a kept-alive connection that sends no new request for this long.
	// Default 2m.
	IdleTimeout Duration `yaml:"idle_timeout"`
	// MaxHeaderBytes bounds a request's header block (request line included). Default
	// 64 KiB.
	MaxHeaderBytes int `yaml:"max_header_bytes"`
	// MaxConnections bounds the open connections of each listener; past it, new
	// connections wait in the kernel's accept queue. Default 10000; -1: no bound.
	MaxConnections int `yaml:"max_connections"`
	// NetHTTP serves plaintext listeners with Go's net/http server instead of the
	// gateway's own HTTP/1.1 server (docs/design.md, "The client's server"). TLS
	// listeners, and platforms other than Linux, always use net/http. Default false.
	NetHTTP bool `yaml:"net_http"`
}

// Limits bounds client input and, per API key, what a key may use.
type Limits struct {
	// MaxBodyBytes is the largest accepted request body. Default 32 MiB, Anthropic's
	// limit: long agent conversations reach several MiB of JSON.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// Backend is where the per-key counters live: "local" (the default: each gateway
	// counts on its own) or "redis://HOST:PORT/DB" (every gateway sharing that Redis
	// shares the counters, so a key's limits hold across them).
	Backend string `yaml:"backend"`
	// BackendEnv names an environment variable that holds Backend instead: a Redis URL
	// with a password can then come from a secret store (a Kubernetes Secret) while the
	// rest of the configuration stays somewhere readable (a ConfigMap). Set one of the two.
	BackendEnv string `yaml:"backend_env"`
	// OnBackendError is what a gateway does while Redis is unreachable: "open" (the
	// default: go on with per-gateway counters) or "closed" (answer 503
	// limits_unavailable to keys that have limits).
	OnBackendError string `yaml:"on_backend_error"`
	// KeyPrefix starts every Redis key the limits write. Default "fencegate:limits:".
	KeyPrefix string `yaml:"key_prefix"`
}

// Auth lists API keys. With no keys (here or in the store, see `fencegate keys`), the
// gateway is open (suited to a private network).
type Auth struct {
	Keys      []APIKey `yaml:"keys"`
	AdminKeys []APIKey `yaml:"admin_keys"`
	// StoreRefresh is how often the keys kept in the store are read again, so that a key
	// created or revoked on one gateway holds on every gateway sharing the store within
	// it. Default 2s.
	StoreRefresh Duration `yaml:"store_refresh"`
	// StoreKeys: the keys kept in the store (`fencegate keys`) count beside these. Default
	// true. With false only this file's keys count and the store's are never read, so a
	// gateway that starts while its store is unreachable can authenticate (or, with no key
	// here, serve) at once; otherwise, until it has read the store's keys, a key not
	// listed here — or any request, when none is — is answered 503 journal_unavailable.
	StoreKeys *bool `yaml:"store_keys"`
}

// UsesStoreKeys reports whether the keys kept in the store count (auth.store_keys).
func (a Auth) UsesStoreKeys() bool { return a.StoreKeys == nil || *a.StoreKeys }

// APIKey is one bearer key. ID is what the journal records (never the key itself).
type APIKey struct {
	ID string `yaml:"id"`
	// Key is the secret in plain text; KeySHA256 is the hex SHA-256 of the secret instead,
	// so that the configuration need not hold it. Exactly one is set.
	Key       string `yaml:"key"`
	KeySHA256 string `yaml:"key_sha256"`
	// Models, when set, are the only models the key may use; to the key, the others do not
	// exist (404 model_not_found, absent from GET /v1/models). Admin keys ignore it.
	Models []string `yaml:"models"`
	// MaxConcurrent, RPM and TPM limit the key: requests running at once, requests per
	// minute, and output tokens per minute (counted as delivered). 0: no limit.
	MaxConcurrent int `yaml:"max_concurrent"`
	RPM           int `yaml:"rpm"`
	TPM           int `yaml:"tpm"`
	// Traces, when set (off, errors or all), replaces the gateway's traces.mode for the
	// key's requests. Admin keys take none.
	Traces TraceMode `yaml:"traces"`
	// Weight is the key's share of a full pool's freed slots against the other keys
	// waiting in its class (docs/design.md §3, "The queue"). Default 1.
	Weight int `yaml:"weight"`
	// Priority is the key's class: a waiting request of a higher class takes a freed slot
	// before any of a lower one, and the lowest class is shed first. Default 0, within
	// [MinPriority, MaxPriority].
	Priority int `yaml:"priority"`
	// FairnessHeader: the key may name, in X-Fencegate-Fairness-Id, whom a request is
	// for; the key's share is then divided equally between those ids (a platform that
	// fronts many users with one key). Otherwise the header is ignored.
	FairnessHeader bool `yaml:"fairness_header"`
	// PriorityHeader: the key may set a request's class in X-Fencegate-Priority (any in
	// [MinPriority, MaxPriority]). Otherwise the header is ignored.
	PriorityHeader bool `yaml:"priority_header"`
}

// The priority classes a key or a request may name.
const (
	MinPriority = -100
	MaxPriority = 100
)

// HasPlaintextKeys reports whether a key is written in the configuration in plain text
// (key:), which the gateway warns about at start.
func (a Auth) HasPlaintextKeys() bool {
	for _, k := range append(append([]APIKey(nil), a.Keys...), a.AdminKeys...) {
		if k.Key != "" {
			return true
		}
	}
	return false
}
