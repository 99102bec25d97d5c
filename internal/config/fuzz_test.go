package config

import (
	"testing"
)

// The configuration loader must refuse what it cannot use with an error, never a panic,
// and what it accepts must be complete: validating it again changes nothing and finds no
// fault (serve validates a configuration a second time when FENCEGATE_STORE is set).
func FuzzParse(f *testing.F) {
	base := "models:\n  - name: m\n    replicas:\n      - url: http://127.0.0.1:9001\n"
	for _, s := range []string{
		base,
		base + "listen: 127.0.0.1:8080\nadmin_listen: 127.0.0.1:9090\n",
		base + "auth:\n  keys: [{id: a, key: 0123456789abcdef, models: [m], rpm: 5, tpm: 9, max_concurrent: 1}]\n",
		base + "auth:\n  keys: [{id: a, key_sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08}]\n",
		base + "limits: {backend: redis://127.0.0.1:6379/0, on_backend_error: closed, max_body_bytes: 2048}\n",
		base + "server: {read_header_timeout: 1s, body_read_timeout: 2s, idle_timeout: 3s, max_header_bytes: 8192, max_connections: -1}\n",
		base + "policy: {max_attempts: 3, idle_timeout: 1m, retry_budget: {ratio: 0.5}}\n",
		"models:\n  - name: m\n    replicas_from: {dns: engines.local, port: 8001, every: 1s, agent: true}\n",
		"models: [{name: m, replicas: [{url: 'http://a:1', fingerprint: {revision: r1}, kv_cache_domain: d}]}]\n",
		"listen: [\n", "models: {}\n", "\x00", "&a [*a]", "models:\n  - name: m\n    replicas:\n      - url: http://127.0.0.1:9001\n        priority: -1\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b)
		if err != nil {
			return
		}
		if len(c.Models) == 0 || c.Listen == "" || c.Store == "" || c.Limits.MaxBodyBytes < 1024 || c.Server.MaxHeaderBytes < 4096 {
			t.Fatalf("accepted an incomplete configuration: %+v", c)
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("an accepted configuration fails validation again: %v", err)
		}
	})
}
