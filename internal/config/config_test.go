package config

import (
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
	r := c.Models[0].Replicas
	if r[0].Name != "127.0.0.1:9001" || r[1].Priority != 1 || c.Limits.MaxBodyBytes != DefaultMaxBodyBytes {
		t.Fatalf("replicas %+v limits %+v", r, c.Limits)
	}
}

func TestInvalidConfigNamesTheField(t *testing.T) {
	base := "models:\n  - name: m\n    replicas:\n      - url: http://127.0.0.1:9001\n"
	cases := map[string]string{
		"listen: nope\n" + base: "listen",
		"models: []\n":          "models",
		"models:\n  - replicas: [{url: http://x:1}]\n":           "models[0].name",
		"models:\n  - name: m\n    replicas: []\n":               "models[0].replicas",
		"models:\n  - name: m\n    replicas: [{url: ftp://x}]\n": "models[0].replicas[0].url",
		base + "policy:\n  max_attempts: 99\n":                   "policy.max_attempts",
		base + "policy:\n  idle_timeout: soon\n":                 "idle_timeout",
		base + "policy:\n  retry_budget: {ratio: 2}\n":           "policy.retry_budget.ratio",
		base + "bogus: 1\n":                                      "bogus",
		base + "auth:\n  keys: [{id: a, key: short}]\n":          "auth.keys[0].key",
		"models:\n  - name: m\n    replicas: [{url: 'http://a:1'}]\n  - name: m\n    replicas: [{url: 'http://a:1'}]\n": "models[1].name",
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
		k.ExcludeFrom != CanaryExcludeReruns || k.Prompt == "" {
		t.Fatalf("canary defaults %+v", k)
	}
	for in, field := range map[string]string{
		"    canary: {every: 10ms}\n":                      "models[0].canary.every",
		"    canary: {max_tokens: 4, compare_tokens: 5}\n": "models[0].canary.compare_tokens",
		"    canary: {exclude_from: sometimes}\n":          "models[0].canary.exclude_from",
		"    canary: {max_logprob_distance: -1}\n":         "models[0].canary.max_logprob_distance",
	} {
		if _, err := Parse([]byte(base + in)); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%q: error %v does not name %s", in, err, field)
		}
	}
	if _, err := Parse([]byte("models:\n  - name: m\n    replicas:\n      - url: http://127.0.0.1:9001\n        fingerprint: {max_model_len: '8192', content_sha256: ab, model: /m, dtype: bf16}\n")); err != nil {
		t.Fatalf("the discovered keys are known: %v", err)
	}
}
