package agent

import (
	"context"
	"errors"
	"net/http"

	"github.com/fencegate/fencegate/internal/lease"
	"github.com/fencegate/fencegate/internal/upstream"
)

// serveData handles the data paths (chat, completions, Messages, Responses,
// embeddings): fenced when the request carries a lease header, otherwise
// proxied unfenced.
func (a *Agent) serveData(w http.ResponseWriter, r *http.Request) {
	leaseHeader := r.Header.Get(HeaderLease)
	if leaseHeader == "" {
		a.metrics.unfenced.Inc()
		a.proxy.ServeHTTP(w, r)
		return
	}
	a.metrics.fenced.Inc()
	// The lease runs from receipt: take the time before anything else, so
	// the agent's expiry is never later than the gateway's bound on it.
	received := a.cfg.Now()
	id := r.Header.Get(HeaderAttempt)
	if id == "" {
		writeError(w, http.StatusBadRequest, "missing_attempt_id", "a request with "+HeaderLease+" must carry "+HeaderAttempt)
		return
	}
	epoch, ttl, err := lease.ParseHeader(leaseHeader)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_lease", err.Error())
		return
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	at := &attempt{
		id:      id,
		epoch:   epoch,
		gateway: r.Header.Get(HeaderGateway),
		path:    r.URL.Path,
		started: received,
		ctx:     ctx,
		cancel:  cancel,
		rc:      http.NewResponseController(w),
		done:    make(chan struct{}),
	}
	superseded, err := a.register(at, ttl)
	switch {
	case errors.Is(err, lease.ErrStaleEpoch):
		a.metrics.staleEpochs.Inc()
		cancel(nil)
		writeError(w, http.StatusConflict, "stale_lease_epoch", err.Error())
		return
	case err != nil:
		cancel(nil)
		writeError(w, http.StatusServiceUnavailable, "agent_closing", "the agent is shutting down")
		return
	}
	a.metrics.granted.Inc()
	for _, old := range superseded {
		a.abort(old, errSuperseded)
	}

	reason := EndEngineError // if proxyAttempt panics
	defer func() { a.finish(at, at.reasonFor(reason)) }()
	var broken bool
	reason, broken = a.proxyAttempt(w, r, at)
	if broken {
		// Close the downstream connection without ending the response
		// cleanly: the gateway must see a broken stream, never a complete
		// one, when the agent stopped publishing. finish runs first.
		panic(http.ErrAbortHandler)
	}
}

// proxyAttempt forwards a fenced request to the engine and relays the
// response under the lease. It returns why the attempt ended and whether the
// downstream response must be broken off rather than ended.
func (a *Agent) proxyAttempt(w http.ResponseWriter, r *http.Request, at *attempt) (reason string, broken bool) {
	body, err := upstream.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody), r.ContentLength, maxRequestBody)
	if err != nil {
		if at.ctx.Err() != nil {
			return EndClientGone, true
		}
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusRequestEntityTooLarge, "request_too_large", err.Error())
		} else {
			writeError(w, http.StatusBadRequest, "invalid_request_body", "reading the request body: "+err.Error())
		}
		return EndBadRequest, false
	}
	if a.cfg.EngineKind == KindSGLang {
		if body, err = withRID(body, at.id); err != nil {
			writeError(w, http.StatusBadRequest, "invalid_request_body", err.Error())
			return EndBadRequest, false
		}
	}
	resp, err := a.callEngine(at.ctx, r, body)
	if err != nil {
		if at.ctx.Err() != nil {
			return EndClientGone, true
		}
		if !a.mayPublish(at) {
			return EndLeaseExpired, true
		}
		writeError(w, http.StatusBadGateway, "engine_unreachable", err.Error())
		return EndEngineError, false
	}
	// Close before finish: a response not read to its end closes its
	// connection here, so the engine sees the abandon before the attempt
	// is reported ended.
	defer resp.Close()
	at.engineStatus.Store(int32(resp.Status))
	if resp.Status == http.StatusOK && isEventStreamType(resp.Header.Get("Content-Type")) {
		return a.relayEvents(w, at, resp)
	}
	return a.relayWhole(w, at, resp)
}

// mayPublish checks at's lease now. When it is no longer valid the attempt is
// aborted (closing its engine connection) and mayPublish reports false: the
// caller must not write anything more.
func (a *Agent) mayPublish(at *attempt) bool {
	now := a.cfg.Now()
	a.mu.Lock()
	if a.table.ValidRef(at.lease, at.epoch, now) {
		a.mu.Unlock()
		return true
	}
	cause := a.invalidCauseLocked(at)
	a.mu.Unlock()
	a.abort(at, cause)
	return false
}
