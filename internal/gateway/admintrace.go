package gateway

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/request"
	"github.com/fencegate/fencegate/internal/store"
)

// maxTraceWait bounds the wait of GET /admin/requests/{id}/trace?wait=DURATION.
const maxTraceWait = 30 * time.Second

// handleRequestTrace answers GET /admin/requests/{id}/trace with the request's trace
// document, as one JSON object (docs/design.md §7, Traces). An unknown id is 404
// request_not_found; a request without a trace (its mode kept none, or it is still
// running) is 404 trace_not_found. With ?wait=DURATION (at most 30s) a request still
// running is waited for first.
func (s *Server) handleRequestTrace(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	wait, ok := s.waitParam(w, r, maxTraceWait)
	if !ok {
		return
	}
	rec, doc, err := s.requestTrace(r.Context(), id, wait)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, r, &openai.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "request_not_found", Param: "id",
			Message: "no request with id " + id + " is known", RequestID: requestID(r)})
	case err != nil:
		if r.Context().Err() != nil {
			return
		}
		s.writeStoreUnavailable(w, r, "the request journal is unavailable: "+err.Error(), requestID(r))
	case doc == nil:
		msg := "request " + id + " kept no trace (traces.mode, or the key's traces, kept none for it)"
		if rec.Phase != store.PhaseDone {
			msg = "request " + id + " is still running; its trace is written when it ends (add ?wait=30s)"
		}
		writeError(w, r, &openai.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "trace_not_found", Param: "id",
			Message: msg, RequestID: requestID(r)})
	default:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write(doc)
	}
}

// requestTrace reads request id and its trace document (nil when it has none). With wait
// above 0 it first waits for the request to end: on the run itself when this gateway runs
// it (then the journal is flushed, so the store holds the outcome and the trace); else,
// after flushing this gateway's journal (the request may have just ended here), by reading
// the store until it says done — another gateway may own it.
func (s *Server) requestTrace(ctx context.Context, id string, wait time.Duration) (*store.Request, []byte, error) {
	if wait > 0 {
		if rn := s.activeRun(id); rn != nil {
			t := time.NewTimer(wait)
			select {
			case <-rn.Done():
				if err := s.journal.Flush(ctx); err != nil {
					return nil, nil, err
				}
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, nil, ctx.Err()
			}
			t.Stop()
			wait = 0
		} else if err := s.journal.Flush(ctx); err != nil {
			// A request this gateway just finished may still be in its journal's batch.
			return nil, nil, err
		}
	}
	rec, err := s.waitRecord(ctx, id, wait)
	if err != nil {
		return nil, nil, err
	}
	events, err := s.store.Traces(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	var doc []byte
	for _, ev := range events { // ordered by seq: the last owner's document wins
		if ev.Kind == request.TraceDocumentKind {
			doc = ev.Payload
		}
	}
	return rec, doc, nil
}

// activeRun returns the request id this gateway is running, or nil.
func (s *Server) activeRun(id string) *request.Run {
	s.activeMu.Lock()
	defer s.activeMu.Unlock()
	for rn := range s.active {
		if rn.ID() == id {
			return rn
		}
	}
	return nil
}
