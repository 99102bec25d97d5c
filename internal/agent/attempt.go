package agent

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/fencegate/fencegate/internal/lease"
)

// Causes given to an attempt's context when the agent aborts it; reasonFor
// maps them to AttemptInfo.EndReason.
var (
	errLeaseExpired = errors.New("agent: lease expired")
	errRevoked      = errors.New("agent: lease revoked")
	errSuperseded   = errors.New("agent: lease superseded by a newer epoch")
	// errFinished ends the context of an attempt whose proxy is done, so
	// the engine connection is closed whatever the reason.
	errFinished = errors.New("agent: attempt finished")
)

// attempt is one fenced data request while its proxy runs.
type attempt struct {
	id      string
	epoch   uint64
	gateway string
	path    string
	started time.Time

	// ctx is the engine request's context; abort cancels it, which closes
	// the engine connection (see newEngineClient).
	ctx    context.Context
	cancel context.CancelCauseFunc
	// rc reaches the downstream connection, so an abort can also unblock a
	// write to a gateway that has stopped reading.
	rc *http.ResponseController

	done chan struct{} // closed once the proxy has finished and the engine connection is closed

	engineStatus atomic.Int32
	events       atomic.Int64
	bytes        atomic.Int64

	// Guarded by Agent.mu.
	lease     lease.Ref   // its lease in the table, checked before every batch of events
	timer     *time.Timer // fires at lease expiry
	finished  bool
	endedAt   time.Time
	endReason string
}

// reasonFor names why the attempt ended: the proxy's own reason, unless the
// agent aborted the attempt before the response was complete, in which case
// the abort's cause says why (the proxy only saw its engine connection close).
func (at *attempt) reasonFor(proxyReason string) string {
	if proxyReason == EndFinished {
		return EndFinished
	}
	switch context.Cause(at.ctx) {
	case errLeaseExpired:
		return EndLeaseExpired
	case errRevoked:
		return EndRevoked
	case errSuperseded:
		return EndSuperseded
	case errAgentClosed:
		return EndAgentClosed
	}
	return proxyReason
}
