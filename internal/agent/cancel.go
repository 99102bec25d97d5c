package agent

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/fencegate/fencegate/internal/lease"
)

// serveCancel handles POST /fencegate/v1/cancel: it revokes the lease, aborts
// the engine request, and acks only once that request has ended, so the ack
// is proof for the gateway that the attempt will publish nothing more.
func (a *Agent) serveCancel(w http.ResponseWriter, r *http.Request) {
	var req CancelRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxControlBody)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_body", "decoding the cancel: "+err.Error())
		return
	}
	if req.Attempt == "" || req.Epoch == 0 {
		writeError(w, http.StatusBadRequest, "invalid_request_body", "a cancel needs an attempt and a positive epoch")
		return
	}
	a.metrics.cancels.Inc()
	a.mu.Lock()
	status := a.table.Revoke(req.Attempt, req.Epoch)
	at := a.live[req.Attempt]
	endedInfo, hasEnded := a.ended[req.Attempt]
	// The cancel's epoch also fences older attempts of the same logical
	// request; stop them now rather than at their next event.
	superseded := a.supersededLocked(req.Attempt, req.Epoch)
	a.mu.Unlock()
	for _, old := range superseded {
		if old != at {
			a.abort(old, errSuperseded)
		}
	}

	reply := CancelReply{Acked: true, Attempt: req.Attempt}
	switch {
	case status == lease.StaleEpoch:
		reply.StaleEpoch = true
		writeJSON(w, http.StatusOK, reply)
		return
	case at == nil || status == lease.Ended:
		if hasEnded {
			reply.AlreadyEnded = true
			reply.EndedAtMs = endedInfo.EndedAt.UnixMilli()
		} else {
			reply.Unknown = true
		}
		writeJSON(w, http.StatusOK, reply)
		return
	}

	a.abort(at, errRevoked)
	wait := time.NewTimer(a.cfg.CancelWait)
	defer wait.Stop()
	select {
	case <-at.done:
	case <-wait.C:
		writeError(w, http.StatusGatewayTimeout, "cancel_timeout",
			"the engine request of "+req.Attempt+" has not ended within "+a.cfg.CancelWait.String())
		return
	case <-r.Context().Done():
		return // the gateway left; it will learn the outcome from the next renewal
	}
	a.mu.Lock()
	reply.EndedAtMs = at.endedAt.UnixMilli()
	a.mu.Unlock()
	writeJSON(w, http.StatusOK, reply)
}
