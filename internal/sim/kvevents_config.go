package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// KVEventsConfig is vLLM's --kv-events-config (vllm/config/kv_events.py), with its field
// names and defaults: with EnableKVCacheEvents and the zmq publisher, the replica publishes
// its prefix cache's changes as vLLM does (kvpublish.go).
type KVEventsConfig struct {
	EnableKVCacheEvents bool `json:"enable_kv_cache_events"`
	// Publisher is "zmq" or "null"; empty: "zmq" when events are enabled, as vLLM.
	Publisher string `json:"publisher"`
	// Endpoint is the PUB socket's address. As vLLM decides: an address with "*" or "::",
	// or an ipc:// or inproc:// one, is bound; any other is connected to. Unlike vLLM, the
	// sim also binds tcp://127.0.0.1:PORT and tcp://localhost:PORT (a loopback test has
	// no other side to connect to); port 0 picks a free port (KVEventsEndpoint says which).
	// Default tcp://*:5557.
	Endpoint string `json:"endpoint"`
	// ReplayEndpoint is the ROUTER socket that answers replay requests (none when empty);
	// it is always bound.
	ReplayEndpoint string `json:"replay_endpoint"`
	// BufferSteps is how many past batches the replay socket can send again. Default 10000.
	BufferSteps int `json:"buffer_steps"`
	// HWM is vLLM's ZMQ high-water mark; accepted, not applied (the sim's PUB socket has
	// none).
	HWM int `json:"hwm"`
	// MaxQueueSize bounds the batches waiting to be published. Default 100000.
	MaxQueueSize int `json:"max_queue_size"`
	// Topic is the first frame of every published message. Default "".
	Topic string `json:"topic"`
}

// ParseKVEventsConfig reads --kv-events-config's JSON. A field vLLM's KVEventsConfig does
// not have is refused, as vLLM refuses it.
func ParseKVEventsConfig(s string) (*KVEventsConfig, error) {
	c := KVEventsConfig{Endpoint: "tcp://*:5557", BufferSteps: 10_000, HWM: 100_000, MaxQueueSize: 100_000}
	d := json.NewDecoder(bytes.NewReader([]byte(s)))
	d.DisallowUnknownFields()
	if err := d.Decode(&c); err != nil {
		return nil, fmt.Errorf("sim: --kv-events-config: %w", err)
	}
	return &c, nil
}

// publishing reports whether the configuration publishes anything, and checks it.
func (c *KVEventsConfig) publishing() (bool, error) {
	if c == nil || !c.EnableKVCacheEvents {
		return false, nil
	}
	switch c.Publisher {
	case "", "zmq":
	case "null":
		return false, nil
	default:
		return false, fmt.Errorf("sim: KVEventsConfig.Publisher: unknown event publisher %q", c.Publisher)
	}
	for name, ep := range map[string]string{"endpoint": c.Endpoint, "replay_endpoint": c.ReplayEndpoint} {
		if ep != "" && !strings.HasPrefix(ep, "tcp://") && !strings.HasPrefix(ep, "ipc://") && !strings.HasPrefix(ep, "inproc://") {
			return false, fmt.Errorf("sim: KVEventsConfig.%s: %q is not a tcp://, ipc:// or inproc:// address", name, ep)
		}
	}
	if c.Endpoint == "" {
		return false, fmt.Errorf("sim: KVEventsConfig.endpoint is empty")
	}
	if c.BufferSteps < 1 || c.MaxQueueSize < 1 {
		return false, fmt.Errorf("sim: KVEventsConfig: buffer_steps and max_queue_size must be positive")
	}
	return true, nil
}

// binds reports whether the PUB socket binds endpoint (else it connects), as vLLM's
// ZmqEventPublisher decides, and the loopback addresses besides.
func binds(endpoint string) bool {
	return strings.Contains(endpoint, "*") || strings.Contains(endpoint, "::") ||
		strings.HasPrefix(endpoint, "ipc://") || strings.HasPrefix(endpoint, "inproc://") ||
		strings.HasPrefix(endpoint, "tcp://127.0.0.1:") || strings.HasPrefix(endpoint, "tcp://localhost:")
}
