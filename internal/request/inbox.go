package request

import (
	"net/http"
	"sync"
	"time"

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
	// ctlShutdown: the gateway shuts down and ends the request (Drain).
	ctlShutdown
	// ctlPromptTokens: an engine counted the prompt's tokens (the rerun cost).
	ctlPromptTokens
	// ctlQueue: the pool decided the wait of the queued attempt (Pool.Unqueue says how).
	ctlQueue
)

// control is one event for a request's owner.
type control struct {
	kind    controlKind
	a       *Attempt
	failure upstream.Failure   // ctlAttemptFailed
	reason  failover.EndReason // ctlFenced
	tokens  int                // ctlPromptTokens
	cut     time.Time          // ctlShutdown: the client's last write deadline
}

// inbox is a request's mailbox for control events. Posting never blocks and never loses
// an event while the owner runs: senders (the heartbeat loop, the admin endpoint, fence
// timers, Drain) must not wait on a request whose owner may be busy writing to a slow
// client. The owner takes everything posted when ready fires.
//
// The inbox is also the only way in from outside while the request's handler runs, and no
// way in after: the owner closes it before the handler returns, and what is posted then is
// dropped. A shutdown caps the client's write deadline (expire) under the inbox's lock, so
// that a write blocked on a client that reads nothing fails in time; net/http forbids
// touching a response writer once its handler has returned (under HTTP/2 it is gone), and
// the lock and the close keep the cap within the handler's life.
type inbox struct {
	mu     sync.Mutex
	queue  []control
	closed bool
	ready  chan struct{} // one slot: "something was posted"
	// cw is the request's client writer, whose write deadline a shutdown caps (expire).
	cw *clientWriter
	// wake, when set, wakes the owner where it may wait other than on ready: on the
	// engine's socket (Run.wakeOwner).
	wake func()
}

func newInbox(cw *clientWriter) *inbox {
	return &inbox{ready: make(chan struct{}, 1), cw: cw}
}

// post queues c for the owner; it reports false when the owner has finished.
func (ib *inbox) post(c control) bool {
	ib.mu.Lock()
	if ib.closed {
		ib.mu.Unlock()
		return false
	}
	ib.queue = append(ib.queue, c)
	if c.kind == ctlShutdown {
		ib.cw.expire(c.cut)
	}
	ib.mu.Unlock()
	select {
	case ib.ready <- struct{}{}:
	default: // already signalled; the owner takes the whole queue
	}
	if ib.wake != nil {
		ib.wake()
	}
	return true
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

// close ends the inbox: nothing posted from now on reaches the request. The owner calls it
// when its loop has ended, before the handler returns.
func (ib *inbox) close() {
	ib.mu.Lock()
	ib.closed = true
	clear(ib.queue)
	ib.queue = nil
	ib.mu.Unlock()
}

// Shutdown ends the request with gateway_shutdown, its attempt cancelled (Drain, once the
// drain grace is over), and makes its client writes fail at cut, so that the final error
// event reaches a client that reads by then and one that does not is cut off. It posts to
// the request's inbox and never waits for the owner; a request that has ended ignores it.
// Safe from any goroutine.
func (rn *Run) Shutdown(cut time.Time) {
	rn.inbox.post(control{kind: ctlShutdown, cut: cut})
}

// shutdownError is what the client of a request ended by Shutdown is told.
func shutdownError() *openai.Error {
	return &openai.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: string(failover.EndGatewayShutdown),
		Message: "the gateway is shutting down and ended this request; retry it on another gateway"}
}

// ReplicaLost tells the attempt's owner that its replica is gone (an operator declared it
// dead, or its agent missed its heartbeat): the attempt fails with class and reason as soon
// as the owner reads its inbox, and the request is rerun if the policy allows. It never
// waits for the owner, and is dropped once the request has ended. Safe from any goroutine.
func (a *Attempt) ReplicaLost(class failover.FailureClass, reason failover.EndReason) {
	a.box.post(control{kind: ctlAttemptFailed, a: a, failure: upstream.Failure{Class: class, Reason: reason}})
}

// QueueDecided tells the attempt's owner that its wait in the pool's queue ended (a slot
// was granted to it, or it was shed or expired); the owner asks the pool how
// (Pool.Unqueue). It never waits for the owner, and reports false once the request has
// ended, when nothing will take the grant. Safe from any goroutine.
func (a *Attempt) QueueDecided() bool {
	return a.box.post(control{kind: ctlQueue, a: a})
}
