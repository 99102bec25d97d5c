package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fencegate/fencegate/internal/agent"
	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/sim"
)

// agentCounter reads one of an agent's own counters from its metrics listener.
func agentCounter(t *testing.T, a *agent.Agent, name string) string {
	t.Helper()
	resp, err := http.Get(a.MetricsURL() + agent.PathOwnMetrics)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("%s not among the agent's metrics:\n%s", name, b)
	return ""
}

// The agent secret is rotated while clients keep sending, the gateway and two fenced agents
// each reading their own copy of the secret file at their own moment, as pods do when a
// Kubernetes Secret changes: the files go from "old" to "old, new", to "new, old", to "new",
// each step read everywhere before the next. No request fails and no agent refuses a single
// call (data, renewal, probe or scrape); afterwards the old secret is refused.
func TestAgentSecretRotationWithoutRestarts(t *testing.T) {
	dir := t.TempDir()
	write := func(path, content string) {
		t.Helper()
		if err := writeFile(path, content); err != nil {
			t.Fatal(err)
		}
	}
	var sims []*sim.Server
	var agents []*agent.Agent
	var agentFiles []string
	for i := range 2 {
		s := startSim(t, sim.Config{Name: fmt.Sprintf("sim-%d", i+1)})
		file := filepath.Join(dir, fmt.Sprintf("agent-%d.secret", i+1))
		write(file, "old\n")
		a, err := agent.Start(agent.Config{Engine: s.URL(), Listen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0", SecretFile: file})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		sims, agents, agentFiles = append(sims, s), append(agents, a), append(agentFiles, file)
	}
	gatewayFile := filepath.Join(dir, "gateway.secret")
	write(gatewayFile, "old\n")
	var cfg *config.Config
	e := newEnv(t, envOptions{sims: sims, config: func(c *config.Config) {
		for i := range c.Models[0].Replicas {
			c.Models[0].Replicas[i].URL = agents[i].URL()
			c.Models[0].Replicas[i].Agent = true
		}
		c.Leases = config.Leases{TTL: config.Duration(testTTL), RenewEvery: config.Duration(testRenew),
			HeartbeatTimeout: config.Duration(testHeartbeat), DriftMargin: config.Duration(testDrift)}
		c.AgentSecretFile = gatewayFile
		cfg = c
	}})
	reloadGateway := func() {
		t.Helper()
		if err := e.gw.Reload(cfg); err != nil { // what SIGHUP and the file's poll do
			t.Fatal(err)
		}
	}
	reloadAgent := func(i int) {
		t.Helper()
		if _, err := agents[i].ReloadSecret(); err != nil { // what SIGHUP and the file's poll do
			t.Fatal(err)
		}
	}

	// Clients send all along.
	stop := make(chan struct{})
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		failures []error
		served   int
	)
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				r := e.stream(testCtx(t), chatParams("rotate", 3))
				mu.Lock()
				if r.err != nil || r.finish == "" {
					failures = append(failures, fmt.Errorf("%+v", r))
				}
				served++
				mu.Unlock()
			}
		})
	}
	oneEach := func() { // at least one request while each state holds
		t.Helper()
		if _, err := e.client.Chat.Completions.New(testCtx(t), chatParams("between steps", 2)); err != nil {
			t.Fatalf("a request between steps: %v", err)
		}
	}

	oneEach()
	// 1. Add the next secret; the gateway still sends the old one.
	write(gatewayFile, "old\nnew\n")
	reloadGateway()
	oneEach()
	write(agentFiles[0], "old\nnew\n")
	reloadAgent(0)
	oneEach()
	write(agentFiles[1], "old\nnew\n")
	reloadAgent(1)
	oneEach()
	// 2. The next secret becomes the current one: the gateway sends it, every agent takes it.
	write(gatewayFile, "new\nold\n")
	reloadGateway()
	oneEach()
	for i := range agents {
		write(agentFiles[i], "new\nold\n")
		reloadAgent(i)
		oneEach()
	}
	// 3. Drop the old secret.
	write(gatewayFile, "new\n")
	reloadGateway()
	oneEach()
	for i := range agents {
		write(agentFiles[i], "new\n")
		reloadAgent(i)
		oneEach()
	}
	close(stop)
	wg.Wait()

	if len(failures) > 0 {
		t.Fatalf("%d of %d requests failed during the rotation, the first: %v", len(failures), served, failures[0])
	}
	for i, a := range agents {
		if n := agentCounter(t, a, "fencegate_agent_unauthorized_total"); n != "0" {
			t.Errorf("agent %d refused %s calls during the rotation", i+1, n)
		}
		if n := agentCounter(t, a, "fencegate_agent_secrets"); n != "1" {
			t.Errorf("agent %d holds %s secrets after the rotation", i+1, n)
		}
		for _, key := range []string{"old", ""} {
			req, _ := http.NewRequest(http.MethodGet, a.URL()+"/v1/models", nil)
			if key != "" {
				req.Header.Set(agent.HeaderAgentKey, key)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("agent %d answered %d to the secret %q after the rotation", i+1, resp.StatusCode, key)
			}
		}
		if n := agentCounter(t, a, "fencegate_agent_unauthorized_total"); n != "2" {
			t.Errorf("agent %d counted %s refusals of the old and the missing secret, want 2", i+1, n)
		}
	}
	if _, err := e.client.Chat.Completions.New(testCtx(t), chatParams("after", 2)); err != nil {
		t.Fatalf("a request after the rotation: %v", err)
	}
	t.Logf("%d requests during the rotation", served)
}

// A secret file that turns invalid is refused by a reload, which says why, and the gateway
// keeps sending the secret read last.
func TestAgentSecretReloadRefusesABadFile(t *testing.T) {
	var cfg *config.Config
	f := newFencedEnvWith(t, fencedOptions{config: func(c *config.Config) { cfg = c }})
	if err := writeFile(cfg.AgentSecretFile, "a\nb\nc\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.gw.Reload(cfg); err == nil || !strings.Contains(err.Error(), "agent_secret_file") || !strings.Contains(err.Error(), "holds 3 secrets") {
		t.Fatalf("reload of a file with three secrets: %v", err)
	}
	if _, err := f.client.Chat.Completions.New(testCtx(t), chatParams("still", 2)); err != nil {
		t.Fatalf("a request after a refused secret file: %v", err)
	}
}
