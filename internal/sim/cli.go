package sim

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/fencegate/fencegate/internal/cli"
)

// Main runs one simulated replica as a process, for `fencegate sim`: it
// parses args, serves until SIGINT or SIGTERM, then closes the replica.
// It prints one line with the replica's URL once it is listening.
func Main(args []string, stdout io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, args, stdout)
}

// run is Main with the stop signal as a context, so tests can stop it.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	cfg, err := parseFlags(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	srv, err := Start(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "sim replica %q serving model %q at %s\n", srv.Name(), cfg.Model, srv.URL())
	<-ctx.Done()
	if err := srv.Close(); err != nil {
		return fmt.Errorf("sim: closing %s: %w", srv.Name(), err)
	}
	return nil
}

// parseFlags turns command-line flags into a Config.
func parseFlags(args []string, out io.Writer) (Config, error) {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintln(out, "Usage: fencegate sim [flags]")
		fs.PrintDefaults()
		fmt.Fprint(out, "\n"+endpointHelp+"\n"+faultHelp)
	}
	var cfg Config
	var cacheConfig, kvEvents string
	fs.StringVar(&cfg.Addr, "listen", "127.0.0.1:9001", "address to listen on")
	fs.StringVar(&cfg.Name, "name", defaultName, "replica name; also the salt of its output text unless --weights is set")
	fs.StringVar(&cfg.Weights, "weights", "", "what decides the generated text: replicas with the same value answer alike (default: --name)")
	fs.StringVar(&cfg.Revision, "revision", "", "weights revision, shown as a Hugging Face snapshot path in the /v1/models root")
	fs.StringVar(&cfg.Version, "version", DefaultVersion, "the vLLM version GET /version reports")
	fs.StringVar(&cfg.Model, "model", defaultModel, "served model name")
	fs.DurationVar(&cfg.PrefillPerToken, "prefill-per-token", 0, "prefill time per uncached prompt token")
	fs.DurationVar(&cfg.DecodePerToken, "decode-per-token", defaultCLIDecodePerToken, "time per generated token")
	fs.IntVar(&cfg.MaxRunning, "max-running", defaultMaxRunning, "sequences decoded at once; more wait in a FIFO queue")
	fs.IntVar(&cfg.MaxWaiting, "max-waiting", 0, "waiting queue limit, beyond which requests get 429; 0 = unbounded")
	fs.IntVar(&cfg.DefaultMaxTokens, "default-max-tokens", defaultMaxTokens, "max_tokens when a request sets none")
	fs.IntVar(&cfg.MaxModelLen, "max-model-len", maxModelLen, "as vLLM's --max-model-len: the context window; longer requests get vLLM's 400")
	fs.IntVar(&cfg.StreamInterval, "stream-interval", 1, "as vLLM's --stream-interval: stream up to this many tokens per chunk (a choice's first token alone)")
	fs.DurationVar(&cfg.RestartAfter, "restart-after", 0, "after a crash fault, listen again after this long; 0 = stay down")
	fs.StringVar(&cfg.ToolCallIDStyle, "tool-call-id-style", ToolCallIDsVLLM, `tool call ids: "vllm" (chatcmpl-tool-<32 hex>) or "mistral" (9 letters and digits)`)
	fs.BoolVar(&cfg.LegacyErrors, "legacy-errors", false, "send older vLLM flat error bodies")
	fs.BoolVar(&cfg.DoneAfterStreamError, "done-after-stream-error", false, "send data: [DONE] after a mid-stream error event, as vLLM does")
	fs.StringVar(&cfg.Task, "task", TaskGenerate, `what the model does: "generate" (chat, completions, messages, responses) or "embed" (embeddings)`)
	fs.IntVar(&cfg.EmbeddingDim, "embedding-dim", defaultEmbeddingDim, "length of an embed model's vectors")
	fs.BoolVar(&cfg.EnableResponsesStore, "enable-responses-store", false, "keep Responses API responses, as vLLM with VLLM_ENABLE_RESPONSES_API_STORE=1")
	fs.StringVar(&cfg.APIKey, "api-key", "", "require this bearer key on /v1 requests, as vLLM's --api-key")
	fs.Func("tool-server", `as vLLM's --tool-server: MCP servers the engine calls itself for a Responses request's mcp, code_interpreter, web_search_preview and container tools, comma-separated, each host:port (SSE at /sse, as vLLM) or an http(s):// URL (streamable HTTP)`, func(v string) error {
		for t := range strings.SplitSeq(v, ",") {
			cfg.ToolServers = append(cfg.ToolServers, strings.TrimSpace(t))
		}
		return nil
	})
	fs.StringVar(&cfg.CacheFault, "cache-fault", "", `corrupt the prefix cache: "block-boundary" changes the answer of a prompt that came from the cache up to its last token, the cached part ending at a block edge`)
	fs.StringVar(&kvEvents, "kv-events-config", "", `as vLLM's --kv-events-config, JSON: with {"enable_kv_cache_events": true}, publish the prefix cache's BlockStored, BlockRemoved and AllBlocksCleared events on ZMQ (endpoint, default tcp://*:5557; replay_endpoint; topic; buffer_steps)`)
	fs.BoolVar(&cfg.ServerDevMode, "server-dev-mode", false, "as vLLM with VLLM_SERVER_DEV_MODE=1: serve POST /reset_prefix_cache")
	fs.StringVar(&cacheConfig, "cache-config", "", "comma-separated key=value labels of vllm:cache_config_info (vLLM CacheConfig fields) overriding the defaults")
	if err := cli.Parse(fs, args, "sim"); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, cli.Usagef("sim: unexpected arguments %q", fs.Args())
	}
	if kvEvents != "" {
		kc, err := ParseKVEventsConfig(kvEvents)
		if err != nil {
			return cfg, err
		}
		cfg.KVEvents = kc
	}
	if cacheConfig != "" {
		cfg.CacheConfig = make(map[string]string)
		for pair := range strings.SplitSeq(cacheConfig, ",") {
			k, v, ok := strings.Cut(pair, "=")
			if !ok || k == "" {
				return cfg, fmt.Errorf("sim: --cache-config item %q is not key=value", pair)
			}
			cfg.CacheConfig[k] = v
		}
	}
	return cfg, nil
}

// endpointHelp lists the endpoints, for `fencegate sim -h`.
const endpointHelp = `Endpoints (vLLM's wire shapes):
  --task generate:
    POST /v1/chat/completions          OpenAI chat completions (stream, n, tools)
    POST /v1/completions               OpenAI text completions (prompt arrays, n)
    POST /v1/messages                  Anthropic Messages as vLLM converts it from chat: id chatcmpl-…,
                                       stream events message_start, content_block_start/delta/stop,
                                       message_delta, message_stop (no ping); errors {"type":"error",…}
    POST /v1/messages/count_tokens     the rendered prompt's token count
    POST /v1/responses                 OpenAI Responses: id resp_…, stream events response.created …
                                       response.completed; mid-stream errors cut the connection; with
                                       --tool-server, one call of an engine-run tool first (mcp_call,
                                       code_interpreter_call, web_search_call items), run on the MCP server
    GET  /v1/responses/{id}            a stored response (--enable-responses-store), else 404
    POST /v1/responses/{id}/cancel     404, or 400 for a stored (synchronous) response
  --task embed:
    POST /v1/embeddings                vectors per input, encoding_format float or base64
  Always: GET /v1/models, GET /version, GET /health, POST /tokenize, GET /metrics,
          POST /sim/faults, GET /sim/requests (the records).
  --server-dev-mode: POST /reset_prefix_cache (empties the prefix cache unless a request runs).
  The other task's endpoints answer 404 {"detail":"Not Found"}, as vLLM registers only its model's routes.
`

// defaultCLIDecodePerToken paces a replica run by hand so that a person
// watching sees the text stream; in-process replicas default to no delay.
const defaultCLIDecodePerToken = 20 * time.Millisecond
