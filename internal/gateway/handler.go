package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/fencegate/fencegate/internal/balance"
	"github.com/fencegate/fencegate/internal/limits"
	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/request"
	"github.com/fencegate/fencegate/internal/store"
)

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	s.serveCompletion(w, r, openai.Chat)
}

func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	s.serveCompletion(w, r, openai.Completions)
}

func (s *Server) handleMessages(w http.ResponseWriter, r *http.Request) {
	s.serveCompletion(w, r, openai.Messages)
}

func (s *Server) handleResponses(w http.ResponseWriter, r *http.Request) {
	s.serveCompletion(w, r, openai.Responses)
}

func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request) {
	s.serveCompletion(w, r, openai.Embeddings)
}

// serveCompletion serves every API that runs on a replica (chat and text completions,
// Messages, Responses, embeddings): it validates the request, registers it in the journal (claiming its
// Idempotency-Key, if any), then owns it until its last byte (request.Run.Serve).
func (s *Server) serveCompletion(w http.ResponseWriter, r *http.Request, ep openai.Endpoint) {
	l := s.current() // the request keeps this configuration to its end, whatever a reload does
	// The body is read and parsed here, not under startCompletion's frame: the parse is
	// the deepest path of a request's intake (docs/performance.md, "Memory per idle stream").
	req, members, ok := readRequest(w, r, l.cfg, ep, l.promptPrefix)
	if !ok {
		return
	}
	rn, ticket, ok := s.startCompletion(w, r, ep, l, req, members)
	delivered := 0
	// The key's slot is freed and its output tokens counted when the request ends,
	// however it ends (a replay, a refusal, or the run's last byte).
	defer func() { ticket.Done(int64(delivered), s.now()) }()
	if !ok {
		return
	}
	defer s.unregister(rn)
	end := rn.Serve()
	delivered = end.Delivered
	noteEnd(r, end)
}

// startCompletion does what serveCompletion does before the request is served, once its
// body is read (req, members) under the configuration l: it answers the request itself
// (ok false) when it is refused, or returns its run, registered, and the key's ticket
// (nil when the key has no limits; set whenever it was taken, so that the caller gives it
// back). It is a function of its own so that its frame, the request's parameters and
// journal row, is gone before the run is served: a streaming request's goroutine then
// keeps a smaller stack for the whole stream (docs/performance.md).
//
//go:noinline
func (s *Server) startCompletion(w http.ResponseWriter, r *http.Request, ep openai.Endpoint, l *live, req *openai.Request, members openai.Members) (rn *request.Run, ticket *limits.Ticket, ok bool) {
	id := requestID(r)
	body := req.Body
	k, _ := identity(r)
	p := l.pools[req.Model]
	if p == nil || !k.mayUse(req.Model) {
		modelNotFound(w, r, req.Model)
		return nil, nil, false
	}
	tenant := k.ID
	if a := accessOf(r); a != nil {
		a.model, a.endpoint, a.tenant = req.Model, ep.String(), tenant
	}
	ticket, ok = s.admit(w, r, k, id)
	if !ok {
		return nil, nil, false
	}
	pinned := ""
	if req.PreviousResponseID != "" {
		var ok bool
		if pinned, ok = s.pinnedReplica(w, r, l, req, tenant, id); !ok {
			return nil, ticket, false
		}
	}
	now := s.now()
	if s.isDraining() {
		refuseDraining(w, r, id)
		return nil, ticket, false
	}
	params := request.Params{ID: id, Config: l.cfg, W: w, R: r, Req: req, Members: members, Start: now, Pinned: pinned,
		Traces: traceModeFor(l.cfg, k), Class: queueClass(k, r)}
	row := store.Request{
		ID: id, Tenant: tenant, Model: req.Model, Stream: req.Stream, Phase: store.PhaseRouting,
		Owner: s.gatewayID, OwnerLeaseUntil: now.Add(s.boot.Idempotency.OwnerLease.D()),
		CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(l.cfg.Idempotency.Retention.D()),
	}
	if key := field(r.Header, "Idempotency-Key"); key != "" {
		if !s.claim(w, r, &params, &row, key, body, now) {
			return nil, ticket, false
		}
	} else {
		s.journal.Submit(store.CreateRequest{Request: row})
	}
	p.onRequest(now)
	// req.Prompt holds the prompt's first l.promptPrefix bytes, at least the pool's
	// affinityBytes, unless a reload raised them since l was read: that request goes
	// without affinity.
	params.Affinity = balance.AffinityKey(req.Prompt, p.affinityPrefix())
	params.Blocks = promptBlocks(req.Endpoint, params.Members, p.promptBlockLimit())
	rn = request.New(s.services, p.requests, params)
	if !s.register(rn) {
		// Drained between the check above and now: the claim (if any) stays with this
		// gateway's lease, which lapses, and another gateway may take it over.
		refuseDraining(w, r, id)
		return nil, ticket, false
	}
	return rn, ticket, true
}

// pinnedReplica finds the replica that holds the response a Responses request continues
// (previous_response_id): the journal records which replica produced each response the
// gateway delivered. A response of another API key is answered as unknown, so that no key
// can continue another's conversation. A response the journal does not know (it was made
// elsewhere, or its record expired) pins nothing: the engine that gets the request answers
// whether it has it. It reports false when it has answered the request itself.
func (s *Server) pinnedReplica(w http.ResponseWriter, r *http.Request, l *live, req *openai.Request, tenant, id string) (string, bool) {
	ctx, cancel := context.WithTimeout(r.Context(), boundaryWriteTimeout)
	prev, err := s.store.FindByResponseID(ctx, req.PreviousResponseID)
	cancel()
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "", true
	case err != nil:
		s.log.Warn("previous response not looked up; routing without it", "request_id", id, "previous_response_id", req.PreviousResponseID, "err", err)
		return "", true
	case s.authRequired(l) && prev.Tenant != tenant:
		writeError(w, r, &openai.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "previous_response_not_found",
			Param: "previous_response_id", RequestID: id,
			Message: fmt.Sprintf("Previous response with id '%s' not found.", req.PreviousResponseID)})
		return "", false
	}
	return prev.ResponseReplica, true
}
