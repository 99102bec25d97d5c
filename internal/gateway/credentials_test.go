package gateway_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/sim"
	"github.com/openai/openai-go/v3/option"
)

// readyz returns the gateway's /readyz document.
func (e *env) readyz() map[string]any {
	e.t.Helper()
	resp, err := http.Get(e.admin.URL + "/readyz")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	json.NewDecoder(resp.Body).Decode(&v)
	return v
}

// replicaState finds a replica's state and reason in /readyz.
func (e *env) replicaState(name string) (state, reason string) {
	for _, p := range e.readyz()["models"].([]any) {
		for _, r := range p.(map[string]any)["replicas"].([]any) {
			m := r.(map[string]any)
			if m["name"] == name {
				reason, _ := m["reason"].(string)
				return m["state"].(string), reason
			}
		}
	}
	e.t.Fatalf("no replica %s in /readyz", name)
	return "", ""
}

// Engines started with an API key get it from the gateway (from a file or an environment
// variable), never the client's; a replica whose key is missing is kept out, with the
// reason in /readyz, and nothing of it is shown.
func TestEngineCredentials(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "engine.key")
	if err := os.WriteFile(keyFile, []byte("engine-secret-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("FENCEGATE_TEST_ENGINE_KEY", "engine-secret-2")
	e := newEnv(t, envOptions{replicas: 3,
		sim: func(i int, c *sim.Config) {
			c.APIKey = []string{"engine-secret-1", "engine-secret-2", "engine-secret-3"}[i]
		},
		config: func(c *config.Config) {
			c.Models[0].Replicas[0].APIKeyFile = keyFile
			c.Models[0].Replicas[1].APIKeyEnv = "FENCEGATE_TEST_ENGINE_KEY"
			// sim-3 needs a key and has none.
		}})
	if state, reason := e.replicaState("sim-3"); state != "incompatible" || !strings.Contains(reason, "requires an API key and none is configured") {
		t.Fatalf("sim-3 %s: %q", state, reason)
	}
	if state, _ := e.replicaState("sim-1"); state != "healthy" {
		t.Fatalf("sim-1 %s", state)
	}
	for i := 0; i < 4; i++ {
		r := e.stream(testCtx(t), chatParams("with credentials", 3), option.WithHeader("Authorization", "Bearer the-clients-own"))
		if r.err != nil {
			t.Fatalf("request %d: %v", i, r.err)
		}
	}
	if len(e.sims[2].Records()) != 0 {
		t.Fatal("the replica without credentials got work")
	}
	body, _ := io.ReadAll(must(http.Get(e.admin.URL + "/readyz")).Body)
	if strings.Contains(string(body), "engine-secret") {
		t.Fatal("/readyz shows a key")
	}
}

// An engine that refuses the gateway's credentials on a request (401) is a configuration
// mistake: the request, which never reached the model, is rerun elsewhere, and the replica
// is kept out until its credentials work.
func TestEngineRefusesCredentialsOnARequest(t *testing.T) {
	var refused atomic.Int64
	strict := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			io.WriteString(w, `{"object":"list","data":[{"id":"sim-model"}]}`) // a key rotated under it: the check still passes
		case "/v1/chat/completions":
			refused.Add(1)
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":"Unauthorized"}`)
		}
	}))
	defer strict.Close()
	s := startSim(t, sim.Config{Name: "good"})
	e := newEnv(t, envOptions{sims: []*sim.Server{s}, config: func(c *config.Config) {
		c.Models[0].Replicas = append([]config.Replica{{URL: strict.URL, Name: "strict"}}, c.Models[0].Replicas...)
		c.Models[0].Replicas[1].Priority = 1 // the strict one is asked first
	}})
	r := e.stream(testCtx(t), chatParams("refused first", 3))
	if r.err != nil {
		t.Fatal(r.err)
	}
	rec := e.record(r.requestID)
	if refused.Load() != 1 || len(rec.Attempts) != 2 || rec.Attempts[0].EndReason != "engine_unauthorized" || rec.Attempts[1].Replica != "sim-1" {
		t.Fatalf("journal %+v (refused %d)", rec, refused.Load())
	}
	if state, reason := e.replicaState("strict"); state != "incompatible" || !strings.Contains(reason, "401") {
		t.Fatalf("strict %s: %q", state, reason)
	}
}

// The only replica busy: no replica can take the request now (503), and the client is
// told to come back when the engine said it would take work again, not after a made-up 1 s.
func TestEngineRetryAfterReachesTheClient(t *testing.T) {
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/chat/completions" {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"object":"error","message":"busy","type":"TooManyRequests","param":null,"code":429}`)
		}
	}))
	defer busy.Close()
	e := newEnv(t, envOptions{sims: []*sim.Server{}, config: func(c *config.Config) {
		c.Models[0].Replicas = []config.Replica{{URL: busy.URL, Name: "busy-1"}}
	}})
	resp, body := postAPI(t, e.srv.URL+"/v1/chat/completions", `{"model":"sim-model","messages":[{"role":"user","content":"busy?"}]}`)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "7" {
		t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, body)
	}
}

func must(r *http.Response, err error) *http.Response {
	if err != nil {
		panic(err)
	}
	return r
}
