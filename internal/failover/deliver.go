package failover

import (
	"math/bits"
	"time"

	"github.com/fencegate/fencegate/internal/sse"
)

// chunk handles one SSE event of the current attempt while it answers normally.
func (m *Machine) chunk(ev Event, now time.Time) {
	m.phase = receiving
	m.lastSeen = now
	c := ev.Chunk
	switch {
	case c&sseError != 0:
		// The engine reports that it failed. Whether it stopped is proven only when it
		// ends the stream (vLLM sends [DONE] next); until then nothing more is delivered.
		m.phase = closing
		m.closingErr = ev.Err
		m.closingUntil = now.Add(m.cfg.EndGrace)
		return
	case c&sseMalformed != 0:
		// The gateway must close a stream it cannot read; closing it proves nothing.
		m.fail(ev.Attempt, Uncertain, EndMalformedEvent, nil, now, false, false)
		return
	case c&sseDone != 0:
		if c&sseFinish != 0 {
			// The end that is also the finish (the Responses API's response.completed).
			m.noteFinished(ev)
		}
		if !m.AllFinished() {
			// The engine ended the stream before every choice finished: a cut answer.
			m.fail(ev.Attempt, Dead, EndDoneBeforeFinish, nil, now, false, false)
			return
		}
		if m.park(ev) {
			return
		}
		m.cross()
		// The end may carry tokens too: the Responses API's response.completed reports the
		// answer's usage, which corrects the one token per delta counted so far.
		m.delivered += ev.Tokens
		m.emit(Action{Kind: ActWrite, Attempt: ev.Attempt})
		m.complete(now, false)
		return
	case c&sseComment != 0 && c&^sseComment == 0:
		// The engine's own keepalive: ours suffices, and it must not cross the boundary.
		return
	}
	if !m.committed && c&sseOutputBearing == 0 {
		m.held++
		m.heldBytes += ev.Size
		if m.cfg.MaxHeldBytes > 0 && m.heldBytes > m.cfg.MaxHeldBytes {
			m.fail(ev.Attempt, Uncertain, EndHeldTooLarge, nil, now, false, false)
			return
		}
		m.emit(Action{Kind: ActHold, Attempt: ev.Attempt})
		return
	}
	if m.park(ev) {
		return
	}
	m.cross()
	m.noteFinished(ev)
	m.delivered += ev.Tokens
	m.emit(Action{Kind: ActWrite, Attempt: ev.Attempt})
}

// body handles the complete answer of a non-streaming attempt.
func (m *Machine) body(ev Event, now time.Time) {
	if m.park(ev) {
		return
	}
	m.cross()
	m.delivered = ev.Tokens
	m.emit(Action{Kind: ActWrite, Attempt: ev.Attempt})
	m.complete(now, false)
}

// closingChunk handles an event of an attempt that already sent an engine error: only
// the end of its stream matters now.
func (m *Machine) closingChunk(ev Event, now time.Time) {
	if ev.Chunk&sseDone != 0 {
		m.fail(ev.Attempt, Dead, EndEngineErrorEvent, m.closingErr, now, false, false)
	}
}

// streamEnded handles a clean EOF of the current attempt's stream.
func (m *Machine) streamEnded(attempt int, now time.Time) {
	switch {
	case m.phase == closing:
		m.fail(attempt, Dead, EndEngineErrorEvent, m.closingErr, now, false, false)
	case m.committed && m.AllFinished():
		// Every choice finished but the engine sent no [DONE]: complete it ourselves.
		m.complete(now, true)
	default:
		m.fail(attempt, Dead, EndClosedMidStream, nil, now, false, false)
	}
}

// complete ends the current attempt and the request with the answer delivered.
func (m *Machine) complete(now time.Time, writeDone bool) {
	m.endAttempt(now, EndCompleted, 0, false, false, false)
	m.finish(Completed, writeDone)
}

// noteFinished records the choices a delivered event finishes.
func (m *Machine) noteFinished(ev Event) {
	if ev.Chunk&sseFinish != 0 && ev.Finished == 0 && ev.FinishedHigh == 0 {
		// A finish the scanner could not place: count it as choice 0's.
		ev.Finished = 1
	}
	m.finished |= ev.Finished
	m.finishedHigh += ev.FinishedHigh
}

// Passes reports whether a chunk of attempt n that bears output and does nothing else —
// no finish_reason, no end, no error, not malformed, not a comment — would be delivered as
// it is: its one action an ActWrite, its one effect its tokens counted as delivered. Then
// the shell may step a run of such chunks, read together, as one chunk: their classes
// joined, their tokens and sizes summed, their bytes written in one ActWrite. The machine
// ends up where the chunks one by one would have left it (the tests check it on every
// passing chunk they step: checkPassesAsOne).
// It holds once the boundary is crossed, while the attempt receives normally.
func (m *Machine) Passes(n int) bool {
	return m.committed && !m.done && m.current(n) && m.phase == receiving
}

// Passing reports whether a chunk of class c is of the kind Passes speaks of. A finish is
// left out although the machine would deliver it as it is: it ends a choice, which the
// shell reads (AllFinished) before it shapes the next chunk.
func Passing(c sse.Class) bool {
	return c&sse.Output != 0 && c&(sseFinish|sseDone|sseError|sseMalformed|sseComment) == 0
}

// AllFinished reports whether every choice of the current attempt sent its finish_reason.
func (m *Machine) AllFinished() bool {
	n := m.cfg.Choices
	low := min(n, 64)
	mask := ^uint64(0)
	if low < 64 {
		mask = 1<<low - 1
	}
	return bits.OnesCount64(m.finished&mask) == low && m.finishedHigh >= n-low
}

// park holds back an event that would cross a durable boundary not yet recorded, and asks
// the shell to record it. It reports whether it did.
func (m *Machine) park(ev Event) bool {
	if m.committed || !m.cfg.DurableBoundary || m.boundaryRecorded {
		return false
	}
	m.parked, m.parkedSet = ev, true
	m.emit(Action{Kind: ActRecordBoundary, Attempt: ev.Attempt})
	return true
}

// boundaryAnswered delivers the parked event once the boundary is durable, or ends the
// request with nothing delivered when it could not be recorded.
func (m *Machine) boundaryAnswered(ev Event, now time.Time) {
	parked := m.parked
	m.parked, m.parkedSet = Event{}, false
	if ev.Err != nil {
		if m.attemptLive() {
			m.endAttempt(now, ev.Reason, 0, true, false, false)
		}
		m.discardHeld()
		m.end(m.decorate(ev.Err, false))
		return
	}
	m.boundaryRecorded = true
	if parked.Kind == EvBody {
		m.body(parked, now)
		return
	}
	m.chunk(parked, now)
}

// cross latches the delivery boundary if it is not latched yet: headers, the first-delta
// record, then the held events. The caller emits the write that follows.
func (m *Machine) cross() {
	if m.committed {
		return
	}
	m.committed = true
	m.keepaliveAt = time.Time{}
	if m.cfg.Stream && !m.headersSent {
		m.headersSent = true
		m.emit(Action{Kind: ActSendHeaders})
	}
	m.emit(Action{Kind: ActMarkFirstDelta, Attempt: m.attempt})
	if m.held > 0 {
		m.held, m.heldBytes = 0, 0
		m.emit(Action{Kind: ActWriteHeld, Attempt: m.attempt})
	}
}

func (m *Machine) discardHeld() {
	if m.held > 0 {
		m.held, m.heldBytes = 0, 0
		m.emit(Action{Kind: ActDiscardHeld, Attempt: m.attempt})
	}
}
