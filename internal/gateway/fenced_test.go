package gateway_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/agent"
	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/faultproxy"
	"github.com/fencegate/fencegate/internal/sim"
	"github.com/fencegate/fencegate/internal/upstream"
)

// Fenced mode: gateway → fault proxy → agent → simulated engine, on loopback. Short lease
// timings keep the tests quick; the ratios are the defaults' (renewal ≪ heartbeat < TTL),
// and the heartbeat allows five renewals to go unanswered, so a loaded machine does not
// fail one by chance.
const (
	testTTL        = time.Second
	testRenew      = 100 * time.Millisecond
	testHeartbeat  = 500 * time.Millisecond
	testDrift      = 200 * time.Millisecond
	testSecret     = "a-shared-agent-secret"
	fencedReplicas = 2
)

type fencedEnv struct {
	*env
	agents  []*agent.Agent
	proxies []*faultproxy.Proxy
}

func newFencedEnv(t testing.TB, simCfg func(i int, c *sim.Config)) *fencedEnv {
	t.Helper()
	return newFencedEnvWith(t, fencedOptions{sim: simCfg})
}

// fencedOptions change a fenced environment: the sims, the gateway's dialer (nil: TCP) and
// its configuration.
type fencedOptions struct {
	sim    func(i int, c *sim.Config)
	dial   upstream.DialFunc
	config func(c *config.Config)
}

func newFencedEnvWith(t testing.TB, o fencedOptions) *fencedEnv {
	t.Helper()
	simCfg, dial := o.sim, o.dial
	f := &fencedEnv{}
	var sims []*sim.Server
	var urls []string
	for i := 0; i < fencedReplicas; i++ {
		sc := sim.Config{Name: fmt.Sprintf("sim-%d", i+1)}
		if simCfg != nil {
			simCfg(i, &sc)
		}
		s := startSim(t, sc)
		a, err := agent.Start(agent.Config{Engine: s.URL(), Listen: "127.0.0.1:0", Secret: testSecret})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		p, err := faultproxy.Start(strings.TrimPrefix(a.URL(), "http://"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		sims, f.agents, f.proxies = append(sims, s), append(f.agents, a), append(f.proxies, p)
		urls = append(urls, p.URL())
	}
	secretFile := t.TempDir() + "/agent.secret"
	if err := writeFile(secretFile, testSecret+"\n"); err != nil {
		t.Fatal(err)
	}
	f.env = newEnv(t, envOptions{sims: sims, dial: dial, config: func(c *config.Config) {
		for i := range c.Models[0].Replicas {
			c.Models[0].Replicas[i].URL = urls[i]
			c.Models[0].Replicas[i].Agent = true
		}
		c.Leases = config.Leases{TTL: config.Duration(testTTL), RenewEvery: config.Duration(testRenew),
			HeartbeatTimeout: config.Duration(testHeartbeat), DriftMargin: config.Duration(testDrift)}
		c.AgentSecretFile = secretFile
		if o.config != nil {
			o.config(c)
		}
	}})
	return f
}

// agentAttempt is what agent i knows of an attempt once it has ended.
func (f *fencedEnv) agentAttempt(i int, attempt string) agent.AttemptInfo {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := f.agents[i].WaitEnded(ctx, attempt)
	if err != nil {
		f.t.Fatalf("agent %d: %v", i, err)
	}
	return info
}

// Partition gateway↔agent before the first delta, replica alive: the old attempt is
// fenced (the agent aborts the engine request when its lease runs out), the rerun starts
// only after that lease has expired, and the client gets one complete answer from the
// second replica and nothing of the first.
func TestPartitionBeforeFirstDeltaFencesThenReruns(t *testing.T) {
	f := newFencedEnv(t, func(i int, c *sim.Config) {
		if i == 0 {
			c.PrefillPerToken = 500 * time.Millisecond // a long prefill: alive, busy, silent
		}
	})
	p := chatParams("partition me during prefill", 6)
	done := make(chan streamResult, 1)
	go func() { done <- f.stream(testCtx(t), p) }()
	first, err := f.sims[0].WaitRecord(testCtx(t), func(r sim.Record) bool { return r.AttemptID != "" })
	if err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	f.proxies[0].BlackHole(faultproxy.Both)
	r := <-done
	if r.err != nil {
		t.Fatalf("stream: %v", r.err)
	}
	if want := f.direct(1, p); r.content != want {
		t.Fatalf("client saw %q, want replica 2's %q", r.content, want)
	}
	old, err := f.sims[0].WaitRecord(testCtx(t), func(x sim.Record) bool { return x.AttemptID == first.AttemptID && x.Outcome != "" })
	if err != nil || old.Outcome != sim.OutcomeCancelled || old.TokensSent != 0 {
		t.Fatalf("the partitioned attempt was not aborted by its agent: %+v %v", old, err)
	}
	lease := f.agentAttempt(0, first.AttemptID)
	second := f.simRequests(1, r.requestID)
	if len(second) != 1 || !second[0].Started.After(lease.ExpiresAt) {
		t.Fatalf("rerun started at %v, before the old lease expired at %v", second[0].Started, lease.ExpiresAt)
	}
	t.Logf("partition → rerun: %v (lease expired %v after the partition)", second[0].Started.Sub(cut), lease.ExpiresAt.Sub(cut))
	rec := f.record(r.requestID)
	if len(rec.Attempts) != 2 || rec.Attempts[0].EndReason != "agent_unreachable" || rec.Attempts[0].Failure != "uncertain" ||
		!rec.Attempts[0].CancelSent || rec.Attempts[1].Replica != "sim-2" || rec.Outcome != "completed" {
		t.Fatalf("journal %+v", rec)
	}
}

// Same partition after the first delta: the interruption event, no rerun, and the agent
// still aborts the engine request once the lease runs out.
func TestPartitionAfterFirstDeltaInterrupts(t *testing.T) {
	f := newFencedEnv(t, func(i int, c *sim.Config) { c.DecodePerToken = 30 * time.Millisecond })
	body := streamBody("partition me mid-stream", 200)
	resp := post(t, f.srv.URL+"/v1/chat/completions", body)
	id := resp.Header.Get("X-Request-Id")
	readUntilContent(t, resp)
	f.proxies[0].BlackHole(faultproxy.Both)
	rest, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(rest), `"code":"upstream_decode_interrupted"`) || strings.Contains(string(rest), "[DONE]") {
		t.Fatalf("tail of the stream %q", rest)
	}
	if len(f.sims[1].Records()) != 0 {
		t.Fatal("a rerun was started after the boundary")
	}
	old, err := f.sims[0].WaitRecord(testCtx(t), func(x sim.Record) bool { return x.RequestID == id && x.Outcome != "" })
	if err != nil || old.Outcome != sim.OutcomeCancelled || old.TokensComputed >= 200 {
		t.Fatalf("the partitioned attempt kept decoding: %+v %v", old, err)
	}
}

// A heartbeat is answered even when the engine is saturated: queued requests are slow, not
// uncertain, and none is failed over.
func TestSaturatedEngineKeepsHeartbeat(t *testing.T) {
	f := newFencedEnv(t, func(i int, c *sim.Config) { c.MaxRunning = 1; c.DecodePerToken = 15 * time.Millisecond })
	results := make(chan streamResult, 4)
	for i := 0; i < 4; i++ {
		go func() { results <- f.stream(testCtx(t), chatParams(fmt.Sprintf("queued %d", i), 25)) }()
	}
	for i := 0; i < 4; i++ {
		r := <-results
		if r.err != nil {
			t.Fatalf("queued request failed: %v", r.err)
		}
		if rec := f.record(r.requestID); len(rec.Attempts) != 1 {
			t.Fatalf("a slow request was failed over: %+v", rec)
		}
	}
}

// The gateway process is killed mid-stream: the agent aborts the engine request (no GPU
// work without an owner).
func TestGatewayKilledAgentAborts(t *testing.T) {
	s := startSim(t, sim.Config{Name: "sim-1", DecodePerToken: 30 * time.Millisecond})
	a, err := agent.Start(agent.Config{Engine: s.URL(), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	yaml := childYAML("memory:", "gw-k", a.URL()) + "    # fenced\n"
	yaml = strings.Replace(yaml, `name: sim-1}`, `name: sim-1, agent: true}`, 1)
	yaml += "leases:\n  ttl: 2s\n  renew_every: 200ms\n  heartbeat_timeout: 1s\n"
	gw := startChild(t, yaml)
	resp := post(t, gw.url+"/v1/chat/completions", streamBody("kill my gateway", 300))
	id := resp.Header.Get("X-Request-Id")
	readUntilContent(t, resp)
	gw.kill()
	ctx, cancel := context.WithTimeout(context.Background(), 10*testTTL)
	defer cancel()
	got, err := s.WaitRecord(ctx, func(x sim.Record) bool { return x.RequestID == id && x.Outcome != "" })
	if err != nil || got.Outcome != sim.OutcomeCancelled || got.TokensComputed >= 300 {
		t.Fatalf("engine request after the gateway died: %+v %v", got, err)
	}
}
