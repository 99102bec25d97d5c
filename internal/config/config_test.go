package config

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMinimalConfigGetsDefaults(t *testing.T) {
	c, err := Parse([]byte(`
listen: 127.0.0.1:8080
models:
  - name: sim-model
    replicas:
      - url: http://127.0.0.1:9001
      - url: http://127.0.0.1:9002
        priority: 1
policy:
  max_attempts: 2
  idle_timeout: 30s
`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Policy.MaxAttempts != 2 || c.Policy.IdleTimeout.D() != 30*time.Second ||
		c.Policy.FirstTokenTimeout.D() != DefaultFirstTokenTimeout || *c.Policy.RetryBudget.Ratio != 0.2 {
		t.Fatalf("policy %+v", c.Policy)
	}
	if a := c.Models[0].Affinity; a.LoadBound != DefaultAffinityBound || a.LoadSlack != DefaultAffinitySlack || a.Policy != AffinityCacheAware {
		t.Fatalf("affinity %+v", a)
	}
	r := c.Models[0].Replicas
	if r[0].Name != "127.0.0.1:9001" || r[1].Priority != 1 || c.Limits.MaxBodyBytes != DefaultMaxBodyBytes {
		t.Fatalf("replicas %+v limits %+v", r, c.Limits)
	}
}

// health.eject_after: 5 when left out, -1 turns ejection off.
func TestEjectAfter(t *testing.T) {
	base := "models:\n  - name: m\n    replicas:\n      - url: http://127.0.0.1:9001\n"
	for in, want := range map[string]int{
		base:                                  DefaultEjectAfter,
		base + "health:\n  eject_after: 3\n":  3,
		base + "health:\n  eject_after: -1\n": -1,
	} {
		c, err := Parse([]byte(in))
		if err != nil {
			t.Errorf("config %q: %v", in, err)
		} else if c.Health.EjectAfter != want {
			t.Errorf("config %q: eject_after %d, want %d", in, c.Health.EjectAfter, want)
		}
	}
}

func TestInvalidConfigNamesTheField(t *testing.T) {
	base := "models:\n  - name: m\n    replicas:\n      - url: http://127.0.0.1:9001\n"
	cases := map[string]string{
		"listen: nope\n" + base: "listen",
		"models: []\n":          "models",
		"models:\n  - replicas: [{url: http://x:1}]\n":                                                           "models[0].name",
		"models:\n  - name: m\n    replicas: []\n":                                                               "models[0].replicas",
		"models:\n  - name: m\n    replicas: [{url: ftp://x}]\n":                                                 "models[0].replicas[0].url",
		base + "policy:\n  max_attempts: 99\n":                                                                   "policy.max_attempts",
		base + "policy:\n  idle_timeout: soon\n":                                                                 "idle_timeout",
		base + "policy:\n  retry_budget: {ratio: 2}\n":                                                           "policy.retry_budget.ratio",
		base + "policy:\n  rerun_engine_tools: always\n":                                                         "policy.rerun_engine_tools",
		base + "policy:\n  rerun_engine_tools: idempotent_mcp_servers\n":                                         "policy.rerun_engine_tools: idempotent_mcp_servers needs policy.idempotent_mcp_servers",
		base + "policy:\n  idempotent_mcp_servers: [docs]\n":                                                     "policy.idempotent_mcp_servers: listed, but policy.rerun_engine_tools is never",
		base + "policy:\n  rerun_engine_tools: idempotent_mcp_servers\n  idempotent_mcp_servers: [docs, '']\n":   "policy.idempotent_mcp_servers[1]",
		base + "policy:\n  rerun_engine_tools: idempotent_mcp_servers\n  idempotent_mcp_servers: [docs, docs]\n": "policy.idempotent_mcp_servers[1]",
		base + "bogus: 1\n":                             "bogus",
		base + "auth:\n  keys: [{id: a, key: short}]\n": "auth.keys[0].key",
		"models:\n  - name: m\n    replicas: [{url: 'http://a:1'}]\n  - name: m\n    replicas: [{url: 'http://a:1'}]\n":         "models[1].name",
		base + "auth:\n  keys: [{id: a, key_sha256: abc}]\n":                                                                    "auth.keys[0].key_sha256",
		base + "auth:\n  keys: [{id: a, key: 0123456789abcdefX, key_sha256: " + sha256Of("x") + "}]\n":                          "auth.keys[0]: key and key_sha256",
		base + "auth:\n  keys: [{id: a}]\n":                                                                                     "auth.keys[0].key",
		base + "auth:\n  keys: [{id: a, key: 0123456789abcdefX, rpm: -1}]\n":                                                    "auth.keys[0].rpm",
		base + "auth:\n  keys: [{id: a, key: 0123456789abcdefX}, {id: a, key: 0123456789abcdefY}]\n":                            "auth.keys[1].id",
		base + "auth:\n  keys: [{id: a, key: 0123456789abcdefX}, {id: b, key_sha256: " + sha256Of("0123456789abcdefX") + "}]\n": "auth.keys[1].key",
		base + "auth:\n  admin_keys: [{id: ops, key: 0123456789abcdefX, rpm: 5}]\n":                                             "auth.admin_keys[0]",
		base + "limits:\n  backend: memcached://x\n":                                                                            "limits.backend",
		base + "limits:\n  backend: redis://127.0.0.1:6379/zero\n":                                                              "limits.backend",
		base + "limits:\n  on_backend_error: maybe\n":                                                                           "limits.on_backend_error",
		base + "server:\n  max_header_bytes: 100\n":                                                                             "server.max_header_bytes",
		base + "server:\n  body_read_timeout: slow\n":                                                                           "server.body_read_timeout",
		base + "server:\n  max_connections: -5\n":                                                                               "server.max_connections",
		base + "health:\n  eject_after: -2\n":                                                                                   "health.eject_after",
		"models:\n  - name: m\n    replicas: [{url: 'http://a:1'}]\n    affinity: {load_slack: -2}\n":                           "models[0].affinity.load_slack",
		base + "admin_listen: 0.0.0.0:9090\n":                                                                                   "admin_listen",
		base + "admin_listen: nope\n":                                                                                           "admin_listen",
		base + "listen: 127.0.0.1:9090\nadmin_listen: 127.0.0.1:9090\n":                                                         "admin_listen",
	}
	for in, field := range cases {
		_, err := Parse([]byte(in))
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("config %q: error %v does not name %q", in, err, field)
		}
	}
}

// The canary is off unless configured; configured, it gets its defaults and its fields are
// checked by name.
func TestCanaryConfig(t *testing.T) {
	base := "models:\n  - name: m\n    replicas:\n      - url: http://127.0.0.1:9001\n"
	c, err := Parse([]byte(base))
	if err != nil || c.Models[0].Canary != nil {
		t.Fatalf("canary without configuration: %+v, %v", c.Models[0].Canary, err)
	}
	c, err = Parse([]byte(base + "    canary: {every: 1m}\n"))
	if err != nil {
		t.Fatal(err)
	}
	k := c.Models[0].Canary
	if k.Every.D() != time.Minute || k.MaxTokens != DefaultCanaryMaxTokens || k.CompareTokens != DefaultCanaryCompareTokens ||
		k.ExcludeFrom != CanaryExcludeReruns || k.Prompt == "" || !k.CacheChecked() || !slices.Equal(k.CacheBlocks, []int{1, 2}) ||
		k.CacheBlockSize != DefaultCanaryCacheBlock {
		t.Fatalf("canary defaults %+v", k)
	}
	if c, err := Parse([]byte(base + "    canary: {cache_check: false, cache_blocks: []}\n")); err != nil || c.Models[0].Canary.CacheChecked() {
		t.Fatalf("cache check off: %v", err)
	}
	for in, field := range map[string]string{
		"    canary: {every: 10ms}\n":                      "models[0].canary.every",
		"    canary: {max_tokens: 4, compare_tokens: 5}\n": "models[0].canary.compare_tokens",
		"    canary: {exclude_from: sometimes}\n":          "models[0].canary.exclude_from",
		"    canary: {max_logprob_distance: -1}\n":         "models[0].canary.max_logprob_distance",
		"    canary: {cache_blocks: [1, 9]}\n":             "models[0].canary.cache_blocks",
		"    canary: {cache_blocks: []}\n":                 "models[0].canary.cache_blocks",
		"    canary: {cache_block_size: -16}\n":            "models[0].canary.cache_block_size",
	} {
		if _, err := Parse([]byte(base + in)); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%q: error %v does not name %s", in, err, field)
		}
	}
	if _, err := Parse([]byte("models:\n  - name: m\n    replicas:\n      - url: http://127.0.0.1:9001\n        fingerprint: {max_model_len: '8192', content_sha256: ab, model: /m, dtype: bf16}\n")); err != nil {
		t.Fatalf("the discovered keys are known: %v", err)
	}
}

func sha256Of(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Keys, limits, the server's bounds and the admin listener get their defaults, and a key
// may be written as its hash.
func TestKeysLimitsServerDefaults(t *testing.T) {
	c, err := Parse([]byte(`
models:
  - name: m
    replicas: [{url: http://127.0.0.1:9001}]
admin_listen: localhost:9090
auth:
  keys:
    - {id: team-a, key_sha256: "` + strings.ToUpper(sha256Of("team-a-secret-0123")) + `", models: [m], max_concurrent: 2, rpm: 60, tpm: 1000}
    - {id: team-b, key: team-b-secret-0123}
`))
	if err != nil {
		t.Fatal(err)
	}
	k := c.Auth.Keys[0]
	if k.KeySHA256 != sha256Of("team-a-secret-0123") || k.MaxConcurrent != 2 || k.RPM != 60 || k.TPM != 1000 || len(k.Models) != 1 {
		t.Errorf("key %+v", k)
	}
	if !c.Auth.HasPlaintextKeys() {
		t.Error("team-b's key is in plain text, HasPlaintextKeys says not")
	}
	if c.Auth.StoreRefresh.D() != DefaultKeyStoreRefresh {
		t.Errorf("store_refresh %s", c.Auth.StoreRefresh.D())
	}
	if c.Limits.Backend != LimitsLocal || c.Limits.OnBackendError != LimitsFailOpen || c.Limits.KeyPrefix != DefaultLimitsKeyPrefix {
		t.Errorf("limits %+v", c.Limits)
	}
	s := c.Server
	if s.ReadHeaderTimeout.D() != DefaultReadHeaderTimeout || s.BodyReadTimeout.D() != DefaultBodyReadTimeout ||
		s.IdleTimeout.D() != DefaultServerIdleTimeout || s.MaxHeaderBytes != DefaultMaxHeaderBytes || s.MaxConnections != DefaultMaxConnections {
		t.Errorf("server %+v", s)
	}
	c.Auth.Keys = c.Auth.Keys[:1]
	if c.Auth.HasPlaintextKeys() {
		t.Error("only a hashed key is left, HasPlaintextKeys says there is a plaintext one")
	}
	for hp, want := range map[string]bool{"127.0.0.1:1": true, "[::1]:1": true, "localhost:1": true, "0.0.0.0:1": false, "10.0.0.1:1": false, ":1": false} {
		if IsLoopback(hp) != want {
			t.Errorf("IsLoopback(%s) = %v", hp, !want)
		}
	}
}

// policy.rerun_engine_tools is never unless the operator names the MCP servers whose tools
// are idempotent.
func TestRerunEngineTools(t *testing.T) {
	base := "models:\n  - name: m\n    replicas:\n      - url: http://127.0.0.1:9001\n"
	c, err := Parse([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if c.Policy.RerunEngineTools != RerunEngineToolsNever || c.Policy.IdempotentServers() != nil {
		t.Fatalf("default %+v", c.Policy)
	}
	c, err = Parse([]byte(base + "policy:\n  rerun_engine_tools: idempotent_mcp_servers\n  idempotent_mcp_servers: [docs, weather]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Policy.IdempotentServers(); len(got) != 2 || got[0] != "docs" || got[1] != "weather" {
		t.Fatalf("idempotent servers %v", got)
	}
}
