package config

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// KVEvents is where a replica's engine publishes its KV cache events — vLLM started with
// --kv-events-config '{"enable_kv_cache_events": true, "publisher": "zmq", "endpoint":
// "tcp://*:5557", ...}' — which the cache-aware policy reads to size and age its record of
// the replica (docs/design.md, "Placement"). On a model it applies to every replica, listed
// or discovered, that sets none of its own; {host} in an address is the replica URL's host.
type KVEvents struct {
	// Endpoint is the engine's PUB socket as the gateway reaches it: tcp://HOST:PORT.
	Endpoint string `yaml:"endpoint"`
	// ReplayEndpoint is its ROUTER socket (vLLM's replay_endpoint), from which batches
	// missed are asked again; empty: none, a batch missed degrades the replica's record.
	ReplayEndpoint string `yaml:"replay_endpoint"`
	// Topic is the engine's topic (vLLM's topic; default "").
	Topic string `yaml:"topic"`
	// LateAfter: when requests that bring new prompt blocks were sent to the replica and no
	// batch came for this long, its events are late and its record degrades until the next
	// batch. Default 30s.
	LateAfter Duration `yaml:"late_after"`
}

// DefaultKVEventsLateAfter is KVEvents.LateAfter's default.
const DefaultKVEventsLateAfter = 30 * time.Second

// For returns k for the replica at replicaURL: {host} replaced by the URL's host.
func (k KVEvents) For(replicaURL string) KVEvents {
	host := replicaURL
	if i := strings.Index(host, "://"); i >= 0 {
		host = host[i+3:]
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if strings.Contains(host, ":") {
		host = "[" + host + "]" // IPv6 in an address
	}
	k.Endpoint = strings.ReplaceAll(k.Endpoint, "{host}", host)
	k.ReplayEndpoint = strings.ReplaceAll(k.ReplayEndpoint, "{host}", host)
	return k
}

func (k *KVEvents) validate(field string) error {
	if k.Endpoint == "" {
		return fmt.Errorf("%s.endpoint: required (the engine's --kv-events-config endpoint as the gateway reaches it, e.g. tcp://{host}:5557)", field)
	}
	if err := checkZMQEndpoint(k.Endpoint); err != nil {
		return fmt.Errorf("%s.endpoint: %w", field, err)
	}
	if k.ReplayEndpoint != "" {
		if err := checkZMQEndpoint(k.ReplayEndpoint); err != nil {
			return fmt.Errorf("%s.replay_endpoint: %w", field, err)
		}
		if k.ReplayEndpoint == k.Endpoint {
			return fmt.Errorf("%s.replay_endpoint: %q is the endpoint too; the engine binds them on two ports", field, k.ReplayEndpoint)
		}
	}
	return defaultPositive(&k.LateAfter, DefaultKVEventsLateAfter, field+".late_after")
}

// checkZMQEndpoint accepts tcp://HOST:PORT, with {host} for the replica's host.
func checkZMQEndpoint(ep string) error {
	rest, ok := strings.CutPrefix(ep, "tcp://")
	if !ok {
		return fmt.Errorf("%q is not a tcp://HOST:PORT address", ep)
	}
	probe := strings.ReplaceAll(rest, "{host}", "h")
	if strings.ContainsAny(probe, "{}") {
		return fmt.Errorf("%q: the only placeholder is {host}", ep)
	}
	host, port, err := net.SplitHostPort(probe)
	if err != nil {
		return fmt.Errorf("%q is not a tcp://HOST:PORT address: %w", ep, err)
	}
	if host == "" || host == "*" || host == "0.0.0.0" || host == "::" {
		return fmt.Errorf("%q is an address to bind (the engine's side); give the one the gateway connects to, e.g. tcp://{host}:%s", ep, port)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: port %q is not 1 to 65535", ep, port)
	}
	return nil
}
