package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fencegate/fencegate/internal/sse"
)

// Report is a whole benchmark: the load, and every run of every target.
type Report struct {
	// Command is the command line, with --header values redacted.
	Command []string  `json:"command,omitempty"`
	Started time.Time `json:"started"`
	Load    Load      `json:"load"`
	// Targets holds the baseline (--url) first, then each --compare target.
	Targets []*TargetReport `json:"targets"`
}

// Load is what every run sends.
type Load struct {
	API             string  `json:"api"`
	Model           string  `json:"model"`
	Prompt          string  `json:"prompt"`
	PromptBytes     int     `json:"prompt_bytes,omitempty"`
	MaxTokens       int     `json:"max_tokens"`
	Concurrency     int     `json:"concurrency"`
	Requests        int     `json:"requests,omitempty"`
	DurationSeconds float64 `json:"duration_seconds,omitempty"`
	Warmup          int     `json:"warmup"`
	Rounds          int     `json:"rounds"`
	IgnoreEOS       bool    `json:"ignore_eos"`
	StreamUsage     bool    `json:"stream_usage"`
}

// TargetReport is one target's runs, one per round, and their medians.
type TargetReport struct {
	URL  string    `json:"url"`
	PID  int       `json:"pid,omitempty"`
	Runs []*Result `json:"runs"`
	// Median is each metric's median over Runs (of one run, its value).
	Median map[string]float64 `json:"median"`
	// Ratio is each median over the baseline's median (the baseline's own are 1);
	// present when there is more than one target.
	Ratio map[string]float64 `json:"ratio,omitempty"`
}

// runAll applies the load of opts to every target, round by round: each round runs every
// target once, the order rotated by one per round, so that no target always runs first
// (on a cold machine) or right after the same neighbour. prog may be nil.
func runAll(ctx context.Context, opts Options, prog *progress) (*Report, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	rep := &Report{Started: time.Now(), Load: Load{
		API: opts.API.String(), Model: opts.Model, Prompt: opts.Prompt, PromptBytes: opts.PromptBytes, MaxTokens: opts.MaxTokens,
		Concurrency: opts.Concurrency, Requests: opts.Requests, DurationSeconds: opts.Duration.Seconds(),
		Warmup: opts.Warmup, Rounds: opts.Rounds, IgnoreEOS: opts.IgnoreEOS, StreamUsage: opts.StreamUsage,
	}}
	rep.Targets = append(rep.Targets, &TargetReport{URL: opts.URL, PID: opts.PID})
	for i, u := range opts.Compare {
		t := &TargetReport{URL: u}
		if len(opts.ComparePIDs) > 0 {
			t.PID = opts.ComparePIDs[i]
		}
		rep.Targets = append(rep.Targets, t)
	}
	// A process that cannot be read fails the command now, not after the first run.
	for _, t := range rep.Targets {
		if t.PID == 0 {
			continue
		}
		if _, err := cpuTicks(t.PID); err != nil {
			return nil, err
		}
	}
	n := len(rep.Targets)
	for round := range opts.Rounds {
		for i := range n {
			t := rep.Targets[(i+round)%n]
			label := ""
			if opts.Rounds > 1 || n > 1 {
				label = fmt.Sprintf("round %d/%d, %s", round+1, opts.Rounds, t.URL)
			}
			res, err := runTarget(ctx, &opts, t.URL, t.PID, label, prog)
			if err != nil {
				return nil, err
			}
			res.Round = round + 1
			t.Runs = append(t.Runs, res)
		}
	}
	for _, t := range rep.Targets {
		t.Median = medians(t.Runs)
	}
	if n > 1 {
		for _, t := range rep.Targets {
			t.Ratio = ratios(t.Median, rep.Targets[0].Median)
		}
	}
	return rep, nil
}

// readBufferSize is each stream's read buffer: large enough that a burst of events is
// one Read, small enough for thousands of streams.
const readBufferSize = 32 << 10

// newTransport returns a transport that keeps one connection per stream alive between
// requests and never compresses: a benchmark should measure the server, not dials,
// TLS handshakes or gzip.
func newTransport(concurrency int) *http.Transport {
	return &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        0, // no limit beyond the per-host one
		MaxIdleConnsPerHost: concurrency,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		ReadBufferSize:      readBufferSize,
		WriteBufferSize:     16 << 10,
		// HTTP/1.1 on purpose: one stream per connection is how engines are used, and
		// HTTP/2 would put every stream on one connection's flow control.
		ForceAttemptHTTP2: false,
	}
}

// runner is one run against one target: its fixed request, and live counters for the
// progress line.
type runner struct {
	opts     *Options
	endpoint string
	body     []byte
	header   http.Header
	client   *http.Client

	finished, failed, tokens atomic.Int64
}

// worker is one stream slot. Its buffer and decoder are reused by every request it
// sends, and its samples are its own, so the hot loop shares nothing but the counters.
type worker struct {
	r   *runner
	buf []byte
	dec sse.Decoder
	rec recorder
}

// recorder collects one worker's samples, in nanoseconds.
type recorder struct {
	ttft, gaps, latency []int64
	requests, ok        int
	tokens              int64
	errs                map[errorKey]int
}

func (rec *recorder) reset() {
	rec.ttft, rec.gaps, rec.latency = rec.ttft[:0], rec.gaps[:0], rec.latency[:0]
	rec.requests, rec.ok, rec.tokens = 0, 0, 0
	clear(rec.errs)
}

// runTarget runs the warmup and then the measured load against one target.
func runTarget(ctx context.Context, opts *Options, base string, pid int, label string, prog *progress) (*Result, error) {
	ep, err := endpoint(base, opts.API)
	if err != nil {
		return nil, err
	}
	tr := newTransport(opts.Concurrency)
	defer tr.CloseIdleConnections()
	r := &runner{
		opts: opts, endpoint: ep, body: opts.Body(), header: opts.header(),
		client: &http.Client{
			Transport: tr,
			// A redirect is an answer to report: following it would resend the POST
			// elsewhere and time something else.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
	workers := make([]*worker, opts.Concurrency)
	for i := range workers {
		w := &worker{r: r, buf: make([]byte, readBufferSize), rec: recorder{errs: map[errorKey]int{}}}
		w.dec.Protocol = opts.API.protocol()
		if opts.Requests > 0 {
			// Sized for a worker's share of the run up front, so that appending a sample
			// seldom grows a slice while streams are being timed; capped so that a huge run
			// does not ask for all of its memory at once.
			perWorker := opts.Requests/opts.Concurrency + 1
			w.rec.ttft = make([]int64, 0, perWorker)
			w.rec.latency = make([]int64, 0, perWorker)
			w.rec.gaps = make([]int64, 0, min(perWorker*opts.MaxTokens, 1<<20))
		}
		workers[i] = w
	}

	res := &Result{URL: base, Endpoint: ep, WarmupRequests: opts.Warmup}
	if opts.Warmup > 0 {
		stop := prog.track(strings.TrimSpace(label+" warmup"), r, time.Now())
		r.pool(ctx, workers, opts.Warmup, time.Time{})
		stop()
		for _, w := range workers {
			res.WarmupFailed += w.rec.requests - w.rec.ok
			w.rec.reset()
		}
		r.finished.Store(0)
		r.failed.Store(0)
		r.tokens.Store(0)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("bench: interrupted: %w", err)
	}

	// The processes are sampled right before the measured load starts and right after
	// it ends, so that their numbers hold neither the warmup nor anything after the run.
	var peakSince string
	if pid != 0 && opts.ResetPeak {
		peakSince = "run"
		if resetPeakRSS(pid) != nil {
			peakSince = "process start"
		}
	} else if pid != 0 {
		peakSince = "process start"
	}
	var serverBefore cpuTime
	if pid != 0 {
		if serverBefore, err = cpuTicks(pid); err != nil {
			return nil, err
		}
	}
	self := os.Getpid()
	clientBefore, clientErr := cpuTicks(self)

	start := time.Now()
	res.Started = start
	var deadline time.Time
	if opts.Duration > 0 {
		deadline = start.Add(opts.Duration)
	}
	stop := prog.track(label, r, start)
	r.pool(ctx, workers, opts.Requests, deadline)
	stop()
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("bench: interrupted: %w", err)
	}

	res.ElapsedSeconds = elapsed.Seconds()
	var ttft, gaps, latency []int64
	errs := map[errorKey]int{}
	for _, w := range workers {
		ttft = append(ttft, w.rec.ttft...)
		gaps = append(gaps, w.rec.gaps...)
		latency = append(latency, w.rec.latency...)
		res.Requests += w.rec.requests
		res.Succeeded += w.rec.ok
		res.OutputTokens += w.rec.tokens
		for k, n := range w.rec.errs {
			errs[k] += n
		}
	}
	res.Failed = res.Requests - res.Succeeded
	res.RequestsPerSecond = float64(res.Succeeded) / elapsed.Seconds()
	res.OutputTokensPerSecond = float64(res.OutputTokens) / elapsed.Seconds()
	res.TTFT, res.InterToken, res.Latency = percentiles(ttft), percentiles(gaps), percentiles(latency)
	res.Errors = sortErrors(errs)

	if pid != 0 {
		after, err := cpuTicks(pid)
		if err != nil {
			return nil, err
		}
		ps := processStats(pid, after.sub(serverBefore), elapsed, res.Requests)
		if res.OutputTokens > 0 {
			ps.CPUPer1kTokensMs = ps.CPUSeconds * 1e6 / float64(res.OutputTokens)
		}
		if ps.PeakRSSBytes, err = peakRSS(pid); err != nil {
			return nil, err
		}
		ps.PeakSince = peakSince
		res.Process = ps
	}
	// The client's own CPU is reported where /proc has it; elsewhere it is left out.
	if clientErr == nil {
		if after, err := cpuTicks(self); err == nil {
			res.Client = processStats(self, after.sub(clientBefore), elapsed, 0)
		}
	}
	return res, nil
}

func processStats(pid int, used cpuTime, elapsed time.Duration, requests int) *ProcessStats {
	ps := &ProcessStats{
		PID:              pid,
		CPUSeconds:       float64(used.total()) / userHZ,
		CPUUserSeconds:   float64(used.user) / userHZ,
		CPUSystemSeconds: float64(used.system) / userHZ,
	}
	ps.CPUCores = ps.CPUSeconds / elapsed.Seconds()
	if requests > 0 {
		ps.CPUPerRequestMs = ps.CPUSeconds * 1e3 / float64(requests)
		ps.UserCPUPerRequestMs = ps.CPUUserSeconds * 1e3 / float64(requests)
	}
	return ps
}

// pool runs the workers until count requests have started (0: no count), deadline has
// passed (zero: none) or ctx ends, and waits for every request to end. No request
// starts after the deadline, and the ones running then finish and count, so a request
// is never cut short by the clock.
func (r *runner) pool(ctx context.Context, workers []*worker, count int, deadline time.Time) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				if count > 0 && next.Add(1) > int64(count) {
					return
				}
				if !deadline.IsZero() && !time.Now().Before(deadline) {
					return
				}
				w.do(ctx)
			}
		})
	}
	wg.Wait()
}

// stream is what one response's events have shown so far.
type stream struct {
	first     bool      // an output-bearing event arrived
	last      time.Time // when the last token-bearing event arrived
	usage     int       // the largest completion token count in a usage, or -1
	deltas    int       // token-bearing deltas (sse's Outputs)
	done      bool      // the stream's end marker arrived
	malformed bool      // an event was not JSON
	errCode   string    // the first error event's code
}

// do sends one request and reads its whole answer.
func (w *worker) do(ctx context.Context) {
	r := w.r
	if r.opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.opts.Timeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.endpoint, bytes.NewReader(r.body))
	if err != nil {
		w.finish(errorKey{0, "transport_error"}, 0, time.Time{}, time.Time{})
		return
	}
	req.Header = r.header.Clone() // a request's header belongs to the transport while it runs
	start := time.Now()
	resp, err := r.client.Do(req)
	if err != nil {
		w.finish(errorKey{0, transportCode(ctx, err)}, 0, start, time.Time{})
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		w.finish(errorKey{resp.StatusCode, bodyErrorCode(resp.Body)}, 0, start, time.Time{})
		return
	}

	dec := &w.dec
	dec.Reset()
	st := stream{usage: -1}
	var readErr error
	for {
		n, err := resp.Body.Read(w.buf)
		if n > 0 {
			// One clock reading per read: the events in it arrived together.
			now := time.Now()
			dec.Append(w.buf[:n])
			for {
				ev, ok := dec.Next()
				if !ok {
					break
				}
				w.event(&st, &ev, start, now)
			}
			// An error or malformed event ends the request, as it does for an SDK
			// client, which raises there: an engine that falls silent after one
			// would otherwise be timed as a hang.
			if dec.Err() != nil || st.errCode != "" || st.malformed {
				break
			}
		}
		if err != nil {
			if err != io.EOF {
				readErr = err
			}
			break
		}
	}
	end := time.Now()
	tokens := st.deltas
	if st.usage >= 0 {
		tokens = st.usage
	}
	var key errorKey
	switch {
	case st.errCode != "":
		key = errorKey{resp.StatusCode, st.errCode}
	case dec.Err() != nil:
		key = errorKey{resp.StatusCode, "event_too_large"}
	case st.malformed:
		key = errorKey{resp.StatusCode, "malformed_event"}
	case readErr != nil:
		key = errorKey{resp.StatusCode, transportCode(ctx, readErr)}
	case !st.done:
		key = errorKey{resp.StatusCode, "stream_truncated"}
	}
	w.finish(key, tokens, start, end)
}

// event takes in one event that arrived at now.
func (w *worker) event(st *stream, ev *sse.Event, start, now time.Time) {
	c := ev.Class
	switch {
	case st.errCode != "" || st.malformed:
		return // the rest of a read that ends the request
	case c&sse.Error != 0:
		st.errCode = eventErrorCode(ev.Data)
		return
	case c&sse.Malformed != 0:
		st.malformed = true
		return
	}
	if c.OutputBearing() && !st.first {
		st.first = true
		st.last = now
		w.rec.ttft = append(w.rec.ttft, int64(now.Sub(start)))
	} else if ev.Outputs > 0 && st.first {
		// Only events that carry tokens make a gap: the Responses API's *.done events
		// repeat the text already sent, and a finish-only chunk carries no token.
		w.rec.gaps = append(w.rec.gaps, int64(now.Sub(st.last)))
		st.last = now
	}
	st.deltas += ev.Outputs
	// Usage counts are cumulative (vLLM's continuous usage, the final usage chunk,
	// message_delta, response.completed), so the largest is the request's.
	st.usage = max(st.usage, ev.CompletionTokens)
	if c&sse.Done != 0 {
		st.done = true
	}
}

// finish records one request's outcome: a zero key is success.
func (w *worker) finish(key errorKey, tokens int, start, end time.Time) {
	w.rec.requests++
	w.rec.tokens += int64(tokens)
	w.r.finished.Add(1)
	w.r.tokens.Add(int64(tokens))
	if key != (errorKey{}) {
		w.rec.errs[key]++
		w.r.failed.Add(1)
		return
	}
	w.rec.ok++
	w.rec.latency = append(w.rec.latency, int64(end.Sub(start)))
}

// transportCode names a failure of the connection rather than of the request.
func transportCode(ctx context.Context, err error) string {
	var ne net.Error
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded), errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection_refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "connection_reset"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "connection_closed"
	}
	return "transport_error"
}

// maxErrorBody bounds what is read of an error response: its code is near the start.
const maxErrorBody = 64 << 10

// bodyErrorCode reads an error response's body and returns its code.
func bodyErrorCode(body io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(body, maxErrorBody)) // a cut body still may name its code
	return eventErrorCode(b)
}

// eventErrorCode returns the code of an error body or event, whichever API's shape it
// has: OpenAI's {"error":{"code","type"}} (vLLM's code is the HTTP status as a number,
// so its type says more), vLLM's older flat {"object":"error","type","code"},
// Anthropic's {"type":"error","error":{"type"}}, the Responses API's error event
// {"type":"error","code"} and response.failed {"response":{"error":{"code"}}}, TGI's
// {"error":"…","error_type"}. A string
// code wins over a type, and a type over a numeric code; "unknown" when there is none.
// Errors are rare, so this decodes with encoding/json.
func eventErrorCode(data []byte) string {
	type detail struct {
		Code json.RawMessage `json:"code"`
		Type string          `json:"type"`
	}
	var v struct {
		detail
		Error     json.RawMessage `json:"error"`
		ErrorType string          `json:"error_type"`
		Response  struct {
			Error *detail `json:"error"`
		} `json:"response"`
	}
	if json.Unmarshal(data, &v) != nil {
		return "unknown"
	}
	var inner detail
	if len(v.Error) > 0 && v.Error[0] == '{' {
		_ = json.Unmarshal(v.Error, &inner) // a valid object by the outer decode
	}
	for _, d := range []*detail{&inner, v.Response.Error, &v.detail} {
		if d == nil {
			continue
		}
		var s string
		if json.Unmarshal(d.Code, &s) == nil && s != "" {
			return s
		}
	}
	for _, d := range []*detail{&inner, v.Response.Error, &v.detail} {
		if d != nil && d.Type != "" && d.Type != "error" && d.Type != "response.failed" {
			return d.Type
		}
	}
	for _, d := range []*detail{&inner, v.Response.Error, &v.detail} {
		if d == nil {
			continue
		}
		var n json.Number
		if json.Unmarshal(d.Code, &n) == nil {
			if _, err := strconv.Atoi(n.String()); err == nil {
				return n.String()
			}
		}
	}
	if v.ErrorType != "" {
		return v.ErrorType // TGI: {"error":"<message>","error_type":"validation"}
	}
	return "unknown"
}
