package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/sim"
	"github.com/openai/openai-go/v3"
)

// streamBody is a streaming chat body; the prompt decides affinity and cost.
func streamBody(prompt string, maxTokens int) string {
	p, _ := json.Marshal(prompt)
	return fmt.Sprintf(`{"model":"sim-model","stream":true,"max_tokens":%d,"temperature":0,"ignore_eos":true,"messages":[{"role":"user","content":%s}]}`, maxTokens, p)
}

// startStream begins a streaming request that the test ends by cancelling ctx; it returns
// once the replica has the request.
func startStream(t *testing.T, e *env, ctx context.Context, body string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.srv.URL+"/v1/chat/completions", strings.NewReader(body))
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
}

func waitRecords(t *testing.T, s *sim.Server, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.WaitRecord(ctx, func(sim.Record) bool { return len(s.Records()) >= n }); err != nil {
		t.Fatalf("%s never got %d requests: %v", s.Name(), n, err)
	}
}

// A slow first token (long prefill) is not a failure: keepalive comments go out, the request
// completes on the same replica with one attempt, and new work goes to the other replica.
func TestSlowReplicaIsNotFailedOver(t *testing.T) {
	e := newEnv(t, envOptions{
		sim: func(i int, c *sim.Config) {
			if i == 0 {
				c.PrefillPerToken = 60 * time.Millisecond
			}
		},
		config: func(c *config.Config) { c.Policy.Keepalive = config.Duration(100 * time.Millisecond) },
	})
	done := make(chan string, 1)
	var id string
	go func() {
		resp := post(t, e.srv.URL+"/v1/chat/completions", streamBody("a prompt that takes a while to prefill on the slow replica", 4))
		id = resp.Header.Get("X-Request-Id")
		b, _ := io.ReadAll(resp.Body)
		done <- string(b)
	}()
	waitRecords(t, e.sims[0], 1)
	second := e.stream(testCtx(t), chatParams("meanwhile", 3))
	if second.err != nil || len(e.simRequests(1, second.requestID)) != 1 {
		t.Fatalf("the second request did not go to the idle replica: %+v", second)
	}
	body := <-done
	if !strings.HasPrefix(body, ": keepalive") || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("slow stream body %q", body)
	}
	if rec := e.record(id); len(rec.Attempts) != 1 || rec.Attempts[0].Replica != "sim-1" || rec.Outcome != "completed" {
		t.Fatalf("journal %+v", rec)
	}
}

// Every replica at its limit: new requests get 429 with Retry-After at once.
func TestShedWhenEveryReplicaIsFull(t *testing.T) {
	e := newEnv(t, envOptions{
		sim:    func(i int, c *sim.Config) { c.DecodePerToken = 50 * time.Millisecond },
		config: func(c *config.Config) { c.Models[0].MaxOutstanding, c.Models[0].Queue.MaxLen = 1, -1 },
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	startStream(t, e, ctx, streamBody("hold one", 200))
	waitRecords(t, e.sims[0], 1)
	startStream(t, e, ctx, streamBody("hold two", 200))
	waitRecords(t, e.sims[1], 1)
	resp := post(t, e.srv.URL+"/v1/chat/completions", streamBody("one too many", 5))
	b := readAll(t, resp)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(b, "pool_overloaded") {
		t.Fatalf("shed: %d %v %s", resp.StatusCode, resp.Header, b)
	}
	if e.totalSimRequests() != 2 {
		t.Fatalf("the shed request reached a replica")
	}
}

// Engines that all answer 429: the request is rerun once, then the client gets the
// engine's 429 with Retry-After.
func TestEngine429Everywhere(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.armAll("status:429@accept")
	_, err := e.client.Chat.Completions.New(testCtx(t), chatParams("busy", 3))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Response.Header.Get("Retry-After") == "" {
		t.Fatalf("error %v", err)
	}
	if e.totalSimRequests() != 2 {
		t.Fatalf("%d upstream requests, want 2", e.totalSimRequests())
	}
}

// Requests that share a long prompt prefix land on one replica, whose prefix cache then
// hits; when that replica is at its limit, they spill to another.
func TestPrefixAffinity(t *testing.T) {
	e := newEnv(t, envOptions{replicas: 3, config: func(c *config.Config) {
		c.Models[0].Affinity.PrefixBytes = 256
		c.Models[0].MaxOutstanding = 1
	}})
	system := strings.Repeat("You are a careful assistant who answers in full sentences. ", 10)
	for i := 0; i < 6; i++ {
		r := e.stream(testCtx(t), chatParams(fmt.Sprintf("%s Question %d?", system, i), 3))
		if r.err != nil {
			t.Fatal(r.err)
		}
	}
	var affine *sim.Server
	for _, s := range e.sims {
		switch len(s.Records()) {
		case 6:
			affine = s
		case 0:
		default:
			t.Fatalf("shared-prefix requests were spread: %s got %d", s.Name(), len(s.Records()))
		}
	}
	if affine == nil {
		t.Fatal("no replica got all shared-prefix requests")
	}
	cached := 0
	for _, r := range affine.Records() {
		cached += r.CachedTokens
	}
	if cached == 0 {
		t.Fatal("the affine replica's prefix cache never hit")
	}
	// Hold the affine replica at its limit: the next shared-prefix request spills.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	affine.ArmFault("hang@prefill", 1)
	startStream(t, e, ctx, streamBody(system+" hold", 3))
	waitRecords(t, affine, 7)
	r := e.stream(testCtx(t), chatParams(system+" Spill?", 3))
	if r.err != nil || len(e.simRequestsOf(affine, r.requestID)) != 0 {
		t.Fatalf("the request did not spill: %+v", r)
	}
}

// A replica whose engine reports another fingerprint than configured is kept out, with the
// reason in /readyz.
func TestFingerprintMismatchExcludesReplica(t *testing.T) {
	e := newEnv(t, envOptions{
		sim: func(i int, c *sim.Config) {
			if i == 1 {
				c.CacheConfig = map[string]string{"block_size": "32"}
			}
		},
		config: func(c *config.Config) {
			for i := range c.Models[0].Replicas {
				c.Models[0].Replicas[i].Fingerprint = map[string]string{"block_size": "16"}
			}
		},
	})
	resp, err := http.Get(e.admin.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), `"state": "incompatible"`) || !strings.Contains(string(b), `block_size configured \"16\", engine reports \"32\"`) {
		t.Fatalf("readyz %s", b)
	}
	for i := 0; i < 4; i++ {
		if r := e.stream(testCtx(t), chatParams(fmt.Sprintf("q%d", i), 2)); r.err != nil {
			t.Fatal(r.err)
		}
	}
	if n := len(e.sims[1].Records()); n != 0 {
		t.Fatalf("the incompatible replica served %d requests", n)
	}
}

// A rerun never crosses fingerprints unless the configuration allows it. The revisions
// are not configured: each engine's /v1/models tells where its weights came from.
func TestRerunStaysWithinFingerprint(t *testing.T) {
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("allow=%v", allow), func(t *testing.T) {
			e := newEnv(t, envOptions{
				sim: func(i int, c *sim.Config) {
					c.Revision = fmt.Sprintf("r%d", i+1)
				},
				config: func(c *config.Config) {
					c.Policy.AllowCrossFingerprintRerun = allow
				},
			})
			e.sims[0].ArmFault("status:500@accept", 1)
			r := e.stream(testCtx(t), chatParams("cross?", 3))
			if allow != (r.err == nil) {
				t.Fatalf("allow=%v: err %v", allow, r.err)
			}
			if !allow {
				var apiErr *openai.Error
				if !errors.As(r.err, &apiErr) || apiErr.Code != "no_healthy_replica" || !strings.Contains(apiErr.Message, "compatible") {
					t.Fatalf("error %v", r.err)
				}
				if len(e.sims[1].Records()) != 0 {
					t.Fatal("the rerun crossed fingerprints")
				}
			}
		})
	}
}

// A rerun denied by the pool's retry budget ends the request with retry_budget_exhausted.
func TestRetryBudgetExhausted(t *testing.T) {
	zero, one := 0.0, 1.0
	e := newEnv(t, envOptions{config: func(c *config.Config) {
		c.Policy.RetryBudget = config.RetryBudget{Ratio: &zero, MinPerSecond: &zero, Burst: &one}
	}})
	e.sims[0].ArmFault("status:500@accept", 2)
	if r := e.stream(testCtx(t), chatParams("first", 3)); r.err != nil {
		t.Fatalf("the first rerun is within the budget: %v", r.err)
	}
	r := e.stream(testCtx(t), chatParams("second", 3))
	var apiErr *openai.Error
	if !errors.As(r.err, &apiErr) || apiErr.Code != "retry_budget_exhausted" || apiErr.StatusCode != 503 {
		t.Fatalf("error %v", r.err)
	}
}

// A rerun whose prompt is too long to prefill again is refused up front.
func TestRerunTooExpensive(t *testing.T) {
	e := newEnv(t, envOptions{config: func(c *config.Config) {
		c.Policy.MaxRerunPrefillTokens = 50
		c.Models[0].Affinity.PrefixBytes = -1 // the idle pool's first pick is sim-1
	}})
	e.sims[0].ArmFault("status:500@accept", 1)
	r := e.stream(testCtx(t), chatParams(strings.Repeat("word ", 200), 3))
	var apiErr *openai.Error
	if !errors.As(r.err, &apiErr) || apiErr.Code != "rerun_too_expensive" {
		t.Fatalf("error %v", r.err)
	}
	if len(e.sims[1].Records()) != 0 {
		t.Fatal("the expensive rerun was attempted")
	}
	e.sims[0].ArmFault("status:500@accept", 1)
	if r := e.stream(testCtx(t), chatParams("short prompts still rerun", 3)); r.err != nil || len(e.simRequests(1, r.requestID)) != 1 {
		t.Fatalf("short prompt: %+v", r)
	}
}

// An orchestrator declares a replica dead: its running attempt fails at once and, nothing
// having been delivered, is rerun; the replica gets no new work.
func TestAdminDeclaresReplicaDead(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.sims[0].ArmFault("hang@prefill", 1)
	done := make(chan streamResult, 1)
	go func() { done <- e.stream(testCtx(t), chatParams("stuck", 3)) }()
	waitRecords(t, e.sims[0], 1)
	resp := post(t, e.admin.URL+"/admin/replicas/sim-model/sim-1", `{"state":"dead","reason":"node drained by the orchestrator"}`)
	if b := readAll(t, resp); resp.StatusCode != 200 || !strings.Contains(b, `"attempts_failed": 1`) {
		t.Fatalf("admin: %d %s", resp.StatusCode, b)
	}
	r := <-done
	if r.err != nil || len(e.simRequests(1, r.requestID)) != 1 {
		t.Fatalf("rerun after declared death: %+v", r)
	}
	if rec := e.record(r.requestID); rec.Attempts[0].EndReason != "replica_declared_dead" {
		t.Fatalf("journal %+v", rec)
	}
	bad := post(t, e.admin.URL+"/admin/replicas/sim-model/sim-1", `{"state":"sleepy"}`)
	if bad.StatusCode != 400 {
		t.Fatalf("bad state: %d", bad.StatusCode)
	}
	if unknown := post(t, e.admin.URL+"/admin/replicas/sim-model/nope", `{"state":"dead"}`); unknown.StatusCode != 404 {
		t.Fatalf("unknown replica: %d", unknown.StatusCode)
	}
	// Draining: no new work, and back to work when active again.
	post(t, e.admin.URL+"/admin/replicas/sim-model/sim-1", `{"state":"active"}`)
	post(t, e.admin.URL+"/admin/replicas/sim-model/sim-2", `{"state":"draining"}`)
	before := len(e.sims[1].Records())
	if r := e.stream(testCtx(t), chatParams("not on the draining one", 2)); r.err != nil || len(e.simRequests(0, r.requestID)) != 1 {
		t.Fatalf("while sim-2 drains: %+v", r)
	}
	if len(e.sims[1].Records()) != before {
		t.Fatal("a draining replica got new work")
	}
}

// simRequestsOf is simRequests for a replica given by value.
func (e *env) simRequestsOf(s *sim.Server, id string) []sim.Record {
	var out []sim.Record
	for _, r := range s.Records() {
		if r.RequestID == id {
			out = append(out, r)
		}
	}
	return out
}

// A replica that serves another model than its pool's is kept out, with the reason.
func TestReplicaServingAnotherModelIsExcluded(t *testing.T) {
	e := newEnv(t, envOptions{sim: func(i int, c *sim.Config) {
		if i == 0 {
			c.Model = "other-model"
		}
	}})
	resp, err := http.Get(e.admin.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "serves other-model, not sim-model") {
		t.Fatalf("readyz %s", b)
	}
	for i := 0; i < 3; i++ {
		if r := e.stream(testCtx(t), chatParams(fmt.Sprintf("m%d", i), 2)); r.err != nil {
			t.Fatal(r.err)
		}
	}
	if n := len(e.sims[0].Records()); n != 0 {
		t.Fatalf("the replica of another model served %d requests", n)
	}
}

// The rerun cost subtracts a prefix the rerun's replica likely has cached: a rerun refused
// as too expensive for a cold replica is allowed when another replica prefilled the same
// prompt prefix recently.
func TestRerunCostCountsACachedPrefix(t *testing.T) {
	shared := strings.Repeat("The same long system prompt, shared by many requests. ", 8)
	var count int
	e := newEnv(t, envOptions{config: func(c *config.Config) {
		c.Models[0].Affinity.PrefixBytes = 256
		c.Models[0].MaxOutstanding = 1
	}})
	// The engine's own count of the prompt, to set the limit just under it.
	resp := post(t, e.sims[0].URL()+"/tokenize", fmt.Sprintf(`{"model":"sim-model","messages":[{"role":"user","content":%q}]}`, shared+" Warm?"))
	var tok struct {
		Count int `json:"count"`
	}
	json.NewDecoder(resp.Body).Decode(&tok)
	count = tok.Count
	if count < 80 {
		t.Fatalf("prompt of %d tokens is too short for the test", count)
	}
	e2 := newEnv(t, envOptions{sims: e.sims, config: func(c *config.Config) {
		c.Models[0].Affinity.PrefixBytes = 256
		c.Models[0].MaxOutstanding = 1
		c.Policy.MaxRerunPrefillTokens = count - 32 // over for a cold rerun, under with 64 cached tokens
	}})
	// Which replica does the shared prefix prefer? Ask once.
	first := e2.stream(testCtx(t), chatParams(shared+" First?", 2))
	affine, other := 0, 1
	if len(e2.simRequests(1, first.requestID)) == 1 {
		affine, other = 1, 0
	}
	// A cold prefix (never prefilled elsewhere): the rerun is refused as too expensive.
	e2.sims[affine].ArmFault("status:500@accept", 1)
	cold := e2.stream(testCtx(t), chatParams(shared+" Cold?", 2))
	var apiErr *openai.Error
	if !errors.As(cold.err, &apiErr) || apiErr.Code != "rerun_too_expensive" {
		t.Fatalf("cold rerun: %v", cold.err)
	}
	// Let the other replica prefill the prefix: hold the affine one at its limit so the
	// request spills there.
	ctx, cancel := context.WithCancel(context.Background())
	e2.sims[affine].ArmFault("hang@prefill", 1)
	startStream(t, e2, ctx, streamBody(shared+" Hold.", 2))
	waitRecords(t, e2.sims[affine], 3)
	spill := e2.stream(testCtx(t), chatParams(shared+" Spill?", 2))
	cancel()
	if spill.err != nil || len(e2.simRequests(other, spill.requestID)) != 1 {
		t.Fatalf("spill: %+v", spill)
	}
	e2.record(spill.requestID)
	// Now the rerun goes to a replica that has the prefix: allowed.
	e2.sims[affine].ArmFault("status:500@accept", 1)
	warm := e2.stream(testCtx(t), chatParams(shared+" Warm?", 2))
	if warm.err != nil || len(e2.simRequests(other, warm.requestID)) != 1 {
		t.Fatalf("warm rerun: %+v", warm)
	}
}

// The engine's own queue steers new work even when it comes from elsewhere: a replica whose
// engine reports waiting requests (another gateway's, or direct clients') gets no new
// request while an idle one exists.
func TestEngineQueueSteersRouting(t *testing.T) {
	e := newEnv(t, envOptions{sim: func(i int, c *sim.Config) {
		c.MaxRunning = 1
		c.DecodePerToken = 20 * time.Millisecond
	}})
	// Three clients go to sim-1 directly: one runs, two wait in its queue.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := 0; i < 3; i++ {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.sims[0].URL()+"/v1/chat/completions", strings.NewReader(streamBody("direct", 200)))
		go func() {
			if resp, err := http.DefaultClient.Do(req); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	waitRecords(t, e.sims[0], 3)
	if _, err := e.sims[0].WaitRecord(testCtx(t), func(r sim.Record) bool { return r.TokensComputed > 0 }); err != nil {
		t.Fatal(err)
	}
	refresh := post(t, e.admin.URL+"/admin/refresh", "")
	var ready struct {
		Pools []struct {
			Replicas []struct {
				Name    string `json:"name"`
				Running int    `json:"engine_running"`
				Waiting int    `json:"engine_waiting"`
			} `json:"replicas"`
		} `json:"models"`
	}
	if err := json.NewDecoder(refresh.Body).Decode(&ready); err != nil || refresh.StatusCode != 200 {
		t.Fatalf("refresh: %d %v", refresh.StatusCode, err)
	}
	if busy := ready.Pools[0].Replicas[0]; busy.Name != "sim-1" || busy.Running < 1 {
		t.Fatalf("the gateway does not see sim-1's load: %+v", busy)
	}
	r := e.stream(testCtx(t), chatParams("where to?", 2))
	if r.err != nil || len(e.simRequests(1, r.requestID)) != 1 {
		t.Fatalf("the request did not avoid the queued replica: %+v", r)
	}
}
