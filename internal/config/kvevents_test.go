package config

import (
	"strings"
	"testing"
	"time"
)

func TestKVEventsConfig(t *testing.T) {
	c, err := Parse([]byte(`
models:
  - name: m
    kv_events: {endpoint: "tcp://{host}:5557", replay_endpoint: "tcp://{host}:5558", topic: kv}
    replicas:
      - {url: "http://10.0.0.7:8000"}
      - {url: "http://[fd00::1]:8000", engine: vllm}
      - {url: "http://vllm-2.vllm:8000", kv_events: {endpoint: "tcp://events.example:6000", late_after: 5s}}
      - {url: "http://10.0.0.9:30000", engine: sglang}
`))
	if err != nil {
		t.Fatal(err)
	}
	m := c.Models[0]
	if m.KVEvents.LateAfter.D() != DefaultKVEventsLateAfter {
		t.Errorf("late_after %s, want the default", m.KVEvents.LateAfter.D())
	}
	got := m.KVEvents.For(m.Replicas[0].URL)
	if got.Endpoint != "tcp://10.0.0.7:5557" || got.ReplayEndpoint != "tcp://10.0.0.7:5558" || got.Topic != "kv" {
		t.Errorf("for replica 0: %+v", got)
	}
	if got := m.KVEvents.For(m.Replicas[1].URL); got.Endpoint != "tcp://[fd00::1]:5557" {
		t.Errorf("for an IPv6 replica: %s", got.Endpoint)
	}
	if r := m.Replicas[2].KVEvents; r.Endpoint != "tcp://events.example:6000" || r.LateAfter.D() != 5*time.Second {
		t.Errorf("replica 2's own: %+v", r)
	}

	base := "models:\n  - name: m\n    replicas:\n      - url: http://127.0.0.1:9001\n"
	cases := map[string]string{
		base + "    kv_events: {replay_endpoint: 'tcp://{host}:5558'}\n":                                                                                      "models[0].kv_events.endpoint: required",
		base + "    kv_events: {endpoint: 'tcp://*:5557'}\n":                                                                                                  "an address to bind",
		base + "    kv_events: {endpoint: 'ipc:///tmp/kv'}\n":                                                                                                 "not a tcp://HOST:PORT",
		base + "    kv_events: {endpoint: 'tcp://{pod}:5557'}\n":                                                                                              "the only placeholder is {host}",
		base + "    kv_events: {endpoint: 'tcp://{host}:99999'}\n":                                                                                            "port",
		base + "    kv_events: {endpoint: 'tcp://{host}:5557', replay_endpoint: 'tcp://{host}:5557'}\n":                                                       "replay_endpoint",
		base + "    kv_events: {endpoint: 'tcp://{host}:5557', late_after: -1s}\n":                                                                            "late_after",
		base + "    kv_events: {endpoint: 'tcp://{host}:5557'}\n    affinity: {policy: prefix_hash}\n":                                                        "read by affinity.policy cache_aware only",
		"models:\n  - name: m\n    kv_events: {endpoint: 'tcp://{host}:5557'}\n    replicas:\n      - {url: 'http://127.0.0.1:9001', engine: llamacpp}\n":     "models[0].replicas[0].kv_events: engine is llamacpp",
		"models:\n  - name: m\n    replicas:\n      - {url: 'http://127.0.0.1:9001', kv_events: {endpoint: 'tcp://x:1'}}\n    affinity: {prefix_bytes: -1}\n": "prefix_bytes -1",
	}
	for in, want := range cases {
		if _, err := Parse([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("config %q: error %v, want one saying %q", in, err, want)
		}
	}
}
