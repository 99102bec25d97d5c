package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/fencegate/fencegate/internal/balance"
	"github.com/fencegate/fencegate/internal/failover"
	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/store"
	"github.com/fencegate/fencegate/internal/upstream"
)

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	s.serveCompletion(w, r, openai.Chat)
}

func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	s.serveCompletion(w, r, openai.Completions)
}

// serveCompletion validates the request, registers it in the journal (claiming its
// Idempotency-Key, if any), then runs its failover machine to the end.
func (s *Server) serveCompletion(w http.ResponseWriter, r *http.Request, ep openai.Endpoint) {
	id := requestID(r)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.Limits.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			openai.WriteError(w, &openai.Error{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
				Message: fmt.Sprintf("request body exceeds the limit of %d bytes", s.cfg.Limits.MaxBodyBytes), RequestID: id})
			return
		}
		openai.WriteError(w, &openai.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "body_read_failed",
			Message: "could not read the request body: " + err.Error(), RequestID: id})
		return
	}
	req, perr := openai.ParseRequest(ep, body)
	if perr != nil {
		perr.RequestID = id
		openai.WriteError(w, perr)
		return
	}
	p := s.pools[req.Model]
	if p == nil {
		openai.WriteError(w, &openai.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "model_not_found", Param: "model",
			Message: fmt.Sprintf("The model `%s` does not exist or is not served by this gateway.", req.Model), RequestID: id})
		return
	}
	tenant := ""
	if k, ok := identity(r); ok {
		tenant = k.ID
	}
	now := s.now()
	if s.isDraining() {
		refuseDraining(w, id)
		return
	}
	rn := &run{s: s, w: w, rc: http.NewResponseController(w), r: r, req: req, pool: p, id: id, model: req.Model, start: now}
	row := store.Request{
		ID: id, Tenant: tenant, Model: req.Model, Stream: req.Stream, Phase: store.PhaseRouting,
		Owner: s.gatewayID, OwnerLeaseUntil: now.Add(s.cfg.Idempotency.OwnerLease.D()),
		CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(s.cfg.Idempotency.Retention.D()),
	}
	if key := r.Header.Get("Idempotency-Key"); key != "" {
		if !s.claim(w, r, rn, &row, key, body, now) {
			return
		}
	} else {
		s.journal.Submit(store.CreateRequest{Request: row})
	}
	rn.trace(now, "input", body)
	p.onRequest(now)
	rn.affinity = balance.AffinityKey(req.Prompt, p.affinityBytes)
	cfg := s.cfg.Policy
	firstToken, idle := cfg.FirstTokenTimeout.D(), cfg.IdleTimeout.D()
	if !req.Stream {
		firstToken, idle = cfg.NonStreamTimeout.D(), cfg.NonStreamTimeout.D()
	}
	rn.m = failover.New(failover.Config{
		RequestID: rn.id, Model: req.Model, Stream: req.Stream, MaxAttempts: cfg.MaxAttempts,
		FirstTokenTimeout: firstToken, IdleTimeout: idle,
		Keepalive: keepaliveFor(req.Stream, cfg.Keepalive.D()), Budget: p,
		RerunTokenLimit: s.rerunTokenLimit(), PromptTokens: estimateTokens(req),
	})
	if !s.register(rn) {
		// Drained between the check above and now: the claim (if any) stays with this
		// gateway's lease, which lapses, and another gateway may take it over.
		refuseDraining(w, id)
		return
	}
	defer s.unregister(rn)
	rn.serve()
}

func keepaliveFor(stream bool, d time.Duration) time.Duration {
	if !stream {
		return 0
	}
	return d
}

// serve runs attempts until the machine reaches its terminal action.
func (rn *run) serve() {
	rn.wake = sync.NewCond(&rn.mu)
	// The client leaving is noticed even while no attempt is being read (an uncertain
	// attempt being fenced).
	stop := context.AfterFunc(rn.r.Context(), func() {
		rn.mu.Lock()
		defer rn.mu.Unlock()
		if !rn.m.Done() {
			rn.step(failover.Event{Kind: failover.EvClientGone})
		}
	})
	defer stop()
	rn.mu.Lock()
	rn.step(failover.Event{Kind: failover.EvStart})
	for {
		rn.flush()
		rn.checkClient()
		if rn.m.Done() {
			break
		}
		a := rn.cur
		if a.ended {
			// Fenced and waiting for proof that it stopped: EvFenced starts the rerun.
			rn.wake.Wait()
			continue
		}
		rn.mu.Unlock()
		rn.runAttempt(a)
		rn.mu.Lock()
		if rn.live(a) {
			// The attempt returned without the machine deciding anything; end it.
			rn.failAttempt(a, upstream.Failure{Class: failover.Dead, Reason: "attempt_ended"}, nil)
		}
	}
	if rn.timer != nil {
		rn.timer.Stop()
	}
	rn.mu.Unlock()
}
