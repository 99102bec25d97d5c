package agent

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"time"

	"github.com/fencegate/fencegate/internal/secretfile"
)

// Engine kinds. The kind decides only what the agent adds on top of closing
// the engine connection when it aborts a request, and which metric names it
// expects; every kind is proxied the same way.
const (
	KindGeneric = "generic" // any OpenAI-compatible server
	KindVLLM    = "vllm"    // vLLM: aborts a request when its connection closes
	KindSGLang  = "sglang"  // SGLang: also told through POST /abort_request, by rid
)

// Config describes one agent. Zero fields get the defaults in their comments.
type Config struct {
	// LogFormat is --log-format (json or text), used when Logger is nil.
	LogFormat string
	// Engine is the engine's base URL, e.g. "http://127.0.0.1:8000". Required.
	Engine string
	// Listen is the address to listen on; default "127.0.0.1:8101".
	Listen string
	// Listener, when set, is where the agent serves instead of Listen: a listener its
	// caller opened (tests that watch what the agent writes). Close closes it.
	Listener net.Listener
	// Secret, when set, must be sent as X-Fencegate-Agent-Key on every request
	// (data, passthrough and control; PathHealth excepted). When empty (and no
	// SecretFile), control calls are accepted from loopback only and data requests
	// from anyone.
	Secret string
	// SecretFile, when set, holds the secret instead (--secret-file): one per line, at
	// most two, either accepted, so that a secret can be rotated without a restart. It is
	// read again every SecretPoll and on ReloadSecret (SIGHUP); a file that turns
	// unreadable or invalid keeps the secrets read last.
	SecretFile string
	// SecretPoll is how often SecretFile is read again; default secretfile.DefaultPoll.
	SecretPoll time.Duration
	// MetricsListen, when set, is a second address (--metrics-listen) that serves, with no
	// secret, GET /metrics (the agent's own metrics) and GET /engine/metrics (the engine's),
	// for Prometheus and autoscalers; nothing else. The agent's own metrics are also at
	// GET /fencegate/v1/metrics on Listen, with the secret.
	MetricsListen string
	// EngineKind is KindGeneric (default), KindVLLM or KindSGLang.
	EngineKind string
	// Fingerprint labels reported in renew replies; they override labels of
	// the same name scraped from the engine's vllm:cache_config_info.
	Fingerprint map[string]string
	// ModelDir, when set, is the engine's model directory (a Hugging Face snapshot or the
	// directory of a GGUF file): its digest (ContentDigest) is reported in every renewal
	// as the fingerprint's content_sha256, so that replicas that load other tokenizer,
	// template or configuration files under the same name are told apart.
	ModelDir string
	// Now is the clock leases are measured with; default time.Now.
	Now func() time.Time
	// ScrapeEvery is the interval of the engine /metrics scrape; default 500ms.
	ScrapeEvery time.Duration
	// CancelWait bounds how long a cancel waits for the engine request to
	// end before replying 504; default 10s.
	CancelWait time.Duration
	// Logger receives the agent's log; default discards.
	Logger *slog.Logger
}

const (
	defaultListen      = "127.0.0.1:8101"
	defaultScrapeEvery = 500 * time.Millisecond
	defaultCancelWait  = 10 * time.Second

	// maxRequestBody bounds a data request's body: the gateway's default limit
	// (32 MiB), and room for the stream_options the gateway may add to it.
	maxRequestBody = 32<<20 + 64<<10
	// maxWholeResponse bounds a non-stream response, which is held in full
	// until the lease check before it is written.
	maxWholeResponse = 64 << 20
	// maxControlBody bounds a control call's body; a renewal of 10,000
	// leases is well under it.
	maxControlBody = 4 << 20

	// sweepEvery and leaseRetain pace the forgetting of ended leases:
	// an ended attempt keeps answering "ended" and its epoch keeps refusing
	// a delayed data request for leaseRetain after its lease expired.
	sweepEvery  = 30 * time.Second
	leaseRetain = 10 * time.Minute
	// maxEndedInfos bounds the recently ended attempts kept for listings.
	maxEndedInfos = 1024
	// abortRequestTimeout bounds the SGLang /abort_request call.
	abortRequestTimeout = 2 * time.Second
)

// withDefaults returns a copy of c with defaults filled in and the engine URL
// parsed, or an error naming the first field that cannot be used.
func (c Config) withDefaults() (Config, *url.URL, error) {
	if c.Engine == "" {
		return c, nil, fmt.Errorf("agent: Config.Engine is required")
	}
	engine, err := url.Parse(c.Engine)
	if err != nil {
		return c, nil, fmt.Errorf("agent: Config.Engine %q: %w", c.Engine, err)
	}
	if (engine.Scheme != "http" && engine.Scheme != "https") || engine.Host == "" {
		return c, nil, fmt.Errorf("agent: Config.Engine %q must be an http:// or https:// URL with a host", c.Engine)
	}
	if c.Listen == "" {
		c.Listen = defaultListen
	}
	switch c.EngineKind {
	case "":
		c.EngineKind = KindGeneric
	case KindGeneric, KindVLLM, KindSGLang:
	default:
		return c, nil, fmt.Errorf("agent: Config.EngineKind %q is not one of generic, vllm, sglang", c.EngineKind)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	switch {
	case c.ScrapeEvery < 0:
		return c, nil, fmt.Errorf("agent: Config.ScrapeEvery is negative (%v)", c.ScrapeEvery)
	case c.ScrapeEvery == 0:
		c.ScrapeEvery = defaultScrapeEvery
	}
	switch {
	case c.SecretPoll < 0:
		return c, nil, fmt.Errorf("agent: Config.SecretPoll is negative (%v)", c.SecretPoll)
	case c.SecretPoll == 0:
		c.SecretPoll = secretfile.DefaultPoll
	}
	if c.Secret != "" && c.SecretFile != "" {
		return c, nil, fmt.Errorf("agent: Config.Secret and Config.SecretFile are both set; set one")
	}
	switch {
	case c.CancelWait < 0:
		return c, nil, fmt.Errorf("agent: Config.CancelWait is negative (%v)", c.CancelWait)
	case c.CancelWait == 0:
		c.CancelWait = defaultCancelWait
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c, engine, nil
}
