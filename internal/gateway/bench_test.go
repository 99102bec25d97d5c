package gateway_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/bench"
	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/sim"
	"github.com/fencegate/fencegate/internal/store/pgtest"
)

// Benchmarks of the gateway's added cost, each against a direct connection to the same
// simulated engine in the same run (decode time 0, so the engine is as fast as it can be
// and the difference is the gateway). Results and the command are in docs/performance.md.

const benchBody = `{"model":"sim-model","stream":true,"max_tokens":%d,"temperature":0,"ignore_eos":true,"messages":[{"role":"user","content":"benchmark prompt"}]}`

func benchStream(b *testing.B, url string, tokens int) { benchStreamKeyed(b, url, tokens, false) }

func benchStreamKeyed(b *testing.B, url string, tokens int, keyed bool) {
	body := []byte(fmt.Sprintf(benchBody, tokens))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.ReportAllocs()
	b.ResetTimer()
	var ttft time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if keyed {
			req.Header.Set("Idempotency-Key", fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), i))
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		r := bufio.NewReader(resp.Body)
		first := true
		for {
			line, err := r.ReadSlice('\n')
			if first && bytes.Contains(line, []byte(`"content":" `)) {
				ttft += time.Since(start)
				first = false
			}
			if err != nil {
				break
			}
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	b.ReportMetric(float64(ttft.Microseconds())/float64(b.N), "ttft-µs")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*tokens), "ns/token")
}

func BenchmarkStream(b *testing.B) {
	for _, tokens := range []int{16, 256} {
		b.Run(fmt.Sprintf("direct/tokens=%d", tokens), func(b *testing.B) {
			e := newEnv(b, envOptions{replicas: 1})
			benchStream(b, e.sims[0].URL(), tokens)
		})
		b.Run(fmt.Sprintf("gateway/tokens=%d", tokens), func(b *testing.B) {
			e := newEnv(b, envOptions{replicas: 1})
			benchStream(b, e.srv.URL, tokens)
		})
	}
}

// BenchmarkKeyedTTFT measures what the synchronous journal writes of a keyed request (the
// claim, the attempt record, the delivery-boundary record) add to the time to first token.
func BenchmarkKeyedTTFT(b *testing.B) {
	b.Run("unkeyed/memory", func(b *testing.B) {
		benchStream(b, newEnv(b, envOptions{replicas: 1}).srv.URL, 16)
	})
	b.Run("keyed/sqlite", func(b *testing.B) {
		e := newEnv(b, envOptions{replicas: 1, config: func(c *config.Config) { c.Store = "sqlite:" + b.TempDir() + "/bench.db" }})
		benchStreamKeyed(b, e.srv.URL, 16, true)
	})
	b.Run("keyed/postgres", func(b *testing.B) {
		dsn := pgtest.Schema(b)
		e := newEnv(b, envOptions{replicas: 1, config: func(c *config.Config) { c.Store = dsn }})
		benchStreamKeyed(b, e.srv.URL, 16, true)
	})
}

// BenchmarkAgent measures what the agent adds, against the engine directly, in one run:
// the agent alone (a request without a lease is proxied unfenced), and the whole fenced
// path (gateway → agent with a lease checked before every event → engine) next to the
// gateway in direct mode.
func BenchmarkAgent(b *testing.B) {
	f := newFencedEnv(b, nil)
	direct := newEnv(b, envOptions{sims: f.sims[:1]})
	for _, tokens := range []int{16, 256} {
		b.Run(fmt.Sprintf("engine/tokens=%d", tokens), func(b *testing.B) { benchStream(b, f.sims[0].URL(), tokens) })
		b.Run(fmt.Sprintf("agent/tokens=%d", tokens), func(b *testing.B) { benchStream(b, f.agents[0].URL(), tokens) })
		b.Run(fmt.Sprintf("gateway-direct/tokens=%d", tokens), func(b *testing.B) { benchStream(b, direct.srv.URL, tokens) })
		b.Run(fmt.Sprintf("gateway-fenced/tokens=%d", tokens), func(b *testing.B) { benchStream(b, f.srv.URL, tokens) })
	}
}

// BenchmarkIntake measures a request's cost through the gateway against the engine
// directly, with conversation-shaped chat bodies (fencegate bench --prompt-bytes): long
// turns of text, tool calls and their results. B/op counts the allocations of every
// party in the process (client, engine, gateway): the gateway's own per request are the
// difference between a size's two rows. The time to first token (ttft-ms) of one row
// is disturbed by the garbage the engine leaves (it decodes the body with
// encoding/json); scripts/perf-intake measures it with each party in a process of its
// own.
func BenchmarkIntake(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20, 4 << 20, 32 << 20} {
		o := bench.Options{API: bench.Chat, Model: "sim-model", Prompt: "Go on.", MaxTokens: 8, PromptBytes: size, StreamUsage: true, IgnoreEOS: true}
		body := o.Body()
		for _, target := range []string{"direct", "gateway"} {
			b.Run(fmt.Sprintf("%dKiB/%s", size>>10, target), func(b *testing.B) {
				e := newEnv(b, envOptions{replicas: 1, sim: func(_ int, c *sim.Config) { c.MaxModelLen = 100_000_000 }})
				url := e.srv.URL
				if target == "direct" {
					url = e.sims[0].URL()
				}
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
				var ttft []time.Duration
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					ttft = append(ttft, firstToken(b, client, url, body))
				}
				slices.Sort(ttft)
				b.ReportMetric(float64(ttft[len(ttft)/2].Microseconds())/1000, "ttft-ms")
			})
		}
	}
}

// firstToken streams body to url and returns the time to its first token.
func firstToken(b *testing.B, client *http.Client, url string, body []byte) time.Duration {
	start := time.Now()
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	var ttft time.Duration
	for {
		line, err := r.ReadSlice('\n')
		if ttft == 0 && bytes.Contains(line, []byte(`"content":"`)) {
			ttft = time.Since(start)
		}
		if err != nil {
			break
		}
	}
	if ttft == 0 {
		b.Fatalf("%s: no token (status %d)", url, resp.StatusCode)
	}
	return ttft
}
