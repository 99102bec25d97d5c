package gateway

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/limits"
	"github.com/fencegate/fencegate/internal/openai"
)

// jsonContentType accepts what a client may call its JSON body: no type at all (many
// clients send none), application/json, or a +json type. A form or text body is refused
// before it is read, so that a client that forgot the header hears why.
func jsonContentType(r *http.Request) bool {
	ct := field(r.Header, "Content-Type")
	if ct == "" || ct == "application/json" {
		return true // what every SDK sends, without the parse's allocations
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")))
}

// readRequest reads a request body of at most cfg.Limits.MaxBodyBytes within
// cfg.Server.BodyReadTimeout and parses it for ep (openai.Parse, keeping promptPrefix
// bytes of the prompt). It answers the request itself and returns false when the body
// is not JSON by its type (415), too large (413), too slow (408), unreadable (400) or
// refused by the parser (400).
//
// A body whose length the client declared is parsed while it arrives
// (openai.ReadRequest), into one buffer of that length: parsing overlaps the transfer,
// and the body is the only copy of itself a request keeps (a body read by doubling a
// buffer allocates twice its size and copies it). One declared longer than the limit
// is refused unread, and its connection closed after the answer.
//
// The read deadline is set on the connection for the body only and cleared once the body
// is in (a body that failed leaves it: its connection is closed after the answer). Under
// net/http's server (TLS listeners), which keeps reading a connection in the background
// while a handler runs to notice a client that leaves, a deadline left on it would end a
// long stream as if its client had gone; the gateway's own server waits for the next
// request under a deadline of its own.
func readRequest(w http.ResponseWriter, r *http.Request, cfg *config.Config, ep openai.Endpoint, promptPrefix int) (*openai.Request, openai.Members, bool) {
	id := requestID(r)
	if !jsonContentType(r) {
		writeError(w, r, &openai.Error{Status: http.StatusUnsupportedMediaType, Type: "invalid_request_error", Code: "unsupported_media_type",
			Message:   fmt.Sprintf("Content-Type %q is not supported: send the body as JSON with 'Content-Type: application/json'.", r.Header.Get("Content-Type")),
			RequestID: id})
		return nil, nil, false
	}
	rc := http.NewResponseController(w)
	timeout := cfg.Server.BodyReadTimeout.D()
	// Not every connection supports deadlines (an HTTP/2 stream under some test servers):
	// the body is then read without one.
	deadlineSet := rc.SetReadDeadline(time.Now().Add(timeout)) == nil
	limit := cfg.Limits.MaxBodyBytes
	var req *openai.Request
	var members openai.Members
	var err error
	switch {
	case r.ContentLength > limit:
		w.Header().Set("Connection", "close")
		err = &http.MaxBytesError{Limit: limit}
	case r.ContentLength > 0:
		req, members, err = openai.ReadRequest(ep, http.MaxBytesReader(w, r.Body, limit), int(r.ContentLength), promptPrefix)
	default:
		var body []byte
		if body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, limit)); err == nil {
			var perr *openai.Error
			if req, members, perr = openai.Parse(ep, body, promptPrefix); perr != nil {
				err = perr
			}
		}
	}
	var refused *openai.Error
	if err == nil || errors.As(err, &refused) {
		if deadlineSet {
			rc.SetReadDeadline(time.Time{})
		}
		// Read whole: closed, the body tells net/http so, which otherwise reads it again to
		// its end (an io.CopyN into io.Discard) when the response's head is written.
		r.Body.Close()
		if refused != nil {
			refused.RequestID = id
			writeError(w, r, refused)
			return nil, nil, false
		}
		return req, members, true
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		writeError(w, r, &openai.Error{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: "request_too_large",
			Message: fmt.Sprintf("request body exceeds the limit of %d bytes", cfg.Limits.MaxBodyBytes), RequestID: id})
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The deadline stays: the rest of the body will not be read, so the server closes
		// the connection after this answer instead of waiting for it.
		writeError(w, r, &openai.Error{Status: http.StatusRequestTimeout, Type: "invalid_request_error", Code: "body_read_timeout",
			Message: fmt.Sprintf("the request body did not arrive within %s", timeout), RequestID: id})
	default:
		writeError(w, r, &openai.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "body_read_failed",
			Message: "could not read the request body: " + err.Error(), RequestID: id})
	}
	return nil, nil, false
}

// modelNotFound answers as OpenAI does for a model that does not exist; a key limited to
// other models gets the same answer, so it cannot tell which models the gateway serves.
func modelNotFound(w http.ResponseWriter, r *http.Request, model string) {
	writeError(w, r, &openai.Error{Status: http.StatusNotFound, Type: "invalid_request_error", Code: "model_not_found", Param: "model",
		Message: fmt.Sprintf("The model `%s` does not exist or is not served by this gateway.", model), RequestID: requestID(r)})
}

// admit applies the key's limits to request id. An admitted request gets a ticket, to be
// ended with the output tokens it delivered; a refused one has been answered (429, or 503
// when the shared limits backend is down and the gateway fails closed). Either way the
// response carries OpenAI's x-ratelimit-* headers for the limits the key has.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, k apiKey, id string) (*limits.Ticket, bool) {
	if k.limits.None() {
		return nil, true
	}
	tk, d, err := s.limiter.Acquire(r.Context(), k.ID, id, k.limits, s.now())
	switch {
	case errors.Is(err, limits.ErrUnavailable):
		w.Header().Set("Retry-After", "1")
		writeError(w, r, &openai.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "limits_unavailable",
			Message: "the rate limits cannot be checked right now; retry shortly", RequestID: id, Retryable: ptr(true)})
		return nil, false
	case err != nil:
		// The client left while its limits were being checked.
		writeError(w, r, &openai.Error{Status: http.StatusBadRequest, Type: "invalid_request_error", Code: "client_closed",
			Message: "the request ended before it was admitted", RequestID: id})
		return nil, false
	}
	setRateLimitHeaders(w.Header(), d)
	if d.Refused == limits.Allowed {
		return tk, true
	}
	s.metrics.limited.WithLabelValues(k.ID, d.Refused.String()).Inc()
	secs := int((d.RetryAfter + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	e := &openai.Error{Status: http.StatusTooManyRequests, Type: d.Refused.String(), Code: "rate_limit_exceeded", RequestID: id, Retryable: ptr(true)}
	switch d.Refused {
	case limits.Requests:
		e.Message = fmt.Sprintf("Rate limit reached for key %s on requests per min (RPM): Limit %d. Please try again in %s.", k.ID, k.limits.RPM, roundDuration(d.RetryAfter))
	case limits.Tokens:
		e.Message = fmt.Sprintf("Rate limit reached for key %s on output tokens per min (TPM): Limit %d. Please try again in %s.", k.ID, k.limits.TPM, roundDuration(d.RetryAfter))
	case limits.Concurrency:
		e.Code = "concurrency_limit_exceeded"
		e.Message = fmt.Sprintf("Key %s already has %d requests running, its limit. Retry when one of them has finished.", k.ID, k.limits.MaxConcurrent)
	}
	writeError(w, r, e)
	return nil, false
}

// setRateLimitHeaders writes OpenAI's rate limit headers for the per-minute limits the key
// has: limit, remaining, and the time until the key's use is back to none.
func setRateLimitHeaders(h http.Header, d limits.Decision) {
	for _, q := range []struct {
		suffix string
		q      *limits.Quota
	}{{"requests", d.Requests}, {"tokens", d.Tokens}} {
		if q.q == nil {
			continue
		}
		h.Set("X-Ratelimit-Limit-"+q.suffix, strconv.FormatInt(q.q.Limit, 10))
		h.Set("X-Ratelimit-Remaining-"+q.suffix, strconv.FormatInt(q.q.Remaining, 10))
		h.Set("X-Ratelimit-Reset-"+q.suffix, roundDuration(q.q.Reset))
	}
}

// roundDuration writes a duration as OpenAI's reset headers do ("1s", "6m0s", "17ms").
func roundDuration(d time.Duration) string {
	if d >= time.Second {
		d = d.Round(time.Millisecond)
	}
	return d.String()
}

func ptr[T any](v T) *T { return &v }

// field is h.Get(key) for a key in canonical form, without Get's canonicalization of the
// key (a few hundred instructions a call): the request's fields are stored under
// canonical keys, so the two find the same value. For the fields every request reads.
func field(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}
