package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/fencegate/fencegate/internal/cli"
)

// defaultDuration is how long a run lasts when neither --duration nor --requests is given.
const defaultDuration = 30 * time.Second

// defaultCompareRounds is --rounds with --compare: one round is a single sample per
// target, and a median needs at least three to shrug off one disturbed round.
const defaultCompareRounds = 3

// Main runs `fencegate bench`: it parses args, runs the load against every target and
// writes the report to stdout. The progress line goes to stderr, and only when stderr
// is a terminal, so redirected output holds the report alone.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	opts, asJSON, err := parseFlags(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if opts.ReferenceProxy != "" || opts.FloorProxy != "" {
		return serveProxy(ctx, opts, stdout)
	}
	if opts.Workload == "multiturn" {
		if opts.Timeout == 0 {
			opts.Timeout = 10 * time.Minute
		}
		rep, err := RunMultiturn(ctx, opts, opts.Multi)
		if err != nil {
			return err
		}
		if asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(rep)
		}
		return rep.WriteText(stdout)
	}
	rep, err := runAll(ctx, opts, newProgress(stderr))
	if err != nil {
		return err
	}
	rep.Command = append([]string{"fencegate", "bench"}, redactHeaders(args)...)
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return rep.WriteText(stdout)
}

// parseFlags turns the command line into Options; asJSON is --json.
func parseFlags(args []string, out io.Writer) (opts Options, asJSON bool, err error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintln(out, "Usage: fencegate bench [flags]")
		fmt.Fprintln(out, "\nStreams requests to an OpenAI-compatible endpoint and reports time to first token,")
		fmt.Fprintln(out, "inter-token gaps, throughput and errors; with --compare, several targets in alternating rounds.")
		fmt.Fprintln(out)
		fs.PrintDefaults()
	}
	var api string
	headers := &listFlag{}
	compare, comparePIDs := &listFlag{split: true}, &listFlag{split: true}
	fs.StringVar(&opts.URL, "url", "http://127.0.0.1:8080", "base URL of the endpoint (the API path is appended; a trailing /v1 is allowed)")
	fs.StringVar(&api, "api", "chat", "request shape: chat (/v1/chat/completions), completions (/v1/completions), messages (/v1/messages) or responses (/v1/responses)")
	fs.StringVar(&opts.Model, "model", "sim-model", "model name sent in every request")
	fs.StringVar(&opts.Prompt, "prompt", "Write a short story about a lighthouse keeper.", "prompt text (the user message, or the completion prompt)")
	fs.Var(byteSize{&opts.PromptBytes}, "prompt-bytes", "send a conversation before the prompt, making each request body about `SIZE` bytes (never more): long turns of text and tool calls with their results, the same bytes on every run; 64KiB, 1MiB, 32MiB or a number of bytes (0: none)")
	fs.IntVar(&opts.MaxTokens, "max-tokens", 128, "output tokens per request (max_tokens; max_output_tokens for responses)")
	fs.IntVar(&opts.Concurrency, "concurrency", 8, "streams open at once")
	fs.DurationVar(&opts.Duration, "duration", 0, "how long each run starts new requests (default 30s when --requests is not given)")
	fs.IntVar(&opts.Requests, "requests", 0, "measured requests per run (0: run for --duration)")
	fs.IntVar(&opts.Warmup, "warmup", 0, "requests sent before each run and not measured")
	fs.Var(headers, "header", "request header `K:V`, repeatable (for example an API key)")
	fs.DurationVar(&opts.Timeout, "timeout", 10*time.Minute, "longest a request may take before it counts as a timeout error (0: none)")
	fs.BoolVar(&opts.IgnoreEOS, "ignore-eos", true, "send ignore_eos (vLLM, SGLang) on chat and completions so that every answer runs to --max-tokens")
	fs.BoolVar(&opts.StreamUsage, "stream-usage", true, "ask for usage in the stream (stream_options.include_usage) on chat and completions; tokens are counted from it when present")
	fs.IntVar(&opts.PID, "pid", 0, "process id of the --url server (Linux): report its CPU time per request (and the user-space part of it) and its peak RSS, its child processes (such as nginx workers) included")
	fs.BoolVar(&opts.ResetPeak, "reset-peak", true, "with --pid, reset the process's peak RSS before each run so that it is the run's own (false: the peak since the process started)")
	fs.Var(compare, "compare", "another target `URL`, repeatable or comma-separated: the targets run in alternating rounds and are compared with --url, the baseline")
	fs.Var(comparePIDs, "compare-pid", "`PID` of each --compare target, in the same order (0: none), repeatable or comma-separated")
	fs.IntVar(&opts.Rounds, "rounds", 0, "rounds; each runs every target once with the same load, in an order rotated per round (default 3 with --compare, else 1)")
	fs.StringVar(&opts.ReferenceProxy, "reference-proxy", "", "instead of sending load, serve on `ADDR` a plain net/http reverse proxy in front of --url (httputil.ReverseProxy, parsing nothing) until interrupted: a baseline target for --compare")
	fs.StringVar(&opts.FloorProxy, "floor-proxy", "", "instead of sending load, serve on `ADDR` a proxy of the gateway's own server and engine client in front of --url, copying bytes and nothing else, until interrupted: the floor under the gateway's cost, for --compare")
	engines := &listFlag{split: true}
	fs.StringVar(&opts.Workload, "workload", "streams", "streams: the same request again and again; multiturn: chat conversations, each turn sent with its history (the flags below), reporting the engines' prefix-cache hit rate")
	fs.IntVar(&opts.Multi.Conversations, "conversations", 128, "multiturn: conversations")
	fs.IntVar(&opts.Multi.Turns, "turns", 6, "multiturn: user turns per conversation")
	fs.IntVar(&opts.Multi.SystemPrompts, "system-prompts", 1, "multiturn: distinct system prompts the conversations share")
	fs.IntVar(&opts.Multi.SystemBytes, "system-bytes", 8<<10, "multiturn: size of each system prompt")
	fs.IntVar(&opts.Multi.TurnBytes, "turn-bytes", 600, "multiturn: size of each user turn")
	fs.Float64Var(&opts.Multi.Zipf, "zipf", 0, "multiturn: skew of which conversation goes next, as a Zipf exponent (0: uniform)")
	fs.Uint64Var(&opts.Multi.Seed, "seed", 1, "multiturn: seed of the texts and the order")
	fs.StringVar(&opts.Multi.Route, "route", "gateway", "multiturn: gateway (every turn to --url), pinned (conversation c straight to engine c mod n: the reference), round-robin (request i straight to engine i mod n)")
	fs.Var(engines, "engines", "multiturn: the engines' base `URLs`, comma-separated: their /metrics give the hit rate and load; pinned and round-robin send to them")
	fs.BoolVar(&asJSON, "json", false, "print one JSON document with every number and the command line instead of the table")
	if err := cli.Parse(fs, args, "bench"); err != nil {
		return opts, false, err
	}
	if fs.NArg() > 0 {
		return opts, false, cli.Usagef("bench: unexpected arguments %q", fs.Args())
	}
	if opts.API, err = ParseAPI(api); err != nil {
		return opts, false, err
	}
	opts.Header = make(http.Header)
	for _, h := range headers.values {
		k, v, ok := strings.Cut(h, ":")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return opts, false, fmt.Errorf("bench: --header %q is not K:V", h)
		}
		opts.Header.Add(k, strings.TrimSpace(v))
	}
	opts.Multi.Engines = engines.values
	switch opts.Workload {
	case "streams", "multiturn":
	default:
		return opts, false, cli.Usagef("bench: --workload %q: want streams or multiturn", opts.Workload)
	}
	switch opts.Multi.Route {
	case "gateway", "pinned", "round-robin":
	default:
		return opts, false, cli.Usagef("bench: --route %q: want gateway, pinned or round-robin", opts.Multi.Route)
	}
	opts.Compare = compare.values
	for _, p := range comparePIDs.values {
		pid, err := strconv.Atoi(p)
		if err != nil || pid < 0 {
			return opts, false, fmt.Errorf("bench: --compare-pid %q is not a process id", p)
		}
		opts.ComparePIDs = append(opts.ComparePIDs, pid)
	}
	return opts, asJSON, nil
}

// listFlag is a repeatable flag. With split, a value may also be a comma list; a
// header's value may itself hold commas, so --header is never split.
type listFlag struct {
	values []string
	split  bool
}

func (l *listFlag) String() string {
	if l == nil {
		return ""
	}
	return strings.Join(l.values, ",")
}

func (l *listFlag) Set(v string) error {
	if !l.split {
		l.values = append(l.values, v)
		return nil
	}
	for item := range strings.SplitSeq(v, ",") {
		if item = strings.TrimSpace(item); item != "" {
			l.values = append(l.values, item)
		}
	}
	return nil
}

// redactHeaders returns args with the value of every --header replaced, so that the
// command line recorded in a JSON report never carries an API key.
func redactHeaders(args []string) []string {
	out := make([]string, len(args))
	copy(out, args)
	redact := func(h string) string {
		if k, _, ok := strings.Cut(h, ":"); ok {
			return k + ":<redacted>"
		}
		return "<redacted>"
	}
	for i := 0; i < len(out); i++ {
		name, value, hasValue := strings.Cut(strings.TrimLeft(out[i], "-"), "=")
		if !strings.HasPrefix(out[i], "-") || name != "header" {
			continue
		}
		if hasValue {
			out[i] = out[i][:len(out[i])-len(value)] + redact(value)
		} else if i+1 < len(out) {
			i++
			out[i] = redact(out[i])
		}
	}
	return out
}

// FloorProxy serves --floor-proxy (internal/floorproxy.Serve), set by the command. It is
// not imported here: the benchmarks of the packages below the engine client build their
// request bodies with this package, which would then import them.
var FloorProxy func(ctx context.Context, ln net.Listener, upstream *url.URL, log io.Writer) error

// serveProxy is --reference-proxy and --floor-proxy: the proxy on its address, in front
// of --url.
func serveProxy(ctx context.Context, opts Options, stdout io.Writer) error {
	if opts.ReferenceProxy != "" && opts.FloorProxy != "" {
		return errors.New("bench: --reference-proxy and --floor-proxy: one proxy at a time")
	}
	u, err := url.Parse(strings.TrimSuffix(strings.TrimSuffix(opts.URL, "/"), "/v1"))
	if err != nil {
		return fmt.Errorf("bench: --url %q: %w", opts.URL, err)
	}
	flag, addr, serve := "--reference-proxy", opts.ReferenceProxy, ServeReferenceProxy
	if opts.FloorProxy != "" {
		if FloorProxy == nil {
			return errors.New("bench: --floor-proxy: not in this build")
		}
		flag, addr, serve = "--floor-proxy", opts.FloorProxy, FloorProxy
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("bench: %s: %w", flag, err)
	}
	return serve(ctx, ln, u, stdout)
}

// byteSize is a flag holding a size in bytes, written as a number or with a KiB or MiB
// suffix.
type byteSize struct{ n *int }

func (b byteSize) String() string {
	if b.n == nil {
		return "0"
	}
	return strconv.Itoa(*b.n)
}

func (b byteSize) Set(s string) error {
	mult := 1
	num := s
	for _, u := range []struct {
		suffix string
		mult   int
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}} {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 || n > 1<<30/mult {
		return fmt.Errorf("%q is not a size: give bytes, or a number with KiB or MiB", s)
	}
	*b.n = n * mult
	return nil
}
