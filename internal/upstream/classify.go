package upstream

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/fencegate/fencegate/internal/failover"
)

// Failure is the classification of one upstream error.
type Failure struct {
	Class failover.FailureClass
	// Reason is a short word for the journal ("connection_refused", "connection_reset", ...).
	Reason string
	// Dial is true when no connection was made: the replica is not listening. It is always
	// safe to rerun and marks the replica dead for the cooldown.
	Dial bool
}

// ClassifyError classifies an error from sending the request or reading the response.
// Callers check first whether the client went away (its context), which is never an
// upstream failure.
func ClassifyError(err error) Failure {
	var opErr *net.OpError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return Failure{Class: failover.Dead, Reason: "connection_refused", Dial: true}
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return Failure{Class: failover.Dead, Reason: "dial_failed", Dial: true}
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return Failure{Class: failover.Dead, Reason: "connection_reset"}
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return Failure{Class: failover.Dead, Reason: "connection_closed"}
	case errors.Is(err, context.DeadlineExceeded):
		return Failure{Class: failover.Uncertain, Reason: "timeout"}
	}
	return Failure{Class: failover.Dead, Reason: "transport_error"}
}

// ClassifyStatus classifies a non-200 engine response. 429 and 503 are explicit "busy"
// rejections of a request that never started; other 4xx reject the input itself; other 5xx
// mean the engine failed.
func ClassifyStatus(status int) Failure {
	switch {
	case status == http.StatusTooManyRequests:
		return Failure{Class: failover.Overloaded, Reason: "engine_status_429"}
	case status == http.StatusServiceUnavailable:
		return Failure{Class: failover.Overloaded, Reason: "engine_status_503"}
	case status >= 500, status < 400:
		// A 5xx is the engine failing; anything below 400 but 200 is not an answer the
		// OpenAI protocol has, so the engine is treated as broken, not the input.
		return Failure{Class: failover.Dead, Reason: "engine_status_" + strconv.Itoa(status)}
	default:
		return Failure{Class: failover.Rejected, Reason: "engine_status_" + strconv.Itoa(status)}
	}
}

// RetryAfter reads a Retry-After header given in seconds (the form engines use), or def.
func RetryAfter(h http.Header, def time.Duration) time.Duration {
	if v := h.Get("Retry-After"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 && n <= 3600 {
			return time.Duration(n) * time.Second
		}
	}
	return def
}
