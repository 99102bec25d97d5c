package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/bench"
	"github.com/fencegate/fencegate/internal/sim"
)

// The simulated engine ends an answer on its own after 8 to 40 tokens, and only chat
// and completions can ask it not to (ignore_eos), so every run here asks for at most 8:
// then every API's answer has exactly --max-tokens tokens.
const maxTokens = 8

func startSim(t *testing.T, cfg sim.Config) *sim.Server {
	t.Helper()
	s, err := sim.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// runJSON runs `fencegate bench ARGS --json` and decodes its report, refusing any
// field the report type does not have.
func runJSON(t *testing.T, args ...string) (*bench.Report, string) {
	t.Helper()
	var out bytes.Buffer
	if err := bench.Main(context.Background(), append(args, "--json"), &out, io.Discard); err != nil {
		t.Fatalf("bench %q: %v", args, err)
	}
	raw := out.String()
	dec := json.NewDecoder(&out)
	dec.DisallowUnknownFields()
	var rep bench.Report
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("the JSON report does not decode: %v\n%s", err, raw)
	}
	if dec.More() {
		t.Fatalf("more than one JSON document:\n%s", raw)
	}
	return &rep, raw
}

func onlyRun(t *testing.T, rep *bench.Report) *bench.Result {
	t.Helper()
	if len(rep.Targets) != 1 || len(rep.Targets[0].Runs) != 1 {
		t.Fatalf("want one target with one run, got %+v", rep.Targets)
	}
	return rep.Targets[0].Runs[0]
}

func TestEveryAPIAgainstTheSimulator(t *testing.T) {
	const requests, warmup = 12, 2
	for _, api := range []string{"chat", "completions", "messages", "responses"} {
		t.Run(api, func(t *testing.T) {
			s := startSim(t, sim.Config{})
			rep, _ := runJSON(t, "--url", s.URL(), "--api", api, "--requests", strconv.Itoa(requests),
				"--concurrency", "3", "--max-tokens", strconv.Itoa(maxTokens), "--warmup", strconv.Itoa(warmup))
			r := onlyRun(t, rep)
			if r.Requests != requests || r.Succeeded != requests || r.Failed != 0 || len(r.Errors) != 0 {
				t.Fatalf("requests %d, succeeded %d, failed %d, errors %v; want %d, all succeeded", r.Requests, r.Succeeded, r.Failed, r.Errors, requests)
			}
			if r.OutputTokens != requests*maxTokens {
				t.Errorf("output tokens %d, want %d", r.OutputTokens, requests*maxTokens)
			}
			if r.WarmupRequests != warmup || r.WarmupFailed != 0 {
				t.Errorf("warmup %d (%d failed), want %d", r.WarmupRequests, r.WarmupFailed, warmup)
			}
			// One first token per request, and a gap before each of its other tokens: the
			// lifecycle events (role chunk, message_start, response.created…), the
			// Responses API's *.done events that repeat the text and the finish are no
			// tokens.
			if r.TTFT.Count != requests || r.InterToken.Count != requests*(maxTokens-1) || r.Latency.Count != requests {
				t.Errorf("samples: ttft %d, gaps %d, latency %d; want %d, %d, %d",
					r.TTFT.Count, r.InterToken.Count, r.Latency.Count, requests, requests*(maxTokens-1), requests)
			}
			if r.RequestsPerSecond <= 0 || r.OutputTokensPerSecond <= 0 || r.TTFT.P50 <= 0 || r.TTFT.P50 > r.TTFT.P999 {
				t.Errorf("implausible numbers: %+v", r)
			}
			if !strings.HasSuffix(r.Endpoint, "/v1/"+map[string]string{"chat": "chat/completions"}[api]) && !strings.HasSuffix(r.Endpoint, "/v1/"+api) {
				t.Errorf("endpoint %s for --api %s", r.Endpoint, api)
			}
			records := s.Records()
			if len(records) != requests+warmup {
				t.Fatalf("the engine saw %d requests, want %d", len(records), requests+warmup)
			}
			for _, rec := range records {
				if rec.Endpoint != api || !rec.Stream || rec.Outcome != sim.OutcomeFinished || rec.TokensSent != maxTokens {
					t.Fatalf("engine record %+v", rec)
				}
			}
		})
	}
}

// With --duration the run ends when the time is up and the requests then running have
// finished: all of them count, none is cut.
func TestDurationRun(t *testing.T) {
	s := startSim(t, sim.Config{})
	rep, _ := runJSON(t, "--url", s.URL(), "--duration", "100ms", "--concurrency", "2", "--max-tokens", "4")
	r := onlyRun(t, rep)
	if r.Requests == 0 || r.Failed != 0 || r.OutputTokens != int64(r.Requests)*4 || len(s.Records()) != r.Requests {
		t.Fatalf("requests %d (engine saw %d), failed %d, tokens %d", r.Requests, len(s.Records()), r.Failed, r.OutputTokens)
	}
	if rep.Load.DurationSeconds != 0.1 || rep.Load.Requests != 0 {
		t.Fatalf("load %+v", rep.Load)
	}
}

// A run stops when its context ends, and says so.
func TestInterrupted(t *testing.T) {
	s := startSim(t, sim.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := bench.Main(ctx, []string{"--url", s.URL(), "--requests", "5"}, io.Discard, io.Discard)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
}

// An engine that sends several tokens per chunk is counted from the usage in the
// stream; without usage, a chunk is one token, which is all a client can know.
func TestTokensComeFromUsageWhenPresent(t *testing.T) {
	s := startSim(t, sim.Config{StreamInterval: 4})
	args := []string{"--url", s.URL(), "--requests", "5", "--concurrency", "1", "--max-tokens", strconv.Itoa(maxTokens)}
	rep, _ := runJSON(t, args...)
	if r := onlyRun(t, rep); r.OutputTokens != 5*maxTokens {
		t.Errorf("with usage: %d tokens, want %d", r.OutputTokens, 5*maxTokens)
	}
	// Chunks of 1 (a choice's first token goes alone), 4 and 3 tokens.
	rep, _ = runJSON(t, append(args, "--stream-usage=false")...)
	if r := onlyRun(t, rep); r.OutputTokens != 5*3 || r.InterToken.Count != 5*2 {
		t.Errorf("without usage: %d tokens and %d gaps, want %d and %d", r.OutputTokens, r.InterToken.Count, 5*3, 5*2)
	}
}

func TestFaultsAreCountedByStatusAndCode(t *testing.T) {
	for _, tc := range []struct {
		name   string
		api    string
		arm    string // armed for the next count requests
		count  int
		header string // or sent with every request
		extra  []string
		reqs   int
		want   bench.ErrorCount
	}{
		// vLLM's error event, with an integer code: its type names it.
		{name: "error event", api: "chat", arm: "error:nodone@sent:2", count: 1, reqs: 6, want: bench.ErrorCount{Status: 200, Code: "InternalServerError", Count: 1}},
		{name: "error event then DONE", api: "completions", arm: "error@sent:2", count: 2, reqs: 6, want: bench.ErrorCount{Status: 200, Code: "InternalServerError", Count: 2}},
		{name: "messages error event", api: "messages", arm: "error@sent:2", count: 1, reqs: 4, want: bench.ErrorCount{Status: 200, Code: "internal_error", Count: 1}},
		// vLLM's Responses stream has no error event: the body is cut.
		{name: "responses cut", api: "responses", arm: "error@sent:2", count: 1, reqs: 4, want: bench.ErrorCount{Status: 200, Code: "connection_closed", Count: 1}},
		{name: "status before the stream", api: "chat", arm: "status:429@accept", count: 2, reqs: 5, want: bench.ErrorCount{Status: 429, Code: "TooManyRequestsError", Count: 2}},
		{name: "reset mid-stream", api: "chat", arm: "reset@sent:3", count: 1, reqs: 4, want: bench.ErrorCount{Status: 200, Code: "connection_reset", Count: 1}},
		// An engine that stops writing in the middle of an answer is given up on.
		{name: "hang mid-stream", api: "responses", arm: "hang@sent:2", count: 1, extra: []string{"--timeout", "50ms"}, reqs: 3, want: bench.ErrorCount{Status: 200, Code: "timeout", Count: 1}},
		{name: "hang before headers", api: "chat", arm: "hang@accept", count: 1, extra: []string{"--timeout", "50ms"}, reqs: 3, want: bench.ErrorCount{Status: 0, Code: "timeout", Count: 1}},
		// A malformed event ends the request at once, though the engine keeps the stream open.
		{name: "malformed event", api: "chat", arm: "garbage@sent:1", count: 1, reqs: 3, want: bench.ErrorCount{Status: 200, Code: "malformed_event", Count: 1}},
		{name: "oversized event", api: "messages", arm: "oversize@sent:1", count: 1, reqs: 3, want: bench.ErrorCount{Status: 200, Code: "event_too_large", Count: 1}},
		{name: "dropped", api: "messages", arm: "drop@accept", count: 1, reqs: 3, want: bench.ErrorCount{Status: 0, Code: "connection_closed", Count: 1}},
		// The whole engine dies in the middle of the answer and stays down.
		{name: "crash mid-stream", api: "chat", header: "X-Sim-Fault:crash@sent:2", reqs: 1, want: bench.ErrorCount{Status: 200, Code: "connection_reset", Count: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startSim(t, sim.Config{})
			if tc.arm != "" {
				if err := s.ArmFault(tc.arm, tc.count); err != nil {
					t.Fatal(err)
				}
			}
			args := []string{"--url", s.URL(), "--api", tc.api, "--requests", strconv.Itoa(tc.reqs), "--concurrency", "2", "--max-tokens", strconv.Itoa(maxTokens)}
			if tc.header != "" {
				args = append(args, "--header", tc.header)
			}
			args = append(args, tc.extra...)
			rep, _ := runJSON(t, args...)
			r := onlyRun(t, rep)
			if !slices.Equal(r.Errors, []bench.ErrorCount{tc.want}) {
				t.Fatalf("errors %+v, want %+v", r.Errors, tc.want)
			}
			if r.Requests != tc.reqs || r.Failed != tc.want.Count || r.Succeeded != tc.reqs-tc.want.Count || r.Latency.Count != r.Succeeded {
				t.Fatalf("requests %d, failed %d, succeeded %d, latencies %d", r.Requests, r.Failed, r.Succeeded, r.Latency.Count)
			}
		})
	}
}

func TestCompareRunsEveryTargetEveryRoundInRotation(t *testing.T) {
	sims := []*sim.Server{startSim(t, sim.Config{Name: "a"}), startSim(t, sim.Config{Name: "b"}), startSim(t, sim.Config{Name: "c"})}
	const rounds, requests = 3, 6
	rep, _ := runJSON(t, "--url", sims[0].URL(), "--compare", sims[1].URL(), "--compare", sims[2].URL(),
		"--rounds", strconv.Itoa(rounds), "--requests", strconv.Itoa(requests), "--concurrency", "2", "--max-tokens", "4")
	if len(rep.Targets) != 3 {
		t.Fatalf("%d targets, want 3", len(rep.Targets))
	}
	for i, tr := range rep.Targets {
		if tr.URL != sims[i].URL() || len(tr.Runs) != rounds {
			t.Fatalf("target %d: %s with %d runs", i, tr.URL, len(tr.Runs))
		}
		if n := len(sims[i].Records()); n != rounds*requests {
			t.Errorf("%s saw %d requests, want %d", tr.URL, n, rounds*requests)
		}
		for k, want := range map[string]float64{"requests_per_second": 0, "output_tokens_per_second": 0, "ttft_p50_ms": 0, "latency_p50_ms": 0} {
			if tr.Median[k] <= want || tr.Ratio[k] <= 0 {
				t.Errorf("target %d: median %s = %v, ratio %v", i, k, tr.Median[k], tr.Ratio[k])
			}
		}
		if _, ok := tr.Ratio["failed"]; ok {
			t.Errorf("a ratio of failures to the baseline's 0: %v", tr.Ratio)
		}
	}
	for k, v := range rep.Targets[0].Ratio {
		if v != 1 {
			t.Errorf("the baseline's own ratio %s = %v", k, v)
		}
	}
	// Round r starts with target r (mod 3) and runs the others in order after it.
	for round := range rounds {
		var order []int
		for i, tr := range rep.Targets {
			order = append(order, i)
			if tr.Runs[round].Round != round+1 {
				t.Fatalf("run %d of target %d says round %d", round, i, tr.Runs[round].Round)
			}
		}
		slices.SortFunc(order, func(a, b int) int {
			return rep.Targets[a].Runs[round].Started.Compare(rep.Targets[b].Runs[round].Started)
		})
		want := []int{round % 3, (round + 1) % 3, (round + 2) % 3}
		if !slices.Equal(order, want) {
			t.Errorf("round %d ran targets %v, want %v", round+1, order, want)
		}
	}
}

func TestCompareTable(t *testing.T) {
	a, b := startSim(t, sim.Config{Name: "a"}), startSim(t, sim.Config{Name: "b"})
	var out bytes.Buffer
	// A comma list, as --compare also takes.
	err := bench.Main(context.Background(), []string{"--url", a.URL(), "--compare", b.URL() + ",", "--rounds", "2",
		"--requests", "4", "--concurrency", "2", "--max-tokens", "4"}, &out, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	section := func(title string) []string {
		for i, l := range lines {
			if strings.HasPrefix(l, title) {
				end := slices.Index(lines[i:], "")
				return lines[i+1 : i+end]
			}
		}
		t.Fatalf("no %q table in\n%s", title, out.String())
		return nil
	}
	med := section("median of 2")
	if len(med) != 2 || !strings.HasPrefix(med[0], a.URL()+" (baseline) ") || !strings.HasPrefix(med[1], b.URL()+" ") {
		t.Errorf("median rows %q", med)
	}
	ratio := section("ratio to baseline")
	if len(ratio) != 1 || !strings.HasPrefix(ratio[0], b.URL()+" ") || strings.Count(ratio[0], "x") < 3 {
		t.Errorf("ratio rows %q", ratio)
	}
}

// --pid reads the CPU time and peak RSS of a process: here the test's own, which runs
// both the engine and the client, so that it certainly spends CPU during the run.
func TestProcessStatsOfOwnProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc: --pid reads Linux's")
	}
	s := startSim(t, sim.Config{})
	rep, _ := runJSON(t, "--url", s.URL(), "--requests", "400", "--concurrency", "4", "--max-tokens", "32", "--pid", strconv.Itoa(os.Getpid()))
	r := onlyRun(t, rep)
	p := r.Process
	if p == nil {
		t.Fatal("no process stats")
	}
	if p.PID != os.Getpid() || p.CPUSeconds <= 0 || p.CPUCores <= 0 || p.CPUPerRequestMs <= 0 || p.PeakRSSBytes <= 0 || p.PeakSince != "run" {
		t.Fatalf("process stats %+v", p)
	}
	if r.Client == nil || r.Client.CPUSeconds <= 0 {
		t.Fatalf("client stats %+v", r.Client)
	}
	if rep.Targets[0].PID != os.Getpid() || rep.Targets[0].Median["cpu_per_request_ms"] != p.CPUPerRequestMs {
		t.Fatalf("target %+v", rep.Targets[0])
	}
	// The CPU time is its user and system parts, each per request too.
	if math.Abs(p.CPUUserSeconds+p.CPUSystemSeconds-p.CPUSeconds) > 1e-9 || p.CPUUserSeconds <= 0 ||
		math.Abs(p.UserCPUPerRequestMs-p.CPUUserSeconds*1e3/400) > 1e-9 ||
		rep.Targets[0].Median["user_cpu_per_request_ms"] != p.UserCPUPerRequestMs {
		t.Fatalf("user and system parts of %+v, medians %v", p, rep.Targets[0].Median)
	}
	// 400 answers of 32 tokens: the CPU per 1k tokens is the CPU per request over 32 tokens.
	if want := p.CPUPerRequestMs * 1000 / 32; r.OutputTokens != 400*32 || math.Abs(p.CPUPer1kTokensMs-want) > want*1e-9 {
		t.Fatalf("cpu per 1k tokens %v over %d tokens, want %v", p.CPUPer1kTokensMs, r.OutputTokens, want)
	}
}

func TestJSONCarriesTheCommandLineWithoutSecrets(t *testing.T) {
	s := startSim(t, sim.Config{})
	rep, raw := runJSON(t, "--url", s.URL(), "--requests", "2", "--max-tokens", "2", "--header", "Authorization: Bearer sk-secret", "--header=X-Api-Key:sk-other")
	if strings.Contains(raw, "sk-secret") || strings.Contains(raw, "sk-other") {
		t.Fatalf("a header value in the report:\n%s", raw)
	}
	want := []string{"fencegate", "bench", "--url", s.URL(), "--requests", "2", "--max-tokens", "2", "--header", "Authorization:<redacted>", "--header=X-Api-Key:<redacted>", "--json"}
	if !slices.Equal(rep.Command, want) {
		t.Fatalf("command %q, want %q", rep.Command, want)
	}
	if rep.Load.API != "chat" || rep.Load.MaxTokens != 2 || rep.Load.Requests != 2 || rep.Load.Rounds != 1 {
		t.Fatalf("load %+v", rep.Load)
	}
}

func TestSingleRunTable(t *testing.T) {
	s := startSim(t, sim.Config{})
	if err := s.ArmFault("error@sent:1", 1); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := bench.Main(context.Background(), []string{"--url", s.URL(), "--requests", "3", "--concurrency", "1", "--max-tokens", "4"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"target    " + s.URL() + "/v1/chat/completions\n",
		"requests  2 succeeded, 1 failed in ",
		"tokens    10 output tokens: ", // 4 + 4 + the 2 sent before the error
		"\ntime to first token      3 ",
		"\ninter-token gap          7 ",
		"\nrequest latency          2 ",
		"\nerrors      1  HTTP 200: InternalServerError\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
}

func TestBadCommandLines(t *testing.T) {
	for _, args := range [][]string{
		{"--api", "embeddings"},
		{"--header", "no-colon"},
		{"--compare", "http://127.0.0.1:1", "--compare-pid", "1,2"},
		{"--compare-pid", "x"},
		{"--url", "127.0.0.1:8080"},
		{"--concurrency", "0"},
		{"extra"},
	} {
		if err := bench.Main(context.Background(), args, io.Discard, io.Discard); err == nil {
			t.Errorf("%q was accepted", args)
		}
	}
	var out bytes.Buffer
	if err := bench.Main(context.Background(), []string{"-h"}, &out, io.Discard); err != nil || !strings.Contains(out.String(), "--compare") {
		t.Errorf("help: %v\n%s", err, out.String())
	}
}
