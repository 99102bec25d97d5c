package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/fencegate/fencegate/internal/balance"
	"github.com/fencegate/fencegate/internal/failover"
	"github.com/fencegate/fencegate/internal/openai"
)

// declaredDeadFor is how long a replica declared dead stays out unless a probe finds it
// back first (an orchestrator restarted it) or an operator declares it active.
const declaredDeadFor = 24 * time.Hour

// handleReplicaState lets an orchestrator or operator declare a replica dead (its running
// attempts fail at once and are rerun if nothing was delivered), draining (no new work,
// running streams finish) or active again.
//
//	POST /admin/replicas/{model}/{replica}   {"state":"dead|draining|active","reason":"..."}
func (s *Server) handleReplicaState(w http.ResponseWriter, r *http.Request) {
	var body struct {
		State  string `json:"state"`
		Reason string `json:"reason"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		openai.WriteError(w, &openai.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_json",
			Message: "body must be {\"state\":\"dead|draining|active\",\"reason\":\"...\"}: " + err.Error(), RequestID: requestID(r)})
		return
	}
	p := s.current().pools[r.PathValue("model")]
	name := r.PathValue("replica")
	if body.Reason == "" {
		body.Reason = "declared " + body.State + " by an operator"
	}
	now := s.now()
	var apply func(*balance.Replica)
	switch body.State {
	case "dead":
		apply = func(rep *balance.Replica) { p.b.MarkDead(rep, now, declaredDeadFor, body.Reason) }
	case "draining":
		apply = func(rep *balance.Replica) { p.b.SetDraining(rep, true, body.Reason) }
	case "active":
		apply = func(rep *balance.Replica) { p.b.SetDraining(rep, false, ""); p.b.Readmit(rep, now) }
	default:
		openai.WriteError(w, &openai.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "invalid_value", Param: "state",
			Message: "state must be dead, draining or active", RequestID: requestID(r)})
		return
	}
	if p == nil || !p.with(name, apply) {
		openai.WriteError(w, &openai.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "replica_not_found",
			Message: "no replica " + name + " in model " + r.PathValue("model"), RequestID: requestID(r)})
		return
	}
	failed := 0
	if body.State == "dead" {
		// Each running attempt's owner fails it (and reruns the request if nothing was
		// delivered) as soon as it reads its inbox; nothing here waits for it.
		for _, a := range p.attemptsOn(name) {
			a.ReplicaLost(failover.Dead, failover.EndReplicaDeclaredDead)
			failed++
		}
	}
	s.log.Info("replica state set", "model", r.PathValue("model"), "replica", name, "state", body.State, "reason", body.Reason, "attempts_failed", failed)
	writeJSON(w, http.StatusOK, map[string]any{"model": r.PathValue("model"), "replica": name, "state": body.State, "attempts_failed": failed})
}

// handleRefresh probes and scrapes every replica now instead of at the next period, e.g.
// right after an orchestrator replaced replicas. It answers with /readyz's body, in full.
//
//	POST /admin/refresh
func (s *Server) handleRefresh(w http.ResponseWriter, r *http.Request) {
	for _, p := range s.current().pools {
		s.scrapePool(r.Context(), p)
		s.probePool(r.Context(), p)
	}
	s.writeReadyz(w, true)
}
