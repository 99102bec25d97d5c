package gateway

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/store"
)

// The gateway starts without its store when the store cannot be reached (docs/design.md §7,
// "Starting without the store"): what needs no store is served, what needs it is answered
// 503 journal_unavailable, and the store is tried again in the background until it comes.
// This file holds what the rest of the gateway asks of that.

// openStore opens the configuration's store, or wraps the one the options give, so that its
// state can be reported either way. It reports whether the gateway owns it (and closes it).
func openStore(ctx context.Context, dsn string, given store.Store, opts store.DeferredOptions) (*store.Deferred, bool, error) {
	if given != nil {
		return store.Watch(given, opts), false, nil
	}
	d, err := store.OpenDeferred(ctx, dsn, opts)
	if err != nil {
		return nil, false, err
	}
	return d, true, nil
}

// StoreConnected reports whether the store answers now (see /readyz).
func (s *Server) StoreConnected() bool { return s.storeAnswers() }

// storeAnswers reports whether the store is open and answered its last call.
func (s *Server) storeAnswers() bool { return s.conn.Connected() }

// storeRetryAfter is the Retry-After of a request refused for the store: until the next
// connection attempt while it was never reached (at least a second), else a second.
func (s *Server) storeRetryAfter() int {
	st := s.conn.State()
	if st.Opened || st.NextRetry.IsZero() {
		return 1
	}
	return max(1, int(math.Ceil(st.NextRetry.Sub(s.now()).Seconds())))
}

// writeStoreUnavailable answers a request that needs the store while the store does not
// answer: 503 journal_unavailable in the API's shape. Nothing was recorded or started, so
// sending it again, with the same Idempotency-Key, is safe: Retry-After says when, and
// retryable (x-should-retry: true) lets the SDKs do it themselves.
func (s *Server) writeStoreUnavailable(w http.ResponseWriter, r *http.Request, message, id string) {
	w.Header().Set("Retry-After", strconv.Itoa(s.storeRetryAfter()))
	writeError(w, r, &openai.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "journal_unavailable",
		Message: message, RequestID: id, Retryable: ptr(true)})
}

// storeStatus is the store's part of /readyz: whether it answers to anyone, and to an
// admin since when, why not, and when it is tried next.
type storeStatus struct {
	Connected bool       `json:"connected"`
	Opened    *bool      `json:"opened,omitempty"`
	Since     *time.Time `json:"since,omitempty"`
	LastError string     `json:"last_error,omitempty"`
	Retries   int        `json:"retries,omitempty"`
	NextRetry *time.Time `json:"next_retry,omitempty"`
}

func (s *Server) storeStatus(detail bool) storeStatus {
	st := s.conn.State()
	out := storeStatus{Connected: st.Connected}
	if !detail {
		return out
	}
	out.Opened, out.LastError, out.Retries = &st.Opened, st.LastError, st.Retries
	if !st.Since.IsZero() {
		out.Since = &st.Since
	}
	if !st.NextRetry.IsZero() {
		out.NextRetry = &st.NextRetry
	}
	return out
}

// whenStoreOpens reads the store's API keys as soon as the store opens, if it was not open
// at start: until then the gateway could not tell every key.
func (s *Server) whenStoreOpens(ctx context.Context) {
	select {
	case <-s.conn.Ready():
	case <-ctx.Done():
		return
	}
	s.storeKeys.mu.Lock()
	loaded := s.storeKeys.loaded
	s.storeKeys.mu.Unlock()
	if loaded || !s.current().cfg.Auth.UsesStoreKeys() {
		return // read at start, or by a request since
	}
	rctx, cancel := context.WithTimeout(ctx, boundaryWriteTimeout)
	defer cancel()
	if err := s.loadStoreKeys(rctx, s.now()); err != nil && ctx.Err() == nil {
		s.log.Warn("API keys not read from the store", "err", err)
	}
}

// notConnected reports the error of a call made while the store was never reached, which
// the store's own retries log already.
func notConnected(err error) bool { return errors.Is(err, store.ErrUnavailable) }
