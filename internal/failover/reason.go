package failover

import "strconv"

// EndReason is the short word that says why an attempt ended, or why a request could not
// go on: the journal's end_reason, the trace document's, the reruns metric's label. The
// machine, the shell that runs it and the pool that blames replicas all read and write
// these, so each is written once, here; the journal keeps the string as it is.
//
// The class of a failure (Dead, Uncertain, ...) decides what happens; the reason only says
// why, except where named below: the pool does not blame a replica for
// EndReplicaDeclaredDead or EndAgentUnreachable (both keep it out already), and an attempt
// that ends EndCompleted counts for its replica.
type EndReason string

// Ends the machine decides itself.
const (
	EndCompleted          EndReason = "completed"             // the answer was delivered whole
	EndClientGone         EndReason = "client_gone"           // the client closed the connection
	EndClientStalled      EndReason = "client_stalled"        // the client accepted no bytes for client_write_timeout
	EndMaxRequestDuration EndReason = "max_request_duration"  // the request ran past max_request_duration
	EndFirstTokenTimeout  EndReason = "first_token_timeout"   // nothing arrived within first_token_timeout
	EndIdleTimeout        EndReason = "idle_timeout"          // the stream was silent for idle_timeout
	EndEngineErrorEvent   EndReason = "engine_error_event"    // the engine sent an error event
	EndMalformedEvent     EndReason = "malformed_event"       // an event the gateway cannot read
	EndDoneBeforeFinish   EndReason = "done_before_finish"    // [DONE] before every choice finished
	EndClosedMidStream    EndReason = "closed_mid_stream"     // the stream ended before its end
	EndHeldTooLarge       EndReason = "held_events_too_large" // more preamble than max_held_bytes
)

// Why no replica took an attempt (EvNoReplica); the empty reason is "none is available".
const (
	// NoReplicaOverloaded says replicas exist but every one is at its load limit: the
	// client is told to come back later (429) rather than that the pool is down (503).
	NoReplicaOverloaded EndReason = "overloaded"
	// NoReplicaPinned says the request continues state that lives on one replica only (a
	// Responses previous_response_id), and that replica cannot serve it: running it
	// elsewhere would silently lose that state. It is also the client's error code.
	NoReplicaPinned EndReason = "previous_response_unavailable"
	// NoReplicaQueueFull says every replica is at its capacity and the pool's queue is full
	// (the request was refused, or shed for one of a higher class or a fairer share); it
	// is also the client's error code (429).
	NoReplicaQueueFull EndReason = "queue_full"
	// NoReplicaQueueTimeout says the request waited in the pool's queue for queue.max_wait
	// and no slot freed for it; also the client's error code (503).
	NoReplicaQueueTimeout EndReason = "queue_timeout"
)

// Ends the shell finds while it reads an attempt or runs the request.
const (
	EndEventTooLarge       EndReason = "event_too_large"        // one SSE event above the decoder's bound
	EndBodyTooLarge        EndReason = "body_too_large"         // a whole answer above the gateway's bound
	EndEngineUnauthorized  EndReason = "engine_unauthorized"    // the engine refused the gateway's credentials
	EndBadUpstreamURL      EndReason = "bad_upstream_url"       // the replica's URL makes no request
	EndRequestEnded        EndReason = "request_ended"          // still running when its request ended (a bug, logged)
	EndJournalUnavailable  EndReason = "journal_unavailable"    // a keyed request's journal write failed (also its error code)
	EndOwnershipLost       EndReason = "request_ownership_lost" // another gateway took the request over (also its error code)
	EndGatewayShutdown     EndReason = "gateway_shutdown"       // the gateway shut down (also its error code)
	EndReplicaDeclaredDead EndReason = "replica_declared_dead"  // an operator declared the replica dead
	EndAgentUnreachable    EndReason = "agent_unreachable"      // the replica's agent missed its heartbeat
)

// Why a fenced attempt is proven stopped (EvFenced).
const (
	FencedCancelAcked  EndReason = "cancel_acked"  // the agent acknowledged the cancel
	FencedLeaseExpired EndReason = "lease_expired" // the attempt's lease has certainly expired
)

// Ends the engine client classifies (internal/upstream, docs/design.md §3).
const (
	EndConnectionRefused  EndReason = "connection_refused"
	EndDNSFailed          EndReason = "dns_failed"
	EndDialTimeout        EndReason = "dial_timeout"
	EndDialFailed         EndReason = "dial_failed"
	EndInvalidRequest     EndReason = "invalid_request"
	EndConnectionClosed   EndReason = "connection_closed"
	EndConnectionReset    EndReason = "connection_reset"
	EndMalformedResponse  EndReason = "malformed_response"
	EndTCPTimeout         EndReason = "tcp_timeout"
	EndHostUnreachable    EndReason = "host_unreachable"
	EndNetworkUnreachable EndReason = "network_unreachable"
	EndTimeout            EndReason = "timeout"
	EndTransportError     EndReason = "transport_error"
)

// EndEngineStatus is the end of an attempt whose engine answered with a non-200 status:
// "engine_status_503".
func EndEngineStatus(status int) EndReason {
	return EndReason("engine_status_" + strconv.Itoa(status))
}
