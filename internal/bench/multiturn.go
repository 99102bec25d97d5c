package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"
)

// Multiturn is the chat-application workload (--workload multiturn): conversations of
// several turns, each turn sent with the whole history before it, as a chat client does;
// every conversation opens with one of a few long system prompts. It measures what
// placement does to the engines' prefix caches: the pool's hit rate from the engines' own
// counters, time to first token, throughput and how evenly the engines were loaded.
type Multiturn struct {
	Conversations int     // conversations in the run
	Turns         int     // user turns per conversation
	SystemPrompts int     // distinct system prompts, shared round-robin by the conversations
	SystemBytes   int     // size of each system prompt
	TurnBytes     int     // size of each user turn
	Zipf          float64 // skew of which ready conversation goes next (0: uniform)
	Seed          uint64
	// Route: "gateway" sends every turn to URL; "pinned" sends conversation c's turns to
	// Engines[c mod n] directly (the reference placement); "round-robin" sends the i-th
	// request to Engines[i mod n] directly.
	Route   string
	Engines []string // the engines' base URLs: their /metrics are read before and after
}

// MultiturnReport is what a multiturn run measured.
type MultiturnReport struct {
	Route         string        `json:"route"`
	Requests      int           `json:"requests"`
	Errors        int           `json:"errors"`
	Seconds       float64       `json:"seconds"`
	RequestsPerS  float64       `json:"requests_per_second"`
	TTFT          Percentiles   `json:"ttft"`
	HitRate       float64       `json:"prefix_cache_hit_rate"` // Δhits / Δqueries over the engines
	PerEngineReqs []float64     `json:"engine_requests"`       // requests each engine finished in the run
	Running       []float64     `json:"engine_running_mean"`   // each engine's mean running requests, sampled
	Imbalance     float64       `json:"imbalance"`             // the busiest engine's mean running over the mean of all
	Load          MultiturnLoad `json:"load"`
}

// MultiturnLoad is the load a report was measured with.
type MultiturnLoad struct {
	Multiturn
	Model       string `json:"model"`
	MaxTokens   int    `json:"max_tokens"`
	Concurrency int    `json:"concurrency"`
}

// chatTurn is one message of a conversation.
type chatTurn struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// multiConv is one conversation's state.
type multiConv struct {
	idx  int
	msgs []chatTurn
	done int // turns completed
}

// RunMultiturn runs the workload once against opts.URL (or the engines, by Route).
func RunMultiturn(ctx context.Context, opts Options, mt Multiturn) (*MultiturnReport, error) {
	if mt.Conversations < 1 || mt.Turns < 1 || mt.SystemPrompts < 1 {
		return nil, fmt.Errorf("bench: multiturn needs --conversations, --turns and --system-prompts of at least 1")
	}
	if mt.Route != "gateway" && len(mt.Engines) == 0 {
		return nil, fmt.Errorf("bench: --route %s sends to the engines directly: give them with --engines", mt.Route)
	}
	client := &http.Client{Transport: newTransport(opts.Concurrency), Timeout: opts.Timeout}
	before, err := scrapeEngines(ctx, client, mt.Engines)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(mt.Seed, 0x6d756c7469))
	systems := make([]string, mt.SystemPrompts)
	for i := range systems {
		systems[i] = filler(rng, fmt.Sprintf("You are assistant %d of a support desk. ", i), mt.SystemBytes)
	}
	convs := make([]*multiConv, mt.Conversations)
	for i := range convs {
		convs[i] = &multiConv{idx: i, msgs: []chatTurn{{Role: "system", Content: systems[i%mt.SystemPrompts]}}}
	}
	weights := make([]float64, mt.Conversations)
	for i := range weights {
		weights[i] = 1 / math.Pow(float64(i+1), mt.Zipf)
	}
	var (
		mu       sync.Mutex
		ready    = slices.Clone(convs)
		cond     = sync.NewCond(&mu)
		inFlight int
		ttfts    []int64
		errs     int
		sent     int
	)
	// next takes a ready conversation, skewed by its weight; nil when none is left.
	next := func() (*multiConv, int) {
		mu.Lock()
		defer mu.Unlock()
		for len(ready) == 0 && inFlight > 0 {
			cond.Wait()
		}
		if len(ready) == 0 {
			return nil, 0
		}
		total := 0.0
		for _, c := range ready {
			total += weights[c.idx]
		}
		x, k := rng.Float64()*total, 0
		for k = 0; k < len(ready)-1; k++ {
			if x -= weights[ready[k].idx]; x < 0 {
				break
			}
		}
		c := ready[k]
		ready = slices.Delete(ready, k, k+1)
		inFlight++
		sent++
		return c, sent - 1
	}
	sampler := startRunningSampler(ctx, client, mt.Engines)
	start := time.Now()
	var wg sync.WaitGroup
	for range opts.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, seq := next()
				if c == nil {
					return
				}
				user := filler(rand.New(rand.NewPCG(mt.Seed, uint64(c.idx*1000+c.done))),
					fmt.Sprintf("Conversation %d, question %d: ", c.idx, c.done+1), mt.TurnBytes)
				msgs := append(slices.Clone(c.msgs), chatTurn{Role: "user", Content: user})
				base := opts.URL
				switch mt.Route {
				case "pinned":
					base = mt.Engines[c.idx%len(mt.Engines)]
				case "round-robin":
					base = mt.Engines[seq%len(mt.Engines)]
				}
				ttft, answer, err := sendTurn(ctx, client, base, opts, msgs)
				mu.Lock()
				inFlight--
				if err != nil {
					errs++
				} else {
					ttfts = append(ttfts, ttft.Nanoseconds())
					c.msgs = append(msgs, chatTurn{Role: "assistant", Content: answer})
				}
				if c.done++; c.done < mt.Turns {
					ready = append(ready, c)
				}
				cond.Broadcast()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	running := sampler.stop()
	after, err := scrapeEngines(ctx, client, mt.Engines)
	if err != nil {
		return nil, err
	}
	rep := &MultiturnReport{Route: mt.Route, Requests: sent, Errors: errs, Seconds: elapsed.Seconds(),
		RequestsPerS: float64(sent) / elapsed.Seconds(), TTFT: percentiles(ttfts), Running: running,
		Load: MultiturnLoad{Multiturn: mt, Model: opts.Model, MaxTokens: opts.MaxTokens, Concurrency: opts.Concurrency}}
	var hits, queries float64
	for i := range mt.Engines {
		hits += after[i].hits - before[i].hits
		queries += after[i].queries - before[i].queries
		rep.PerEngineReqs = append(rep.PerEngineReqs, after[i].requests-before[i].requests)
	}
	if queries > 0 {
		rep.HitRate = hits / queries
	}
	if len(running) > 0 {
		mean, most := 0.0, 0.0
		for _, r := range running {
			mean += r / float64(len(running))
			most = max(most, r)
		}
		if mean > 0 {
			rep.Imbalance = most / mean
		}
	}
	return rep, nil
}

// filler is prefix followed by words drawn from rng up to n bytes.
func filler(rng *rand.Rand, prefix string, n int) string {
	words := []string{"lighthouse", "keeper", "lamp", "storm", "harbour", "signal", "tide", "ledger",
		"rocks", "beacon", "fog", "horn", "shift", "vessel", "chart", "oil", "wick", "lens"}
	var b strings.Builder
	b.WriteString(prefix)
	for b.Len() < n {
		b.WriteString(words[rng.IntN(len(words))])
		b.WriteByte(' ')
	}
	return b.String()
}

// sendTurn streams one chat turn and returns its time to first content and its answer.
func sendTurn(ctx context.Context, client *http.Client, base string, opts Options, msgs []chatTurn) (time.Duration, string, error) {
	body, err := json.Marshal(map[string]any{"model": opts.Model, "messages": msgs, "max_tokens": opts.MaxTokens,
		"stream": true, "temperature": 0, "ignore_eos": opts.IgnoreEOS})
	if err != nil {
		return 0, "", err
	}
	u, err := endpoint(base, Chat)
	if err != nil {
		return 0, "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header = opts.header()
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		return 0, "", fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	var ttft time.Duration
	var answer strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok || string(data) == "[DONE]" {
			continue
		}
		if e := gjson.GetBytes(data, "error"); e.Exists() && e.Type != gjson.Null {
			return 0, "", fmt.Errorf("stream error: %s", e.Raw)
		}
		if text := gjson.GetBytes(data, "choices.0.delta.content").String(); text != "" {
			if ttft == 0 {
				ttft = time.Since(start)
			}
			answer.WriteString(text)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, "", err
	}
	return ttft, answer.String(), nil
}

// engineCounters are the counters of one engine's /metrics the report needs.
type engineCounters struct{ hits, queries, requests float64 }

// scrapeEngines reads each engine's prefix-cache and request counters (vLLM's names; the
// simulator's are vLLM's).
func scrapeEngines(ctx context.Context, client *http.Client, engines []string) ([]engineCounters, error) {
	out := make([]engineCounters, len(engines))
	for i, e := range engines {
		m, err := scrapeMetrics(ctx, client, e)
		if err != nil {
			return nil, err
		}
		out[i] = engineCounters{hits: m["vllm:prefix_cache_hits_total"], queries: m["vllm:prefix_cache_queries_total"],
			requests: m["vllm:request_success_total"]}
	}
	return out, nil
}

// scrapeMetrics sums each metric of an engine's /metrics over its labels.
func scrapeMetrics(ctx context.Context, client *http.Client, base string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("bench: engine metrics: %w", err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, _ := strings.Cut(line, " ")
		if i := strings.IndexByte(name, '{'); i >= 0 {
			if j := strings.LastIndexByte(line, '}'); j > i {
				name, rest = line[:i], strings.TrimSpace(line[j+1:])
			}
		}
		var v float64
		if _, err := fmt.Sscan(rest, &v); err == nil {
			out[name] += v
		}
	}
	return out, sc.Err()
}

// runningSampler samples each engine's running requests (vllm:num_requests_running) while
// the run goes on.
type runningSampler struct {
	cancel context.CancelFunc
	done   chan []float64
}

func startRunningSampler(ctx context.Context, client *http.Client, engines []string) *runningSampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &runningSampler{cancel: cancel, done: make(chan []float64, 1)}
	go func() {
		sums, n := make([]float64, len(engines)), 0
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				if n > 0 {
					for i := range sums {
						sums[i] /= float64(n)
					}
				}
				s.done <- sums
				return
			case <-tick.C:
			}
			for i, e := range engines {
				if m, err := scrapeMetrics(ctx, client, e); err == nil {
					sums[i] += m["vllm:num_requests_running"]
				}
			}
			n++
		}
	}()
	return s
}

func (s *runningSampler) stop() []float64 {
	s.cancel()
	return <-s.done
}

// WriteText prints the report as a few lines.
func (r *MultiturnReport) WriteText(w io.Writer) error {
	l := r.Load
	_, err := fmt.Fprintf(w, `fencegate bench: multiturn, route %s, %d conversations × %d turns, %d system prompts of %d bytes, turns of %d bytes, zipf %g, concurrency %d, max_tokens %d
requests %d (errors %d) in %.1fs: %.1f req/s
ttft p50 %.1fms  p90 %.1fms  p99 %.1fms
prefix cache hit rate %.3f (the engines' own counters)
requests per engine %v; mean running per engine %v; busiest / mean %.2f
`, r.Route, l.Conversations, l.Turns, l.SystemPrompts, l.SystemBytes, l.TurnBytes, l.Zipf, l.Concurrency, l.MaxTokens,
		r.Requests, r.Errors, r.Seconds, r.RequestsPerS,
		r.TTFT.P50, r.TTFT.P90, r.TTFT.P99,
		r.HitRate, r.PerEngineReqs, roundAll(r.Running), r.Imbalance)
	return err
}

func roundAll(vs []float64) []float64 {
	out := make([]float64, len(vs))
	for i, v := range vs {
		out[i] = math.Round(v*100) / 100
	}
	return out
}
