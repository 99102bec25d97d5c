package openai

import "net/http"

// shouldRetry says, per error code, whether a client may send the same request again as it
// is: the header x-should-retry that the official OpenAI and Anthropic SDKs obey over their
// own policy (they resend 408, 409, 429 and every 5xx, twice by default). The table is
// docs/errors.md's x-should-retry column; a test reads that column, so the two cannot
// part. An error whose body says retryable answers with that instead (the failover
// machine decides it per request: a code that is safe to resend before any output is not
// once an engine may have run one of the request's tools). A code missing here answers
// false: a client library must not resend what the gateway did not vouch for.
var shouldRetry = map[string]bool{
	// The answer (docs/design.md §2, §3).
	"upstream_decode_interrupted":    false,
	"upstream_failed_after_tool_use": false,
	"upstream_unresponsive":          true,
	"upstream_protocol_error":        true,
	"upstream_unavailable":           true,
	"previous_response_unavailable":  false,
	"request_timeout":                false,
	"engine_overloaded":              true,
	"rate_limit_exceeded":            true,
	"no_healthy_replica":             true,
	"pool_overloaded":                true,
	"queue_full":                     true,
	"queue_timeout":                  true,
	"retry_budget_exhausted":         true,
	"rerun_too_expensive":            true,
	"gateway_shutdown":               false,
	"gateway_shutting_down":          true,
	"journal_unavailable":            false,
	"request_ownership_lost":         false,
	"rejected_by_engine":             false,
	"engine_error":                   true,
	// The engine rejected the input (normalised codes, see NormalizeEngineError).
	"invalid_request":         false,
	"context_length_exceeded": false,
	"not_found":               false,
	"engine_unauthorized":     false,
	"engine_forbidden":        false,
	// Idempotency-Key.
	"idempotency_key_in_use":    true,
	"idempotency_key_reused":    false,
	"idempotency_key_cancelled": false,
	"replay_unavailable":        false,
	"invalid_idempotency_key":   false,
	// The request itself.
	"invalid_json":                false,
	"invalid_type":                false,
	"missing_required_parameter":  false,
	"invalid_value":               false,
	"unsupported_parameter":       false,
	"empty_array":                 false,
	"previous_response_not_found": false,
	"request_too_large":           false,
	"unsupported_media_type":      false,
	"body_read_timeout":           true,
	"body_read_failed":            false,
	"client_closed":               false,
	"model_not_found":             false,
	"invalid_api_key":             false,
	"admin_only":                  false,
	"admin_disabled":              false,
	"request_not_found":           false,
	"trace_not_found":             false,
	"replica_not_found":           false,
	"invalid_configuration":       false,
	"unknown_url":                 false,
	"method_not_allowed":          false,
	"internal_error":              false,
	// Limits per key.
	"concurrency_limit_exceeded": true,
	"limits_unavailable":         true,
}

// ShouldRetry is the x-should-retry of e: its retryable when it says one, else its code's
// entry in docs/errors.md, else false.
func ShouldRetry(e *Error) bool {
	if e.Retryable != nil {
		return *e.Retryable
	}
	return shouldRetry[e.Code]
}

// KnownCode reports whether code is one of the error codes docs/errors.md lists.
func KnownCode(code string) bool {
	_, ok := shouldRetry[code]
	return ok
}

// SetRetryHeader sets x-should-retry on an error answer, which the official SDKs obey
// over their own retry policy. Without "false" they would resend, as a new request, a
// whole answer that ended 502 after an engine-run tool acted, and the tool with it, though
// the gateway never reran it; "true" tells them that a 503 no_healthy_replica or a 429 may
// be sent again (after its Retry-After). A replayed answer (Idempotent-Replayed, set
// before) is always "false": sent again with its key it can only be replayed again, and
// its body's retryable speaks of a new request.
func SetRetryHeader(h http.Header, e *Error) {
	v := "false"
	if ShouldRetry(e) && h.Get("Idempotent-Replayed") != "true" {
		v = "true"
	}
	h.Set("X-Should-Retry", v)
}
