package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/gateway"
	"github.com/fencegate/fencegate/internal/h1server/h1servertest"
	"github.com/fencegate/fencegate/internal/sim"
)

// recorded reads a fixture of internal/discover/testdata without its header.
func recorded(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("../discover/testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	for bytes.HasPrefix(b, []byte("#")) {
		_, b, _ = bytes.Cut(b, []byte("\n"))
	}
	return b
}

// fakeEngine answers GET paths with recorded bodies (404 for the rest) and /health with 200.
func fakeEngine(t *testing.T, bodies map[string][]byte) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			return
		}
		b, ok := bodies[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// adminOver runs a gateway over replicas and returns its admin listener's URL, once the
// first scrape (and with it the engines' discovery) has run.
func adminOver(t *testing.T, model string, reps []config.Replica) string {
	t.Helper()
	cfg := &config.Config{Models: []config.Model{{Name: model, Replicas: reps}}, Store: "memory:"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(context.Background(), cfg, gateway.Options{})
	if err != nil {
		t.Fatal(err)
	}
	gw.Start()                                       // the first scrape, and with it the discovery, runs before Start returns
	srv := h1servertest.NewServer(gw.AdminHandler()) // the replicas' detail
	t.Cleanup(func() { srv.Close(); gw.Close() })
	return srv.URL
}

// readyReplicas runs a gateway over replicas and returns /readyz's replicas by name.
func readyReplicas(t *testing.T, model string, reps []config.Replica) map[string]map[string]any {
	t.Helper()
	return readyzReplicas(t, adminOver(t, model, reps))
}

// readyzReplicas returns the first pool's replicas by name from /readyz at admin.
func readyzReplicas(t *testing.T, admin string) map[string]map[string]any {
	t.Helper()
	resp, err := http.Get(admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Pools []struct {
			Replicas []map[string]any `json:"replicas"`
		} `json:"models"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, r := range doc.Pools[0].Replicas {
		out[r["name"].(string)] = r
	}
	return out
}

func fingerprintOf(r map[string]any) map[string]string {
	out := map[string]string{}
	fp, _ := r["fingerprint"].(map[string]any)
	for k, v := range fp {
		out[k] = v.(string)
	}
	return out
}

// What each engine reports about itself (recorded vLLM, SGLang and llama.cpp answers) fills
// the fingerprint where the configuration is silent and checks it where it speaks: a
// replica that contradicts its configuration is kept out with the reason.
func TestFingerprintDiscoveredFromEngines(t *testing.T) {
	vllm := map[string][]byte{"/v1/models": recorded(t, "vllm_models.txt"), "/version": recorded(t, "vllm_version.txt"),
		"/metrics": recorded(t, "vllm_metrics.txt")}
	sglang := map[string][]byte{"/server_info": recorded(t, "sglang_server_info.txt"),
		"/v1/models": []byte(`{"object":"list","data":[{"id":"qwen2.5-7b","object":"model","owned_by":"sglang","root":"qwen2.5-7b"}]}`)}
	sglangOld := map[string][]byte{"/get_server_info": sglang["/server_info"], "/v1/models": sglang["/v1/models"]}
	llama := map[string][]byte{"/props": recorded(t, "llamacpp_props.txt"), "/v1/models": recorded(t, "llamacpp_models.txt")}

	t.Run("vllm", func(t *testing.T) {
		rev := "0e9e39f249a16976918f6564b8830bc894c89659"
		got := readyReplicas(t, "llama-3.1-8b", []config.Replica{
			{Name: "agrees", URL: fakeEngine(t, vllm), Fingerprint: map[string]string{"revision": rev, "cache_dtype": "fp8"}},
			{Name: "other-revision", URL: fakeEngine(t, vllm), Fingerprint: map[string]string{"revision": "r2"}},
		})
		a := got["agrees"]
		fp := fingerprintOf(a)
		if a["state"] != "healthy" || fp["max_model_len"] != "8192" || fp["lora"] != "sql-lora,chat-lora" ||
			fp["block_size"] != "16" || !strings.HasSuffix(fp["model"], rev) || a["engine_version"] != "0.11.0" {
			t.Fatalf("agrees: %v", a)
		}
		b := got["other-revision"]
		if b["state"] != "incompatible" || !strings.Contains(b["reason"].(string), `revision configured "r2", engine /v1/models reports "`+rev+`"`) {
			t.Fatalf("other-revision: %v", b)
		}
	})
	t.Run("sglang", func(t *testing.T) {
		got := readyReplicas(t, "qwen2.5-7b", []config.Replica{
			{Name: "agrees", URL: fakeEngine(t, sglang), Engine: "sglang", Fingerprint: map[string]string{"tensor_parallel_size": "2"}},
			{Name: "old-path", URL: fakeEngine(t, sglangOld), Engine: "sglang"},
			{Name: "awq", URL: fakeEngine(t, sglang), Engine: "sglang", Fingerprint: map[string]string{"quantization": "awq"}},
		})
		for _, n := range []string{"agrees", "old-path"} {
			fp := fingerprintOf(got[n])
			if got[n]["state"] != "healthy" || fp["quantization"] != "fp8" || fp["cache_dtype"] != "auto" || fp["chat_template"] != "qwen2-5" ||
				fp["revision"] != "a09a35458c702b33eeacc393d103063234e8bc28" || got[n]["engine_version"] != "0.5.4" {
				t.Fatalf("%s: %v", n, got[n])
			}
		}
		if r := got["awq"]; r["state"] != "incompatible" || !strings.Contains(r["reason"].(string), `quantization configured "awq", engine /server_info reports "fp8"`) {
			t.Fatalf("awq: %v", r)
		}
	})
	t.Run("llamacpp", func(t *testing.T) {
		got := readyReplicas(t, "tiny-llama", []config.Replica{
			{Name: "agrees", URL: fakeEngine(t, llama), Engine: "llamacpp", Fingerprint: map[string]string{"model": "/models/tiny.gguf"}},
			{Name: "longer-context", URL: fakeEngine(t, llama), Engine: "llamacpp", Fingerprint: map[string]string{"max_model_len": "8192"}},
		})
		fp := fingerprintOf(got["agrees"])
		if got["agrees"]["state"] != "healthy" || fp["quantization"] != "all F32" || !strings.HasPrefix(fp["chat_template"], "sha256:") ||
			fp["max_model_len"] != "4096" || got["agrees"]["engine_version"] != "b11669-Debian" {
			t.Fatalf("agrees: %v", got["agrees"])
		}
		if r := got["longer-context"]; r["state"] != "incompatible" || !strings.Contains(r["reason"].(string), `max_model_len configured "8192", engine /props reports "4096"`) {
			t.Fatalf("longer-context: %v", r)
		}
	})
}

// The simulator tells what vLLM tells: its revision is found in /v1/models' root and its
// KV cache in cache_config_info, and a configured revision that differs keeps it out.
func TestSimRevisionDiscovered(t *testing.T) {
	s, err := sim.Start(sim.Config{Revision: "abc123"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	got := readyReplicas(t, "sim-model", []config.Replica{
		{Name: "ok", URL: s.URL()},
		{Name: "pinned", URL: s.URL(), Fingerprint: map[string]string{"revision": "def456"}},
	})
	if fp := fingerprintOf(got["ok"]); fp["revision"] != "abc123" || fp["cache_dtype"] != "auto" || fp["max_model_len"] != "8192" ||
		got["ok"]["engine_version"] != sim.DefaultVersion {
		t.Fatalf("ok: %v", got["ok"])
	}
	if r := got["pinned"]; r["state"] != "incompatible" || !strings.Contains(r["reason"].(string), `revision configured "def456"`) {
		t.Fatalf("pinned: %v", r)
	}
}

// Every attempt in the journal carries the revision its replica was serving, as read from
// the engine: GET /v1/requests/{id} shows it beside the replica.
func TestAttemptsJournalTheirRevision(t *testing.T) {
	e := newEnv(t, envOptions{
		sim:    func(i int, c *sim.Config) { c.Revision = "0e9e39f2" },
		config: func(c *config.Config) { c.Models[0].Replicas[1].Priority = 1 }, // sim-1 first
	})
	e.sims[0].ArmFault("status:500@accept", 1)
	r := e.stream(testCtx(t), chatParams("which weights?", 3))
	if r.err != nil {
		t.Fatal(r.err)
	}
	e.record(r.requestID) // waits until the request is done
	resp, err := http.Get(e.srv.URL + "/v1/requests/" + r.requestID)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		ModelRevision string `json:"model_revision"`
		Attempts      []struct {
			Replica       string `json:"replica"`
			ModelRevision string `json:"model_revision"`
		} `json:"attempts"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	if len(v.Attempts) != 2 || v.ModelRevision != "0e9e39f2" {
		t.Fatalf("request %+v, want two attempts on revision 0e9e39f2", v)
	}
	for _, a := range v.Attempts {
		if a.ModelRevision != "0e9e39f2" {
			t.Fatalf("attempt on %s: revision %q", a.Replica, a.ModelRevision)
		}
	}
}

// An SGLang engine says its KV cache's size in its server info (max_total_num_tokens), not
// in its metrics: the replica's prompt record is sized by it as a vLLM replica's is by
// vllm:cache_config_info — 412,345 tokens at 8 bytes each, eight times over, is more than
// the record's most (65,536 blocks) — instead of the size kept for an engine that does not
// say (16,384).
func TestSGLangServerInfoSizesThePromptRecord(t *testing.T) {
	sglang := map[string][]byte{"/server_info": recorded(t, "sglang_server_info.txt"),
		"/v1/models": []byte(`{"object":"list","data":[{"id":"qwen2.5-7b","object":"model","owned_by":"sglang","root":"qwen2.5-7b"}]}`)}
	silent := map[string][]byte{"/v1/models": sglang["/v1/models"]}
	admin := adminOver(t, "qwen2.5-7b", []config.Replica{
		{Name: "says", URL: fakeEngine(t, sglang), Engine: "sglang"},
		{Name: "silent", URL: fakeEngine(t, silent), Engine: "sglang"},
	})
	metrics := getText(t, admin+"/metrics")
	for _, want := range []string{
		`fencegate_replica_prefix_blocks{model="qwen2.5-7b",of="capacity",replica="says"} 65536`,
		`fencegate_replica_prefix_blocks{model="qwen2.5-7b",of="capacity",replica="silent"} 16384`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
