package sim

import (
	"fmt"
	"net/http"
)

// faultHeader arms a fault for the one request that carries it.
const faultHeader = "X-Sim-Fault"

// fire applies the request's faults that fire at point (token index k) and
// reports whether the request is over. slow faults only change the pace;
// every other action ends the request.
func (g *generation) fire(point faultPoint, k int) bool {
	for _, f := range g.plan {
		if !f.firesAt(point, k, g.spec.stream) {
			continue
		}
		if f.action == actionSlow {
			g.slow *= f.factor
			continue
		}
		switch f.action {
		case actionCrash:
			if replicaDown(g.ctx) {
				// This request's replica life is already over: a request
				// from before a restart must not kill the new life.
				g.endByContext()
				return true
			}
			g.s.Crash() // ends this record too, before the connection dies
		case actionReset:
			g.reset()
		case actionHang:
			g.hang()
		case actionStatus:
			g.statusFault(f)
		}
		return true
	}
	return false
}

// reset aborts this request's connection with a TCP RST. The record ends
// first, so a client that sees the reset finds it ended.
func (g *generation) reset() {
	g.s.book.end(g.rec, OutcomeReset)
	conn, _, err := g.rc.Hijack()
	if err != nil {
		// Every connection the sim serves is HTTP/1 and can be hijacked;
		// should that ever change, abort the response instead.
		panic(http.ErrAbortHandler)
	}
	resetConn(conn)
}

// hang stops all output but keeps the connection open until the client
// leaves or the replica crashes or closes (which end the record as
// "crashed" first).
func (g *generation) hang() {
	<-g.ctx.Done()
	if replicaDown(g.ctx) {
		g.endByContext()
		return
	}
	g.s.book.end(g.rec, OutcomeHung)
}

// statusFault fails the request with f's status: an HTTP error before the
// headers, a final SSE error event after them.
func (g *generation) statusFault(f fault) {
	e := apiError{status: f.status, message: fmt.Sprintf("simulated engine error %d (fault %s)", f.status, f.text)}
	g.s.book.end(g.rec, OutcomeError)
	if !g.headersSent {
		g.s.writeError(g.w, e)
		return
	}
	g.enc.reset()
	g.enc.errorEvent(g.s.errorJSON(e))
	if g.s.cfg.DoneAfterStreamError {
		g.enc.done()
	}
	_, _ = g.w.Write(g.enc.bytes()) // the stream ends here whether or not the client got it
	_ = g.rc.Flush()
}
