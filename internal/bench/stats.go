package bench

import (
	"cmp"
	"slices"
	"time"
)

// Percentiles summarises a set of durations, in milliseconds. They are exact: every
// sample is kept and sorted, so p99.9 of a run is one of its samples, not a bucket's
// bound.
type Percentiles struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean_ms"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	P999  float64 `json:"p99_9_ms"`
	Max   float64 `json:"max_ms"`
}

// percentiles sorts samples (nanoseconds) in place and summarises them.
func percentiles(samples []int64) Percentiles {
	if len(samples) == 0 {
		return Percentiles{}
	}
	slices.Sort(samples)
	var sum float64
	for _, s := range samples {
		sum += float64(s)
	}
	return Percentiles{
		Count: len(samples),
		Mean:  sum / float64(len(samples)) / 1e6,
		P50:   ms(rank(samples, 500_000)),
		P90:   ms(rank(samples, 900_000)),
		P99:   ms(rank(samples, 990_000)),
		P999:  ms(rank(samples, 999_000)),
		Max:   ms(samples[len(samples)-1]),
	}
}

// rank returns the nearest-rank percentile of sorted samples, perMillion/10^4 percent:
// the smallest sample that at least that share of the samples is no greater than.
// It is computed in integers, since 0.999*n in floating point can land just above an
// integer and pick the next sample.
func rank(sorted []int64, perMillion int) int64 {
	n := len(sorted)
	r := (n*perMillion + 999_999) / 1_000_000 // ceil(n * p)
	return sorted[max(r, 1)-1]
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

// ErrorCount is how many requests of a run ended with one error. Status is the HTTP
// status (0 when no response came at all). Code is the error's code as its body or
// final event gave it, or, for a failure of the connection or the stream itself, one of:
// connection_refused, connection_reset, connection_closed (closed before the end of
// the response), timeout (--timeout), stream_truncated (the stream ended cleanly but
// without its end: no [DONE], message_stop or response.completed), malformed_event (an
// event that is not JSON), event_too_large, transport_error (anything else).
type ErrorCount struct {
	Status int    `json:"status"`
	Code   string `json:"code"`
	Count  int    `json:"count"`
}

// errorKey identifies one kind of error.
type errorKey struct {
	status int
	code   string
}

// ProcessStats is what one process spent during a run, read from /proc.
type ProcessStats struct {
	PID int `json:"pid"`
	// CPUSeconds is the process's user and system CPU time during the run, to the
	// kernel's 10 ms accounting unit.
	CPUSeconds float64 `json:"cpu_seconds"`
	// CPUUserSeconds and CPUSystemSeconds are its two parts: time in the process's own
	// code and runtime, and time in the kernel on its behalf (its reads, writes and
	// waits, and on loopback much of the receiver's network work).
	CPUUserSeconds   float64 `json:"cpu_user_seconds"`
	CPUSystemSeconds float64 `json:"cpu_system_seconds"`
	// CPUCores is CPUSeconds over the run's elapsed time: 1 is one core busy throughout.
	CPUCores float64 `json:"cpu_cores"`
	// CPUPerRequestMs is CPUSeconds over every measured request, failed ones included:
	// a failure costs the server work too.
	CPUPerRequestMs float64 `json:"cpu_per_request_ms,omitempty"`
	// UserCPUPerRequestMs is the user part of CPUPerRequestMs.
	UserCPUPerRequestMs float64 `json:"user_cpu_per_request_ms,omitempty"`
	// CPUPer1kTokensMs is CPUSeconds over the run's output tokens, per thousand: what a
	// paced stream costs a proxy as it decodes, whatever the answers' lengths.
	CPUPer1kTokensMs float64 `json:"cpu_per_1k_tokens_ms,omitempty"`
	// PeakRSSBytes is VmHWM after the run; PeakSince says whether that is the run's
	// peak ("run") or the process's ("process start", when it could not be reset).
	PeakRSSBytes int64  `json:"peak_rss_bytes,omitempty"`
	PeakSince    string `json:"peak_since,omitempty"`
}

// Result is one run of the load against one target.
type Result struct {
	URL      string    `json:"url"`
	Endpoint string    `json:"endpoint"`
	Round    int       `json:"round"` // from 1
	Started  time.Time `json:"started"`
	// ElapsedSeconds runs from the first measured request's start to the last one's end.
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	// Requests counts the measured requests, Succeeded those that ended with the
	// stream's own end marker and no error, Failed the rest (see Errors).
	Requests  int `json:"requests"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	// WarmupRequests and WarmupFailed are the unmeasured requests before the run.
	WarmupRequests int `json:"warmup_requests"`
	WarmupFailed   int `json:"warmup_failed"`
	// RequestsPerSecond is Succeeded over ElapsedSeconds.
	RequestsPerSecond float64 `json:"requests_per_second"`
	// OutputTokens counts the tokens of every measured request, a failed request's
	// part included: from the stream's usage when it reports one, else one per
	// output-bearing delta.
	OutputTokens          int64   `json:"output_tokens"`
	OutputTokensPerSecond float64 `json:"output_tokens_per_second"`
	// TTFT is from sending a request to receiving its first output-bearing event (the
	// delivery boundary as internal/sse defines it for the API), for every request
	// that got one. InterToken is the gap between successive events that carry tokens,
	// from that first event on; events that arrive in one read are one gap apart of 0.
	// Latency is a successful request's whole time.
	TTFT       Percentiles `json:"ttft"`
	InterToken Percentiles `json:"inter_token"`
	Latency    Percentiles `json:"latency"`
	// Errors counts the failed requests by status and code, most frequent first.
	Errors []ErrorCount `json:"errors"`
	// Process is the --pid process's cost; Client is this process's own, so that a
	// client near a full core can be seen to be the bottleneck.
	Process *ProcessStats `json:"process,omitempty"`
	Client  *ProcessStats `json:"client,omitempty"`
}

// metric is one number of a Result that is compared across rounds and targets.
type metric struct {
	name string
	get  func(*Result) (float64, bool)
	unit string // how WriteText prints it: "ms", "bytes", "" (a plain number)
}

func pct(get func(*Result) *Percentiles, p func(*Percentiles) float64) func(*Result) (float64, bool) {
	return func(r *Result) (float64, bool) {
		ps := get(r)
		return p(ps), ps.Count > 0
	}
}

var (
	ttftOf    = func(r *Result) *Percentiles { return &r.TTFT }
	gapOf     = func(r *Result) *Percentiles { return &r.InterToken }
	latencyOf = func(r *Result) *Percentiles { return &r.Latency }
	p50       = func(p *Percentiles) float64 { return p.P50 }
	p90       = func(p *Percentiles) float64 { return p.P90 }
	p99       = func(p *Percentiles) float64 { return p.P99 }
	p999      = func(p *Percentiles) float64 { return p.P999 }
)

// metrics are the numbers that medians and ratios are given for, in report order.
var metrics = []metric{
	{"requests_per_second", func(r *Result) (float64, bool) { return r.RequestsPerSecond, true }, ""},
	{"output_tokens_per_second", func(r *Result) (float64, bool) { return r.OutputTokensPerSecond, true }, ""},
	{"ttft_p50_ms", pct(ttftOf, p50), "ms"},
	{"ttft_p90_ms", pct(ttftOf, p90), "ms"},
	{"ttft_p99_ms", pct(ttftOf, p99), "ms"},
	{"ttft_p99_9_ms", pct(ttftOf, p999), "ms"},
	{"inter_token_p50_ms", pct(gapOf, p50), "ms"},
	{"inter_token_p90_ms", pct(gapOf, p90), "ms"},
	{"inter_token_p99_ms", pct(gapOf, p99), "ms"},
	{"inter_token_p99_9_ms", pct(gapOf, p999), "ms"},
	{"latency_p50_ms", pct(latencyOf, p50), "ms"},
	{"latency_p99_ms", pct(latencyOf, p99), "ms"},
	{"failed", func(r *Result) (float64, bool) { return float64(r.Failed), true }, ""},
	{"cpu_per_request_ms", func(r *Result) (float64, bool) {
		if r.Process == nil || r.Requests == 0 {
			return 0, false
		}
		return r.Process.CPUPerRequestMs, true
	}, "ms"},
	{"user_cpu_per_request_ms", func(r *Result) (float64, bool) {
		if r.Process == nil || r.Requests == 0 {
			return 0, false
		}
		return r.Process.UserCPUPerRequestMs, true
	}, "ms"},
	{"cpu_per_1k_tokens_ms", func(r *Result) (float64, bool) {
		if r.Process == nil || r.OutputTokens == 0 {
			return 0, false
		}
		return r.Process.CPUPer1kTokensMs, true
	}, "ms"},
	{"peak_rss_bytes", func(r *Result) (float64, bool) {
		if r.Process == nil || r.Process.PeakRSSBytes == 0 {
			return 0, false
		}
		return float64(r.Process.PeakRSSBytes), true
	}, "bytes"},
}

// medians returns each metric's median over runs, leaving out a metric no run has.
func medians(runs []*Result) map[string]float64 {
	out := make(map[string]float64, len(metrics))
	for _, m := range metrics {
		var vs []float64
		for _, r := range runs {
			if v, ok := m.get(r); ok {
				vs = append(vs, v)
			}
		}
		if len(vs) > 0 {
			out[m.name] = median(vs)
		}
	}
	return out
}

// median of vs (sorted in place); of an even count, the mean of the middle two.
func median(vs []float64) float64 {
	slices.Sort(vs)
	n := len(vs)
	if n%2 == 1 {
		return vs[n/2]
	}
	return (vs[n/2-1] + vs[n/2]) / 2
}

// ratios returns each metric of m over the baseline's, where both exist and the
// baseline's is not zero.
func ratios(m, baseline map[string]float64) map[string]float64 {
	out := make(map[string]float64, len(m))
	for k, v := range m {
		if b, ok := baseline[k]; ok && b != 0 {
			out[k] = v / b
		}
	}
	return out
}

// sortErrors orders error counts most frequent first, then by status and code, so a
// report reads the same from run to run.
func sortErrors(errs map[errorKey]int) []ErrorCount {
	out := make([]ErrorCount, 0, len(errs))
	for k, n := range errs {
		out = append(out, ErrorCount{Status: k.status, Code: k.code, Count: n})
	}
	slices.SortFunc(out, func(a, b ErrorCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Status, b.Status), cmp.Compare(a.Code, b.Code))
	})
	return out
}
