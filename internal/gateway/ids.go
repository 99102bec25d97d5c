package gateway

import (
	"context"
	"crypto/rand"
	"net/http"
	"time"

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

// withRequestID gives every response an X-Request-Id, set before anything else is written,
// and a write deadline: a client that stops reading holds no handler for longer than
// client_write_timeout (a streaming response moves the deadline as it progresses, see
// clientWriter). Setting it on every request also replaces the deadline a previous
// response left on a kept-alive connection.
func (s *Server) withRequestID(h http.HandlerFunc) http.HandlerFunc {
	h = s.withAccessLog(h)
	return func(w http.ResponseWriter, r *http.Request) {
		id := s.newRequestID()
		w.Header().Set("X-Request-Id", id)
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.config().Policy.ClientWriteTimeout.D()))
		h(w, r.WithContext(context.WithValue(r.Context(), requestIDKey, id)))
	}
}

func requestID(r *http.Request) string {
	id, _ := r.Context().Value(requestIDKey).(string)
	return id
}
