package gateway

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/request"
)

// The headers with which a key allowed to may place its requests in a full pool's queue
// (docs/design.md §3, "The queue"); other keys' are ignored.
const (
	headerFairnessID = "X-Fencegate-Fairness-Id"
	headerPriority   = "X-Fencegate-Priority"
	// maxFairnessID bounds a fairness id: it names a flow, and is kept while it waits.
	maxFairnessID = 128
)

// keyQueue is a key's place in a full pool's queue.
type keyQueue struct {
	weight, priority               int
	fairnessHeader, priorityHeader bool
}

// queueClass is where a request of key k waits when every replica of its pool is at its
// capacity: in its key's flow, with its key's weight, in its key's class — or the class
// and fairness id its headers name, when its key may set them. Configured keys and keys
// kept in the store (fencegate keys create --weight, --priority, ...) alike.
func queueClass(k apiKey, r *http.Request) request.Class {
	c := request.Class{Flow: k.ID, Weight: max(k.queue.weight, 1), Priority: k.queue.priority}
	if k.queue.fairnessHeader {
		if id := strings.TrimSpace(r.Header.Get(headerFairnessID)); id != "" {
			c.Sub = id[:min(len(id), maxFairnessID)]
		}
	}
	if k.queue.priorityHeader {
		if v, err := strconv.Atoi(strings.TrimSpace(r.Header.Get(headerPriority))); err == nil {
			c.Priority = min(max(v, config.MinPriority), config.MaxPriority)
		}
	}
	return c
}
