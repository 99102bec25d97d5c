package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/store"
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// handleModels lists the pools as OpenAI models.
func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	out := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	k, _ := identity(r)
	for _, n := range s.current().models {
		if !k.mayUse(n) {
			continue // to a key limited to other models, this one does not exist
		}
		out.Data = append(out.Data, model{ID: n, Object: "model", Created: 0, OwnedBy: "fencegate"})
	}
	writeJSON(w, http.StatusOK, out)
}

// maxWait bounds the long poll of GET /v1/requests/{id}?wait=DURATION.
const maxWait = 60 * time.Second

// waitParam reads the ?wait=DURATION of a long poll, capped at most, and moves the write
// deadline past it, since the answer comes after the wait. A value that is not a duration
// is answered 400 (ok false).
func (s *Server) waitParam(w http.ResponseWriter, r *http.Request, most time.Duration) (wait time.Duration, ok bool) {
	v := r.URL.Query().Get("wait")
	if v == "" {
		return 0, true
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		writeError(w, r, &openai.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_value", Param: "wait",
			Message: "wait must be a duration such as 5s", RequestID: requestID(r)})
		return 0, false
	}
	wait = min(d, most)
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + s.config().Policy.ClientWriteTimeout.D()))
	return wait, true
}

// handleGetRequest answers "what happened to my request?". Only the key that made the
// request, or an admin key, may read it; others get 404 so ids cannot be probed. With
// ?wait=DURATION it waits (at most 60s) until the request is done before answering.
func (s *Server) handleGetRequest(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	wait, valid := s.waitParam(w, r, maxWait)
	if !valid {
		return
	}
	rec, err := s.waitRecord(r.Context(), id, wait)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		if r.Context().Err() != nil {
			return
		}
		s.writeStoreUnavailable(w, r, "the request journal is unavailable: "+err.Error(), requestID(r))
		return
	}
	ok := err == nil
	if ok && s.authRequired(s.current()) {
		k, _ := identity(r)
		ok = k.Admin || k.ID == rec.Tenant
	}
	if !ok {
		openai.WriteError(w, &openai.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "request_not_found", Param: "id",
			Message: "no request with id " + id + " is known", RequestID: requestID(r)})
		return
	}
	writeJSON(w, http.StatusOK, viewOf(rec))
}

// waitPoll is how often a long poll re-reads the store, which other gateways also write;
// journalLag bounds how long a new request may take to reach it (a few journal batches).
const (
	waitPoll   = 50 * time.Millisecond
	journalLag = 200 * time.Millisecond
)

// waitRecord reads request id from the store; with wait > 0 it re-reads until the request
// is done or wait has passed (a request just accepted may not be journaled yet).
func (s *Server) waitRecord(ctx context.Context, id string, wait time.Duration) (*store.Request, error) {
	start := time.Now()
	deadline := start.Add(wait)
	t := time.NewTicker(waitPoll)
	defer t.Stop()
	for {
		rec, err := s.store.Get(ctx, id)
		now := time.Now()
		// A request this gateway has just accepted may still be in the journal's batch: a
		// miss is re-read for a moment even without ?wait.
		missing := errors.Is(err, store.ErrNotFound) && now.Before(start.Add(journalLag))
		if !missing && ((err == nil && rec.Phase == store.PhaseDone) || (err != nil && !errors.Is(err, store.ErrNotFound)) || !now.Before(deadline)) {
			return rec, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// handleReadyz answers whether this gateway should be sent requests: it is ready once its
// configuration is loaded (it is, or the gateway would not serve) and until it drains. A
// model without an available replica does not make it unready: taking the gateway out of
// a Service would refuse every other model's clients, and that model's own clients get an
// honest 503 no_healthy_replica with Retry-After instead of a refused connection. The body
// says how many replicas of each model are available (also the metric
// fencegate_model_available_replicas); to an admin, and on the admin listener, it also
// lists each replica's state, the reason it is out, load, fingerprint and canary. The store
// does not make it unready either (unkeyed requests are served without it): the body says
// whether it answers (also fencegate_store_connected), and to an admin since when and why
// not.
func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	s.writeReadyz(w, maySeeDetail(r))
}

func (s *Server) writeReadyz(w http.ResponseWriter, detail bool) {
	type modelStatus struct {
		Model     string          `json:"model"`
		Available int             `json:"available"`
		Replicas  []replicaStatus `json:"replicas,omitempty"`
	}
	now := s.now()
	l := s.current()
	models := []modelStatus{}
	for _, n := range l.models {
		list, avail := l.pools[n].status(now)
		m := modelStatus{Model: n, Available: avail}
		if detail {
			m.Replicas = list
		}
		models = append(models, m)
	}
	draining := s.isDraining()
	status := http.StatusOK
	if draining {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, map[string]any{"ready": !draining, "draining": draining, "models": models, "store": s.storeStatus(detail)})
}

// notFound answers a path no route took: 405 for a known path asked with another method,
// 404 otherwise. known are the paths this handler serves.
func (s *Server) notFound(known []string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		status, code, msg := http.StatusNotFound, "unknown_url", "Unknown request URL: "+r.Method+" "+r.URL.Path+"."
		if slices.Contains(known, r.URL.Path) {
			status, code, msg = http.StatusMethodNotAllowed, "method_not_allowed", "Method "+r.Method+" is not allowed on "+r.URL.Path+"."
		}
		writeError(w, r, &openai.Error{Status: status, Type: "invalid_request_error", Code: code, Message: msg, RequestID: requestID(r)})
	}
}
