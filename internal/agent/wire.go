package agent

import (
	"time"

	"github.com/fencegate/fencegate/internal/lease"
)

// Header names of the lease protocol.
const (
	HeaderAttempt  = "X-Fencegate-Attempt"   // attempt id; also forwarded to the engine
	HeaderLease    = "X-Fencegate-Lease"     // "epoch=<uint64>;ttl_ms=<int>", see lease.FormatHeader
	HeaderGateway  = "X-Fencegate-Gateway"   // id of the gateway that holds the lease
	HeaderAgentKey = "X-Fencegate-Agent-Key" // the agent's secret, on every request when it has one
)

// Paths of the control endpoints.
const (
	PathRenew    = "/fencegate/v1/renew"
	PathCancel   = "/fencegate/v1/cancel"
	PathAttempts = "/fencegate/v1/attempts"
	// PathHealth is the agent's own probe of its engine, the one path that needs no
	// secret (see requireSecret).
	PathHealth = "/fencegate/v1/health"
	// PathMetrics is the agent's own Prometheus metrics (with the secret; the metrics
	// listener serves them without, at /metrics).
	PathMetrics = "/fencegate/v1/metrics"
)

// RenewRequest is the body of POST /fencegate/v1/renew.
type RenewRequest struct {
	Gateway string        `json:"gateway"`
	TTLms   int64         `json:"ttl_ms"`
	Leases  []lease.Lease `json:"leases"`
}

// RenewResult is the agent's answer for one lease of a renewal.
type RenewResult struct {
	Attempt string       `json:"attempt"`
	Status  lease.Status `json:"status"`
}

// RenewReply is the reply to a renewal: the lease statuses, in the order of
// the request, plus the heartbeat payload.
type RenewReply struct {
	// AgentTimeMs is the agent's clock when it applied the renewal (Unix ms).
	AgentTimeMs int64             `json:"agent_time_ms"`
	Results     []RenewResult     `json:"results"`
	Engine      EngineLoad        `json:"engine"`
	Fingerprint map[string]string `json:"fingerprint"`
}

// Statuses returns the results keyed by attempt id, the shape
// lease.Tracker.RenewalAcked takes.
func (r RenewReply) Statuses() map[string]lease.Status {
	m := make(map[string]lease.Status, len(r.Results))
	for _, res := range r.Results {
		m[res.Attempt] = res.Status
	}
	return m
}

// EngineLoad is the engine's load from the agent's latest background scrape
// of its /metrics.
type EngineLoad struct {
	// Up is true when the latest scrape got an answer (any status below
	// 500) from the engine.
	Up       bool    `json:"up"`
	Running  int     `json:"running"`  // vllm:num_requests_running or sglang:num_running_reqs
	Waiting  int     `json:"waiting"`  // vllm:num_requests_waiting or sglang:num_queue_reqs
	KVUsage  float64 `json:"kv_usage"` // vllm:kv_cache_usage_perc or sglang:token_usage, 0..1
	ScrapeMs int64   `json:"scraped_at_ms"`
	// Error says why the latest scrape failed or found no load metrics.
	Error string `json:"error,omitempty"`
}

// CancelRequest is the body of POST /fencegate/v1/cancel.
type CancelRequest struct {
	Attempt string `json:"attempt"`
	Epoch   uint64 `json:"epoch"`
}

// CancelReply is the 200 reply to a cancel. Acked is always true in it: a
// cancel that could not be completed gets an error status instead.
type CancelReply struct {
	Acked   bool   `json:"acked"`
	Attempt string `json:"attempt"`
	// EndedAtMs is when the attempt's engine request ended (agent clock, Unix
	// ms); 0 when Unknown.
	EndedAtMs int64 `json:"ended_at_ms,omitempty"`
	// Unknown: the agent holds no such attempt; its epoch is remembered, so
	// a data request for it arriving later is refused.
	Unknown bool `json:"unknown,omitempty"`
	// AlreadyEnded: the attempt had ended before the cancel arrived.
	AlreadyEnded bool `json:"already_ended,omitempty"`
	// StaleEpoch: the agent holds the attempt at a newer epoch, which the
	// cancel did not touch; the epoch named can never publish.
	StaleEpoch bool `json:"stale_epoch,omitempty"`
}

// Why an attempt ended, as in AttemptInfo.EndReason.
const (
	EndFinished     = "finished"      // the engine's response was forwarded completely
	EndLeaseExpired = "lease_expired" // the lease ran out; the engine request was aborted
	EndRevoked      = "revoked"       // a cancel revoked the lease; the engine request was aborted
	EndSuperseded   = "superseded"    // a newer epoch of the same logical request arrived
	EndEngineError  = "engine_error"  // the engine could not be reached or broke the response
	EndClientGone   = "client_gone"   // the gateway closed the connection
	EndBadRequest   = "bad_request"   // the request body could not be read
	EndAgentClosed  = "agent_closed"  // the agent shut down
)

// AttemptInfo describes one attempt the agent proxies or has proxied.
type AttemptInfo struct {
	Attempt   string    `json:"attempt"`
	Gateway   string    `json:"gateway,omitempty"`
	Epoch     uint64    `json:"epoch"`
	Path      string    `json:"path"`
	Started   time.Time `json:"started"`
	ExpiresAt time.Time `json:"expires_at"`
	// Revoked is true once a cancel revoked the lease or a newer epoch
	// superseded it.
	Revoked bool `json:"revoked"`
	Ended   bool `json:"ended"`
	// EndedAt is when the engine request ended and its connection was closed.
	EndedAt   time.Time `json:"ended_at,omitzero"`
	EndReason string    `json:"end_reason,omitempty"`
	// EngineStatus is the engine's HTTP status, 0 before it answered.
	EngineStatus int `json:"engine_status,omitempty"`
	// EventsForwarded counts SSE events (or whole responses) written to the
	// gateway; BytesForwarded their bytes.
	EventsForwarded int64 `json:"events_forwarded"`
	BytesForwarded  int64 `json:"bytes_forwarded"`
}

// AttemptList is the body of GET /fencegate/v1/attempts.
type AttemptList struct {
	Attempts []AttemptInfo `json:"attempts"`
}
