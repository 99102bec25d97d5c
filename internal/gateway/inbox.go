package gateway

import (
	"sync"

	"github.com/fencegate/fencegate/internal/failover"
	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/upstream"
)

// controlKind names an event that something other than the upstream reader reports to a
// request's owner.
type controlKind uint8

const (
	// ctlAttemptFailed: the attempt's replica was found gone (its agent's heartbeat failed,
	// or an operator declared it dead).
	ctlAttemptFailed controlKind = iota + 1
	// ctlFenced: a cancelled attempt is proven stopped (agent ack or lease expiry).
	ctlFenced
	// ctlAbort: the gateway ends the request (shutdown).
	ctlAbort
	// ctlPromptTokens: an engine counted the prompt's tokens (the rerun cost).
	ctlPromptTokens
)

// control is one event for a request's owner.
type control struct {
	kind    controlKind
	a       *attempt
	failure upstream.Failure
	reason  failover.EndReason
	err     *openai.Error
	tokens  int
}

// inbox is a request's mailbox for control events. Posting never blocks and never loses
// an event: senders (the heartbeat loop, the admin endpoint, fence timers, Drain) must not
// wait on a request whose owner may be busy writing to a slow client. The owner takes
// everything posted when ready fires.
type inbox struct {
	mu    sync.Mutex
	queue []control
	ready chan struct{} // one slot: "something was posted"
}

func newInbox() *inbox { return &inbox{ready: make(chan struct{}, 1)} }

func (ib *inbox) post(c control) {
	ib.mu.Lock()
	ib.queue = append(ib.queue, c)
	ib.mu.Unlock()
	select {
	case ib.ready <- struct{}{}:
	default: // already signalled; the owner takes the whole queue
	}
}

// take appends everything posted so far to dst and empties the queue.
func (ib *inbox) take(dst []control) []control {
	ib.mu.Lock()
	dst = append(dst, ib.queue...)
	clear(ib.queue)
	ib.queue = ib.queue[:0]
	ib.mu.Unlock()
	return dst
}
