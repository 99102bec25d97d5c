package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/request"
	"github.com/fencegate/fencegate/internal/store"
)

// maxIdempotencyKey bounds the Idempotency-Key header.
const maxIdempotencyKey = 255

// boundaryWriteTimeout bounds the handler's synchronous journal calls (a claim, the lookup
// of a previous response), as request.SyncWriteTimeout bounds the request's own.
const boundaryWriteTimeout = request.SyncWriteTimeout

// claim registers a keyed request (docs/design.md §2): the same key and body is the same logical
// request. It returns true when the request should run (a new request, or one this gateway
// takes over from a gateway that died before the delivery boundary), with rp keyed and
// naming the logical request; otherwise it has answered.
func (s *Server) claim(w http.ResponseWriter, r *http.Request, rp *request.Params, row *store.Request, key string, body []byte, now time.Time) bool {
	id := rp.ID
	if len(key) > maxIdempotencyKey {
		writeError(w, r, &openai.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_idempotency_key",
			Message: "Idempotency-Key must be at most 255 characters", RequestID: id})
		return false
	}
	row.IdempotencyKey = key
	row.BodyHash = store.HashBody(body)
	ctx, cancel := context.WithTimeout(r.Context(), boundaryWriteTimeout)
	res, err := s.store.Claim(ctx, store.Claim{Request: *row, Now: now})
	cancel()
	if err != nil {
		if !notConnected(err) { // the store's own retries report that it was never reached
			s.log.Error("idempotency claim failed", "request_id", id, "err", err)
		}
		s.writeStoreUnavailable(w, r, "the request journal is unavailable, so an Idempotency-Key cannot be honoured; nothing was started", id)
		return false
	}
	prev := res.Request
	if prev != nil && prev.ID != id {
		// The key names an existing logical request: answer under its id.
		w.Header().Set("X-Request-Id", prev.ID)
	}
	switch res.Status {
	case store.ClaimNew:
		rp.Keyed = true
		return true
	case store.ClaimTakeover:
		rp.Keyed = true
		rp.ID = prev.ID
		rp.AttemptBase = prev.NextAttemptN() - 1
		s.log.Info("took over a request whose gateway died before the delivery boundary", "request_id", prev.ID, "previous_owner", prev.Owner)
		return true
	case store.ClaimInUse:
		writeError(w, r, &openai.Error{Status: http.StatusConflict, Type: "invalid_request_error", Code: "idempotency_key_in_use",
			Message: "a request with this Idempotency-Key is still in progress; retry after it finishes", RequestID: prev.ID})
	case store.ClaimMismatch:
		writeError(w, r, &openai.Error{Status: http.StatusUnprocessableEntity, Type: "invalid_request_error", Code: "idempotency_key_reused",
			Message: "this Idempotency-Key was used with a different request body", RequestID: prev.ID})
	case store.ClaimReplay:
		replay(w, r, prev)
	case store.ClaimInterrupted:
		w.Header().Set("Idempotent-Replayed", "true")
		writeError(w, r, interruptionOf(prev))
	}
	return false
}

// replay answers with the stored outcome of a finished keyed request.
func replay(w http.ResponseWriter, r *http.Request, prev *store.Request) {
	w.Header().Set("Idempotent-Replayed", "true")
	if len(prev.Response) > 0 && prev.ResponseStatus == http.StatusOK {
		ct := "application/json"
		if prev.ResponseIsSSE {
			ct = "text/event-stream"
		}
		w.Header().Set("Content-Type", ct)
		w.Header().Set("Content-Length", strconv.Itoa(len(prev.Response)))
		w.WriteHeader(http.StatusOK)
		w.Write(prev.Response)
		return
	}
	e := errorOf(prev.Error)
	switch {
	case e != nil:
	case prev.Outcome == store.OutcomeCancelled, prev.Outcome == store.OutcomeClientStalled:
		e = &openai.Error{Status: http.StatusConflict, Type: "invalid_request_error", Code: "idempotency_key_cancelled",
			Message: "the request with this Idempotency-Key was cancelled when its client went away (" + string(prev.Outcome) + "); send it again with a new Idempotency-Key"}
	default:
		e = &openai.Error{Status: http.StatusConflict, Type: "invalid_request_error", Code: "replay_unavailable",
			Message: "this request finished (" + string(prev.Outcome) + ") but its response was too large to keep for replay; send it again with a new Idempotency-Key"}
	}
	if prev.ResponseStatus >= 400 {
		e.Status = prev.ResponseStatus
	}
	e.RequestID = prev.ID
	writeError(w, r, e)
}

// interruptionOf is the error of a request that was interrupted after its delivery
// boundary, as the client first saw it or, when its gateway died, as it would have.
func interruptionOf(prev *store.Request) *openai.Error {
	if e := errorOf(prev.Error); e != nil && e.Code == "upstream_decode_interrupted" {
		e.Status = http.StatusBadGateway
		return e
	}
	partial, retry := true, false
	delivered := int(prev.DeliveredOutputTokens)
	return &openai.Error{Status: http.StatusBadGateway, Type: "upstream_error", Code: "upstream_decode_interrupted",
		Message:   "generation interrupted after part of the answer was sent (the gateway that served it stopped)",
		RequestID: prev.ID, PartialOutput: &partial, DeliveredOutputTokens: &delivered, Retryable: &retry}
}

func errorOf(b []byte) *openai.Error {
	if len(b) == 0 {
		return nil
	}
	var e openai.Error
	if json.Unmarshal(b, &e) != nil || e.Code == "" {
		return nil
	}
	return &e
}
