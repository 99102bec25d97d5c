package sim

import (
	"bytes"
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
			g.failAt(apiError{status: http.StatusInternalServerError, message: "Internal server error"}, !f.noDone)
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

// failAt fails the request with e: an HTTP error before the headers, an
// SSE error event after them, followed by data: [DONE] when done is set.
// Both the status fault and vLLM's own engine error come through here.
func (g *generation) failAt(e apiError, done bool) {
	g.s.book.end(g.rec, OutcomeError)
	if !g.headersSent {
		g.s.writeError(g.w, e)
		return
	}
	body := streamErrorJSON(e) // vLLM's json.dumps rendering of the event
	if g.s.cfg.LegacyErrors {
		body = g.s.errorJSON(e)
	}
	g.enc.reset()
	g.enc.errorEvent(body)
	if done {
		g.enc.done()
	}
	_, _ = g.w.Write(g.enc.bytes()) // the stream ends here whether or not the client got it
	_ = g.rc.Flush()
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

// garbage writes the first part of a chunk, cut off in the middle of its
// JSON, then stays silent.
func (g *generation) garbage() {
	g.startReply()
	var b []byte
	if g.spec.stream {
		b = append(b, g.enc.head...)
		b = append(b, `,"choices":[{"index":0,"`...)
		b = append(b, g.textKey()...)
		b = append(b, "\n\n"...)
	} else {
		b = fmt.Appendf(nil, `{"id":%q,"object":"%s","created":%d,"model":%q,"choices":[{"index":0,"`, g.id, g.wholeObject(), g.created, g.s.cfg.Model)
		b = append(b, g.textKey()...)
	}
	g.writeBroken(b, OutcomeGarbage)
}

// oversize writes one complete, valid chunk (or whole reply) whose text is
// oversizeBytes long, then stays silent.
func (g *generation) oversize() {
	g.startReply()
	var b []byte
	if g.spec.stream {
		b = append(b, g.enc.head...)
		b = append(b, `,"choices":[{"index":0,"`...)
	} else {
		b = fmt.Appendf(b, `{"id":%q,"object":"%s","created":%d,"model":%q,"choices":[{"index":0,"`, g.id, g.wholeObject(), g.created, g.s.cfg.Model)
	}
	b = append(b, g.textKey()...)
	b = append(b, bytes.Repeat([]byte("x"), oversizeBytes)...)
	switch {
	case g.spec.stream && g.spec.endpoint == endpointChat:
		b = append(b, `"},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
	case g.spec.stream:
		b = append(b, `","logprobs":null,"finish_reason":null,"stop_reason":null}]}`+"\n\n"...)
	case g.spec.endpoint == endpointChat:
		b = append(b, `"},"logprobs":null,"finish_reason":"length","stop_reason":null}]}`...)
	default:
		b = append(b, `","logprobs":null,"finish_reason":"length","stop_reason":null}]}`...)
	}
	g.writeBroken(b, OutcomeOversize)
}

// textKey opens the string that carries a choice's text, up to its quote.
func (g *generation) textKey() string {
	switch {
	case g.spec.endpoint != endpointChat:
		return `text":"`
	case g.spec.stream:
		return `delta":{"content":"`
	default:
		return `message":{"role":"assistant","content":"`
	}
}

// wholeObject is the object name of a non-stream reply.
func (g *generation) wholeObject() string {
	if g.spec.endpoint == endpointChat {
		return "chat.completion"
	}
	return "text_completion"
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
