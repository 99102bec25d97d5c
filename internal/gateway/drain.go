package gateway

import (
	"context"
	"net/http"
	"time"

	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/request"
)

// register tracks a running request so that a shutdown can end it honestly.
func (s *Server) register(rn *request.Run) bool {
	s.activeMu.Lock()
	defer s.activeMu.Unlock()
	if s.draining {
		return false
	}
	s.active[rn] = struct{}{}
	return true
}

func (s *Server) unregister(rn *request.Run) {
	s.activeMu.Lock()
	delete(s.active, rn)
	n := len(s.active)
	s.activeMu.Unlock()
	if n == 0 {
		s.idle.Broadcast()
	}
}

// drainWriteGrace is how long, after the drain grace, the final gateway_shutdown event
// may take to reach a client; a client that accepts nothing in that time is cut off.
const drainWriteGrace = 2 * time.Second

// Drain stops accepting requests (new ones get 503 with Retry-After, /readyz turns 503)
// and waits for the running ones to finish. When ctx ends first, every request still running
// is ended honestly: its client gets a final error event (gateway_shutdown, with
// partial_output and delivered_output_tokens) instead of a cut connection, and its attempt
// is cancelled. Drain never waits on a request's owner, and reaches it only through its
// inbox (request.Run.Shutdown), which also caps its client writes while its handler runs,
// so Drain returns within drainWriteGrace (plus a moment) of ctx's end whatever the
// clients do. Call it before shutting the HTTP server down.
func (s *Server) Drain(ctx context.Context) {
	s.activeMu.Lock()
	s.draining = true
	s.activeMu.Unlock()
	if s.waitIdle(ctx) {
		return
	}
	s.activeMu.Lock()
	runs := make([]*request.Run, 0, len(s.active))
	for rn := range s.active {
		runs = append(runs, rn)
	}
	s.activeMu.Unlock()
	cut := time.Now().Add(drainWriteGrace)
	for _, rn := range runs {
		rn.Shutdown(cut) // a request that ended meanwhile ignores it
	}
	final, cancel := context.WithDeadline(context.Background(), cut.Add(time.Second))
	defer cancel()
	s.waitIdle(final)
}

// waitIdle waits until no request runs, or ctx ends; it reports whether none runs.
func (s *Server) waitIdle(ctx context.Context) bool {
	stop := context.AfterFunc(ctx, func() {
		s.activeMu.Lock()
		s.idle.Broadcast()
		s.activeMu.Unlock()
	})
	defer stop()
	s.activeMu.Lock()
	defer s.activeMu.Unlock()
	for len(s.active) > 0 && ctx.Err() == nil {
		s.idle.Wait()
	}
	return len(s.active) == 0
}

func (s *Server) isDraining() bool {
	s.activeMu.Lock()
	defer s.activeMu.Unlock()
	return s.draining
}

// refuseDraining answers a request that arrives while the gateway drains.
func refuseDraining(w http.ResponseWriter, r *http.Request, id string) {
	w.Header().Set("Retry-After", "1")
	writeError(w, r, &openai.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "gateway_shutting_down",
		Message: "this gateway is shutting down; send the request to another one", RequestID: id})
}

// DrainGrace is how long running requests may go on once the gateway is told to stop:
// shutdown.drain_grace of the configuration of the moment, so that a reload changes it.
func (s *Server) DrainGrace() time.Duration { return s.config().Shutdown.DrainGrace.D() }
