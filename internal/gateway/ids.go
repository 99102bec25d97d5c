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
	requestInfoKey ctxKey = iota
	identityKey
)

// requestInfo is what the middleware keeps of a request, in one context value made once:
// its id, and for the requests the access log writes, its entry and the writer that
// remembers the status. One allocation and one copy of the request for all of it.
type requestInfo struct {
	id     string
	idv    [1]string // backs the X-Request-Id response header
	logged bool      // the access log writes this request: access is its entry
	access accessEntry
	sw     statusWriter
}

// newRequestID returns "req_<ULID>": unique and sortable by time.
func (s *Server) newRequestID() string {
	return "req_" + ulid.MustNew(ulid.Timestamp(s.now()), rand.Reader).String()
}

// writeDeadliner is the response writer of the HTTP servers (the gateway's own and
// net/http's), which sets its connection's write deadline itself: reached without
// http.NewResponseController, which allocates.
type writeDeadliner interface{ SetWriteDeadline(time.Time) error }

// withRequestID gives every response an X-Request-Id, set before anything else is written,
// and a write deadline: a client that stops reading holds no handler for longer than
// client_write_timeout (a streaming response moves the deadline as it progresses, see
// clientWriter). Setting it on every request also replaces the deadline a previous
// response left on a kept-alive connection.
func (s *Server) withRequestID(h http.HandlerFunc) http.HandlerFunc {
	h = s.withAccessLog(h)
	return func(w http.ResponseWriter, r *http.Request) {
		info := &requestInfo{id: s.newRequestID()}
		info.idv[0] = info.id
		w.Header()["X-Request-Id"] = info.idv[:]
		deadline := time.Now().Add(s.config().Policy.ClientWriteTimeout.D())
		if wd, ok := w.(writeDeadliner); ok {
			wd.SetWriteDeadline(deadline)
		} else {
			http.NewResponseController(w).SetWriteDeadline(deadline)
		}
		h(w, r.WithContext(context.WithValue(r.Context(), requestInfoKey, info)))
	}
}

// infoOf returns what the middleware keeps of r (nil outside it).
func infoOf(r *http.Request) *requestInfo {
	info, _ := r.Context().Value(requestInfoKey).(*requestInfo)
	return info
}

func requestID(r *http.Request) string {
	if info := infoOf(r); info != nil {
		return info.id
	}
	return ""
}
