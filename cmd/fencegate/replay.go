package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/fencegate/fencegate/internal/cli"
	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/trace"
)

// replayHelp is the usage of `fencegate replay`.
const replayHelp = `Usage: fencegate replay TRACE.json [--url URL] [--header 'K: V']... [--json] [--timeout D]

Resends the request of a trace document (as GET /admin/requests/{id}/trace answers it) to
URL — a gateway or an engine — with the same method, path, body (its seed included) and kept
headers, reads the whole answer, and compares what it says with what the original client
received (docs/design.md §7, Traces). Without --url it goes to the replica that served the
client: the one the trace's last attempt names (not one reached through an agent, which
takes only the gateway's leased requests). Credentials are never in a trace: give
them with --header 'Authorization: Bearer KEY'. The Idempotency-Key is not resent (the same
key would get the stored answer back, not a new run) unless given with --header.
A request whose engine runs tools itself (a Responses request's mcp, code_interpreter,
web_search_preview, ... tools) is not resent unless --rerun-engine-tools is given: its
engine would run them again (docs/design.md §5).

Exit status: 0 when the replay agrees (identical, same_point, extends), 1 when it does not
(diverges, stops_earlier, unknown), 2 on a usage, file or connection error; --help is 0.

Flags:
`

// exitStatus is an error that sets the process's exit status; err nil means the command
// has already said what there is to say.
type exitStatus struct {
	code int
	err  error
}

func (e *exitStatus) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitStatus) Unwrap() error { return e.err }

// usageError is a replay error of exit status 2.
func usageError(format string, args ...any) error {
	return &exitStatus{code: 2, err: fmt.Errorf(format, args...)}
}

// headerFlags collects repeated --header 'K: V' flags.
type headerFlags []string

func (h *headerFlags) String() string     { return strings.Join(*h, ", ") }
func (h *headerFlags) Set(v string) error { *h = append(*h, v); return nil }

// replayOptions are the flags of `fencegate replay`.
type replayOptions struct {
	file    string
	url     string
	headers http.Header
	json    bool
	timeout time.Duration
	// engineTools: resend a request whose engine runs tools itself.
	engineTools bool
}

func parseReplayArgs(args []string, stdout io.Writer) (replayOptions, error) {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stdout)
	fs.Usage = func() { fmt.Fprint(fs.Output(), replayHelp); fs.PrintDefaults() }
	var (
		o       replayOptions
		headers headerFlags
	)
	fs.StringVar(&o.url, "url", "", "where to send the request: a gateway's or an engine's base URL (default: the replica of the trace's last attempt)")
	fs.Var(&headers, "header", "an extra request header 'Name: value', e.g. 'Authorization: Bearer KEY' (repeatable; replaces a kept header of that name)")
	fs.BoolVar(&o.json, "json", false, "print the comparison as one JSON object")
	fs.BoolVar(&o.engineTools, "rerun-engine-tools", false, "resend a request whose engine runs tools itself (mcp, code_interpreter, ...), which runs them again")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "give up on the replay's answer after this long")
	// The trace file may come before or after the flags.
	var files []string
	for rest := args; ; {
		if err := cli.Parse(fs, rest, "replay"); err != nil {
			return o, err
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(files) != 1 {
		return o, usageError("replay: want one trace file, got %d (fencegate replay --help)", len(files))
	}
	o.file = files[0]
	if o.url != "" && !strings.HasPrefix(o.url, "http://") && !strings.HasPrefix(o.url, "https://") {
		return o, usageError("replay: --url %q is not an http:// or https:// URL", o.url)
	}
	if o.timeout <= 0 {
		return o, usageError("replay: --timeout %s must be positive", o.timeout)
	}
	o.headers = http.Header{}
	for _, h := range headers {
		k, v, ok := strings.Cut(h, ":")
		if !ok || strings.TrimSpace(k) == "" {
			return o, usageError("replay: --header %q is not 'Name: value'", h)
		}
		o.headers.Add(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	return o, nil
}

// servingReplica is the URL of the replica that served the trace's client: its last
// attempt's, since a rerun happens only before anything was delivered, so the client's
// answer, or its interruption, came from the last. A replica reached through an agent
// refuses a request without the gateway's lease, so it is no target.
func servingReplica(doc *trace.Document) (string, error) {
	if len(doc.Attempts) == 0 {
		return "", fmt.Errorf("replay: the trace records no attempt, so it names no replica; give --url")
	}
	last := doc.Attempts[len(doc.Attempts)-1]
	switch {
	case last.URL == "":
		return "", fmt.Errorf("replay: the trace's last attempt (%s) records no URL; give --url", last.ID)
	case last.LeaseEpoch != 0:
		return "", fmt.Errorf("replay: %s (%s) is reached through an agent, which takes only leased requests; give --url, the engine's or a gateway's", last.Replica, last.URL)
	}
	return last.URL, nil
}

// replay resends a trace's request and compares the answer with the client's.
func replay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseReplayArgs(args, stdout)
	if err != nil {
		return err
	}
	doc, err := readTraceFile(o.file)
	if err != nil {
		return &exitStatus{code: 2, err: err}
	}
	if o.url == "" {
		if o.url, err = servingReplica(doc); err != nil {
			return &exitStatus{code: 2, err: err}
		}
		fmt.Fprintf(stderr, "replaying %s on %s (%s), the replica of its last attempt\n", doc.RequestID, doc.Attempts[len(doc.Attempts)-1].Replica, o.url)
	}
	if tools := engineTools(doc); len(tools) > 0 && !o.engineTools {
		return usageError("replay: the request lets the engine run tools itself (%s): resending it runs them again; give --rerun-engine-tools to resend it anyway",
			strings.Join(tools, ", "))
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	got, cut, err := resend(ctx, doc, o)
	if err != nil {
		return &exitStatus{code: 2, err: err}
	}
	if cut != nil {
		fmt.Fprintf(stderr, "fencegate: replay: the answer ended without its end (%v); compared as received\n", cut)
	}
	c := trace.Compare(trace.Read(doc.Request.Path, doc.Received), trace.Read(doc.Request.Path, got))
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(c); err != nil {
			return &exitStatus{code: 2, err: fmt.Errorf("replay: write: %w", err)}
		}
	} else {
		writeComparison(stdout, doc, got, c)
	}
	if !c.Agrees() {
		return &exitStatus{code: 1}
	}
	return nil
}

// readTraceFile reads and checks a trace document.
func readTraceFile(path string) (*trace.Document, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("replay: read trace: %w", err)
	}
	var doc trace.Document
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("replay: %s is not a trace document: %w", path, err)
	}
	switch {
	case !strings.HasPrefix(doc.Format, "fencegate-trace/"):
		return nil, fmt.Errorf("replay: %s is not a trace document (format %q, want %s)", path, doc.Format, trace.Format)
	case doc.Format != trace.Format:
		return nil, fmt.Errorf("replay: %s is a %s document; this fencegate reads %s", path, doc.Format, trace.Format)
	case !strings.HasPrefix(doc.Request.Path, "/"):
		return nil, fmt.Errorf("replay: %s: the trace holds no request path", path)
	case len(doc.Request.Body) == 0:
		return nil, fmt.Errorf("replay: %s: the trace holds no request body", path)
	}
	return &doc, nil
}

// notResent are the kept headers a replay does not send again: those the transport sets
// itself (a hand-set Accept-Encoding would also stop it from decompressing), hop-by-hop
// headers, and the Idempotency-Key, which would fetch the stored answer instead of a run.
var notResent = map[string]bool{
	"Host": true, "Content-Length": true, "Connection": true, "Keep-Alive": true, "Transfer-Encoding": true,
	"Te": true, "Trailer": true, "Upgrade": true, "Accept-Encoding": true,
	"Idempotency-Key": true, "X-Idempotency-Key": true,
}

// resend sends the trace's request to o.url and records the whole answer as a client
// receives it. cut is the error that ended reading early (a reset stream), if any.
func resend(ctx context.Context, doc *trace.Document, o replayOptions) (got trace.Received, cut, err error) {
	method := doc.Request.Method
	if method == "" {
		method = http.MethodPost
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(o.url, "/")+doc.Request.Path, bytes.NewReader(requestBody(doc.Request.Body)))
	if err != nil {
		return got, nil, fmt.Errorf("replay: build the request: %w", err)
	}
	for k, v := range doc.Request.Headers {
		if k = http.CanonicalHeaderKey(k); !notResent[k] {
			req.Header[k] = append([]string(nil), v...)
		}
	}
	for k, v := range o.headers {
		req.Header[k] = v
	}
	if req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return got, nil, fmt.Errorf("replay: send to %s: %w", o.url, err)
	}
	defer resp.Body.Close()
	ct := resp.Header.Get("Content-Type")
	rec := trace.NewRecorder(math.MaxInt, strings.Contains(ct, "text/event-stream"))
	buf := make([]byte, 32<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		rec.Write(buf[:n])
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			if ctx.Err() != nil {
				return got, nil, fmt.Errorf("replay: no whole answer within --timeout: %w", rerr)
			}
			cut = rerr
			break
		}
	}
	return rec.Received(resp.StatusCode, ct), cut, nil
}

// requestBody is the body to send: a JSON body as kept, a body that was not JSON (kept as
// a JSON string) as its text.
func requestBody(b json.RawMessage) []byte {
	var s string
	if len(b) > 0 && b[0] == '"' && json.Unmarshal(b, &s) == nil {
		return []byte(s)
	}
	return b
}

// writeComparison prints the verdict and where the answers part.
func writeComparison(w io.Writer, doc *trace.Document, got trace.Received, c trace.Comparison) {
	fmt.Fprintf(w, "verdict: %s\n", c.Verdict)
	fmt.Fprintf(w, "  %s\n", c.Detail)
	fmt.Fprintf(w, "  original (%s): status %d, %d bytes, ended %s\n", doc.RequestID, doc.Received.Status, doc.Received.Bytes, c.OriginalEnd)
	fmt.Fprintf(w, "  replay: status %d, %d bytes, ended %s\n", got.Status, got.Bytes, c.ReplayEnd)
	if c.Original != "" || c.Replay != "" {
		fmt.Fprintf(w, "  choice %d, byte %d:\n    original: %q\n    replay:   %q\n", c.Choice, c.Offset, c.Original, c.Replay)
	}
}

// engineTools names the tools of the trace's request that an engine runs itself: those of
// a Responses body, or, when the body does not say, "an engine-run tool" if an attempt
// records that the engine may have acted.
func engineTools(doc *trace.Document) []string {
	if doc.Request.Path == openai.Responses.Path() {
		if r, e := openai.ParseRequest(openai.Responses, requestBody(doc.Request.Body)); e == nil && r.EngineTools.Any() {
			return r.EngineTools.Types
		}
	}
	for _, a := range doc.Attempts {
		if a.EngineMayHaveActed {
			return []string{"an engine-run tool"}
		}
	}
	return nil
}
