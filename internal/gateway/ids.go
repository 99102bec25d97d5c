package gateway

import (
	"context"
	"crypto/rand"
	"net/http"

	"github.com/oklog/ulid/v2"
)

type ctxKey int

const (
	requestIDKey ctxKey = iota
	identityKey
)

// newRequestID returns "req_<ULID>": unique and sortable by time.
func (s *Server) newRequestID() string {
	return "req_" + ulid.MustNew(ulid.Timestamp(s.now()), rand.Reader).String()
}

// withRequestID gives every response an X-Request-Id, set before anything else is written.
func (s *Server) withRequestID(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := s.newRequestID()
		w.Header().Set("X-Request-Id", id)
		h(w, r.WithContext(context.WithValue(r.Context(), requestIDKey, id)))
	}
}

func requestID(r *http.Request) string {
	id, _ := r.Context().Value(requestIDKey).(string)
	return id
}
