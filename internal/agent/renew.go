package agent

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/fencegate/fencegate/internal/lease"
)

// serveRenew handles POST /fencegate/v1/renew. It takes the agent's lock only
// to update the table, and reports the engine's load from the last background
// scrape, so it is answered at once however busy the engine is: it is the
// gateway's heartbeat, and a heartbeat that waits on the engine would make a
// busy replica look dead.
func (a *Agent) serveRenew(w http.ResponseWriter, r *http.Request) {
	var req RenewRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxControlBody)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_body", "decoding the renewal: "+err.Error())
		return
	}
	ttl := time.Duration(req.TTLms) * time.Millisecond
	if ttl <= 0 || ttl > lease.MaxTTL {
		writeError(w, http.StatusBadRequest, "invalid_lease", "ttl_ms must be in 1.."+lease.MaxTTL.String())
		return
	}
	a.metrics.renewals.Inc()
	now := a.cfg.Now()
	results := make([]RenewResult, len(req.Leases))
	a.mu.Lock()
	for i, l := range req.Leases {
		results[i] = RenewResult{Attempt: l.Attempt, Status: a.table.Renew(l.Attempt, l.Epoch, ttl, now)}
	}
	a.mu.Unlock()
	load, fingerprint := a.engineState()
	writeJSON(w, http.StatusOK, RenewReply{
		AgentTimeMs: now.UnixMilli(),
		Results:     results,
		Engine:      load,
		Fingerprint: fingerprint,
	})
}
