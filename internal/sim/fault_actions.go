package sim

import (
	"fmt"
	"net"
	"net/http"
)

// faultHeader arms a fault for the one request that carries it.
const faultHeader = "X-Sim-Fault"

// oversizeBytes is the text of an oversize fault's event: more than 4 MiB,
// the line limit an SSE reader commonly enforces, before any blank line.
const oversizeBytes = 4<<20 + 1<<10

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
		if f.action == actionCrash {
			if replicaDown(g.ctx) {
				// This request's replica life is already over: a request
				// from before a restart must not kill the new life.
				g.endByContext()
				return true
			}
			g.s.Crash() // ends this record too, before the connection dies
			return true
		}
		switch f.action {
		case actionReset:
			g.reset()
		case actionHang:
			g.hang()
		case actionStatus:
			g.failAt(apiError{status: f.status, message: fmt.Sprintf("simulated engine error %d (fault %s)", f.status, f.text)}, g.s.cfg.DoneAfterStreamError)
		case actionError:
			// vLLM's GenerationError, in the words of its stream generators.
			e := apiError{status: http.StatusInternalServerError, message: "Internal server error"}
			if f.hang {
				g.failHeld(e)
				break
			}
			g.failAt(e, !f.noDone)
		case actionGarbage:
			g.garbage()
		case actionOversize:
			g.oversize()
		case actionDrop:
			g.drop()
		}
		return true
	}
	return false
}

// reset aborts this request's connection with a TCP RST. The record ends
// first, so a client that sees the reset finds it ended.
func (g *generation) reset() {
	g.s.book.end(g.rec, OutcomeReset)
	resetConn(g.hijack())
}

// drop closes this request's connection with an orderly FIN and writes
// nothing more. The record ends first, so a client that sees the close
// finds it ended.
func (g *generation) drop() {
	g.s.book.end(g.rec, OutcomeDropped)
	_ = g.hijack().Close() // a close that fails leaves nothing more to do
}

// hijack takes the connection from net/http, so that it writes nothing
// more on it (no response, no end of a chunked body).
func (g *generation) hijack() net.Conn {
	conn, _, err := g.rc.Hijack()
	if err != nil {
		// Every connection the sim serves is HTTP/1 and can be hijacked;
		// should that ever change, abort the response instead.
		panic(http.ErrAbortHandler)
	}
	return conn
}

// hang stops all output but keeps the connection open until the client
// leaves or the replica crashes or closes (which end the record as
// "crashed" first).
func (g *generation) hang() { g.silence(OutcomeHung) }

// silence writes nothing more and waits for the client to leave, then ends
// the record with outcome, or as crashed when the replica died instead.
func (g *generation) silence(outcome string) {
	<-g.ctx.Done()
	if replicaDown(g.ctx) {
		g.endByContext()
		return
	}
	g.s.book.end(g.rec, outcome)
}

// failAt fails the request with e: an HTTP error before the headers, the
// endpoint's mid-stream error after them (for chat and completions an SSE
// error event, followed by data: [DONE] when done is set). Both the status
// fault and vLLM's own engine error come through here.
func (g *generation) failAt(e apiError, done bool) {
	g.s.book.end(g.rec, OutcomeError)
	if !g.headersSent {
		g.writeError(e)
		return
	}
	g.out.reset()
	cut := g.out.failure(e, done)
	_, _ = g.w.Write(g.out.bytes()) // the stream ends here whether or not the client got it
	_ = g.rc.Flush()
	if cut {
		// The endpoint's server raised out of its body generator: the
		// connection closes without the chunked body's terminator.
		_ = g.hijack().Close()
	}
}

// failHeld is the error:hang fault: after the stream headers, the
// endpoint's error event and then silence with the connection open, so the
// client learns of a failure but never of its end. Before the headers an
// error is a whole HTTP reply, which ends the request as failAt does.
func (g *generation) failHeld(e apiError) {
	if !g.headersSent {
		g.fail(e)
		return
	}
	g.out.reset()
	g.out.heldFailure(e)
	g.writeBroken(g.out.bytes(), OutcomeErrorHung)
}

// startReply sends a 200 and its headers if none were sent yet, for faults
// that write a broken reply: event-stream headers for a stream, JSON for a
// whole reply.
func (g *generation) startReply() {
	if g.headersSent {
		return
	}
	if g.spec.stream {
		g.sendHeaders()
		return
	}
	g.w.Header().Set("Content-Type", "application/json")
	g.w.WriteHeader(http.StatusOK)
	g.headersSent = true
}

// garbage writes the first part of an event (or whole reply), cut off in
// the middle of its JSON, then stays silent.
func (g *generation) garbage() {
	g.startReply()
	if g.spec.stream {
		g.writeBroken(g.out.garbage(), OutcomeGarbage)
		return
	}
	g.writeBroken(g.format.garbageWhole(g), OutcomeGarbage)
}

// oversize writes one complete, valid event (or whole reply) whose text is
// oversizeBytes long, then stays silent.
func (g *generation) oversize() {
	g.startReply()
	if g.spec.stream {
		g.writeBroken(g.out.oversize(), OutcomeOversize)
		return
	}
	g.writeBroken(g.format.oversizeWhole(g), OutcomeOversize)
}

// writeBroken writes b and then stays silent; the record ends with outcome
// when the client leaves (at once, if the write already failed).
func (g *generation) writeBroken(b []byte, outcome string) {
	_, err := g.w.Write(b)
	if err == nil {
		err = g.rc.Flush()
	}
	if err != nil && !replicaDown(g.ctx) {
		g.s.book.end(g.rec, outcome)
		return
	}
	g.silence(outcome)
}
