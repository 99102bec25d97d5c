package upstream

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fencegate/fencegate/internal/failover"
)

// Failure is the classification of one upstream error.
type Failure struct {
	Class failover.FailureClass
	// Reason is the short word for the journal (failover.EndConnectionRefused, ...).
	Reason failover.EndReason
	// Dial is true when no connection was established, so the request never reached the
	// engine. It is always safe to rerun and marks the replica dead for the cooldown.
	Dial bool
	// Unsent is true when not one byte of the request was written (always with Dial), so
	// the engine cannot have seen it: a rerun costs no prefill and cannot run the request
	// twice. Without Dial it says nothing about the replica's health: a kept-alive
	// connection was found broken as the request was about to go out on it.
	Unsent bool
}

// ClassifyError classifies an error from sending the request or reading the response.
// Callers check first whether the client went away (its context), which is never an
// upstream failure. The classification table is in docs/design.md §3.
//
// In direct mode the gateway must never rerun an attempt that may still be decoding on the
// engine. Only proof that the engine stopped, or never got the request, is therefore Dead;
// every other error is Uncertain. An error not recognised here proves nothing: the engine
// may still be decoding behind it, and rerunning would run two attempts at once.
//
// The checks go in this order:
//
//  1. The dial failed: a *net.OpError with Op "dial" whatever it wraps, ECONNREFUSED, a
//     *net.DNSError, or the Client's *Error with Op OpDial (a TLS handshake that failed
//     included). No connection was established, so the request never reached the
//     engine. Dead with Dial set; reason "connection_refused", "dns_failed",
//     "dial_timeout" (a dial that timed out is still a dial failure) or "dial_failed".
//  2. The Client refused to write the request (ErrInvalidRequest): Dead
//     "invalid_request"; nothing was sent.
//  3. The engine is proven dead after connecting: it closed a kept-alive connection as it
//     was reused (ErrServerClosedIdle, or net/http's "server closed idle connection") is
//     Dead "connection_closed", whether its FIN or its reset came back; a reset from it
//     (ECONNRESET, or EPIPE when writing) is Dead "connection_reset"; a FIN from it
//     (io.EOF or io.ErrUnexpectedEOF, including net/http's "transport connection broken"
//     errors that wrap io.EOF) is Dead "connection_closed".
//  4. A response the Client could not parse (*ProtocolError) is Uncertain
//     "malformed_response": the engine behind it may still be decoding.
//  5. Everything else is Uncertain: ETIMEDOUT (the kernel gave up on an established
//     connection after keepalive or retransmission timeouts; the engine may be alive
//     behind a broken path) is "tcp_timeout", checked before the generic timeout because
//     the errno reports Timeout() too; EHOSTUNREACH is "host_unreachable"; ENETUNREACH is
//     "network_unreachable"; context.DeadlineExceeded, os.ErrDeadlineExceeded or any
//     net.Error whose Timeout() is true is "timeout"; anything else is "transport_error".
//
// Unsent is set with Dial, and for the Client's *Error whose Sent is SentNothing.
func ClassifyError(err error) Failure {
	f := classifyCause(err)
	var e *Error
	if errors.As(err, &e) {
		f.Unsent = f.Dial || e.Sent == SentNothing
	} else {
		f.Unsent = f.Dial || errors.Is(err, ErrInvalidRequest)
	}
	return f
}

func classifyCause(err error) Failure {
	if f, ok := dialFailure(err); ok {
		return f
	}
	var protoErr *ProtocolError
	switch {
	case errors.Is(err, ErrInvalidRequest):
		return Failure{Class: failover.Dead, Reason: failover.EndInvalidRequest}
	case errors.Is(err, ErrServerClosedIdle), serverClosedIdle(err):
		return Failure{Class: failover.Dead, Reason: failover.EndConnectionClosed}
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return Failure{Class: failover.Dead, Reason: failover.EndConnectionReset}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return Failure{Class: failover.Dead, Reason: failover.EndConnectionClosed}
	case errors.As(err, &protoErr):
		return Failure{Class: failover.Uncertain, Reason: failover.EndMalformedResponse}
	case errors.Is(err, syscall.ETIMEDOUT):
		return Failure{Class: failover.Uncertain, Reason: failover.EndTCPTimeout}
	case errors.Is(err, syscall.EHOSTUNREACH):
		return Failure{Class: failover.Uncertain, Reason: failover.EndHostUnreachable}
	case errors.Is(err, syscall.ENETUNREACH):
		return Failure{Class: failover.Uncertain, Reason: failover.EndNetworkUnreachable}
	case isTimeout(err):
		return Failure{Class: failover.Uncertain, Reason: failover.EndTimeout}
	}
	return Failure{Class: failover.Uncertain, Reason: failover.EndTransportError}
}

// dialFailure reports whether err shows that no connection was established, and how.
func dialFailure(err error) (Failure, bool) {
	var opErr *net.OpError
	var dnsErr *net.DNSError
	var own *Error
	dialOp := (errors.As(err, &opErr) && opErr.Op == "dial") || (errors.As(err, &own) && own.Op == OpDial)
	dns := errors.As(err, &dnsErr)
	refused := errors.Is(err, syscall.ECONNREFUSED)
	if !dialOp && !dns && !refused {
		return Failure{}, false
	}
	f := Failure{Class: failover.Dead, Reason: failover.EndDialFailed, Dial: true}
	switch {
	case refused:
		f.Reason = failover.EndConnectionRefused
	case dns:
		f.Reason = failover.EndDNSFailed
	case isTimeout(err):
		f.Reason = failover.EndDialTimeout
	}
	return f, true
}

// isTimeout reports whether err is a deadline or timeout, in any of the forms the context,
// os and net packages give it. Every error in the chain is asked, not only the first
// net.Error: a *url.Error only reports the Timeout of the error it directly wraps.
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	for err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if isTimeout(e) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}

// ClassifyStatus classifies a non-200 engine response. 429 and 503 are explicit "busy"
// rejections of a request that never started; other 4xx reject the input itself; other 5xx
// mean the engine failed.
func ClassifyStatus(status int) Failure {
	switch {
	case status == http.StatusTooManyRequests:
		return Failure{Class: failover.Overloaded, Reason: failover.EndEngineStatus(http.StatusTooManyRequests)}
	case status == http.StatusServiceUnavailable:
		return Failure{Class: failover.Overloaded, Reason: failover.EndEngineStatus(http.StatusServiceUnavailable)}
	case status == http.StatusFailedDependency:
		// TGI's 424: generation failed in the engine (out of GPU memory, say), not the
		// client's input.
		return Failure{Class: failover.Dead, Reason: failover.EndEngineStatus(http.StatusFailedDependency)}
	case status >= 500, status < 400:
		// A 5xx is the engine failing; anything below 400 but 200 is not an answer the
		// OpenAI protocol has, so the engine is treated as broken, not the input.
		return Failure{Class: failover.Dead, Reason: failover.EndEngineStatus(status)}
	default:
		return Failure{Class: failover.Rejected, Reason: failover.EndEngineStatus(status)}
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

// serverClosedIdle recognises net/http's "server closed idle connection": the engine closed
// a kept-alive connection (its FIN arrived) just as the gateway reused it for a request,
// which the engine therefore never started. net/http does not export the error value, so
// its text is matched.
func serverClosedIdle(err error) bool {
	return err != nil && strings.Contains(err.Error(), "http: server closed idle connection")
}
