package request

import (
	"errors"
	"io"
	"time"

	"github.com/fencegate/fencegate/internal/failover"
	"github.com/fencegate/fencegate/internal/upstream"
)

// The owner reads a streamed answer's body itself (docs/design.md §6): from the moment the
// attempt's reader hands it the response (upResponse), or the owner sent the request
// itself and awaits the head (send.go), until the attempt ends, the owner
// waits on the engine's socket rather than on its channels. A token then costs one
// wake-up, the owner's, and no goroutine and no read buffer is held by a stream that waits
// for its next token. Whatever else the owner must answer wakes that wait: a post to the
// inbox wakes the response (Run.wakeOwner), the machine's deadline is the socket's read
// deadline, and the client leaving cancels the attempt's context, which closes the
// connection under the read. Only the live attempt is read this way; there is at most one.

// enterInline takes over the body of attempt a's streamed answer.
func (rn *Run) enterInline(a *Attempt, resp *upstream.Response) {
	rn.owner.check()
	a.resp = resp
	resp.EnableWake()
	rn.atts.inline = a
	rn.wakeTarget.Store(resp)
	// The deadline is the socket's from now on. What was posted to the inbox before
	// wakeTarget was set woke nobody: the first turn looks at it (poll).
	rn.timer.Stop()
	rn.wakeAt = time.Time{}
	if !rn.armedAt.IsZero() {
		rn.wakeAt = time.Now().Add(rn.armedAt.Sub(rn.now()))
	}
	rn.atts.poll = true
}

// leaveInline ends the inline reading of attempt a, when it is the one read: its attempt
// ended, or its body did. The response stays with a until closeResponses.
func (rn *Run) leaveInline(a *Attempt) {
	rn.owner.check()
	if rn.atts.inline != a || a == nil {
		return
	}
	rn.atts.inline = nil
	rn.wakeTarget.Store(nil)
	if !rn.armedAt.IsZero() {
		rn.timer.Reset(rn.armedAt.Sub(rn.now()))
	}
}

// wakeOwner wakes the owner from its wait on the engine, if it waits there. Safe from any
// goroutine; the inbox calls it after every post.
func (rn *Run) wakeOwner() {
	if resp := rn.wakeTarget.Load(); resp != nil {
		resp.Wake()
	}
}

// readInline is one turn of the owner loop while it reads attempt a's body: one read of
// the engine, handled, or one wake, answered.
func (rn *Run) readInline(a *Attempt) {
	rn.owner.check()
	resp := a.resp
	// The order matters (upstream.Response.Woken): the deadline, then the wake flag, then
	// the read.
	resp.SetWakeAt(rn.wakeAt)
	if rn.atts.poll || resp.Woken() {
		rn.atts.poll = false
		rn.pollOthers()
		return
	}
	if !resp.HeadRead() {
		rn.readHeadInline(a, resp) // the owner sent the request itself (send.go)
		return
	}
	// The bytes are read into the connection's own buffer and stay there until the next
	// read, which comes after the client is flushed: the decoder reads the events in
	// place, and a stream waiting for its next token holds no buffer of its own.
	b, err := resp.Next()
	if len(b) > 0 {
		now := rn.now()
		if !rn.armedAt.IsZero() && !now.Before(rn.armedAt) {
			// The machine's deadline passed while the read waited, and the bytes came no
			// earlier: the deadline is stepped first, as the timer would have fired first.
			rn.armedAt, rn.wakeAt = time.Time{}, time.Time{}
			rn.step(failover.Event{Kind: failover.EvTick})
		}
		if rn.live(a) {
			rn.onData(a, b, now)
		}
	}
	switch {
	case err == nil:
	case errors.Is(err, upstream.ErrWoken):
		rn.onWoken(resp)
	default:
		if errors.Is(err, io.EOF) {
			err = nil
		}
		rn.leaveInline(a)
		rn.onUpstream(upMsg{a: a, kind: upEnd, err: err})
	}
}

// onWoken answers a wait on the engine that ended with nothing read: a wake (the inbox,
// the client leaving) or the machine's deadline, which is stepped as the timer would be in
// the select loop.
func (rn *Run) onWoken(resp *upstream.Response) {
	rn.owner.check()
	if resp.Woken() {
		rn.pollOthers()
	} else if !rn.armedAt.IsZero() {
		rn.armedAt, rn.wakeAt = time.Time{}, time.Time{}
		rn.step(failover.Event{Kind: failover.EvTick})
	}
}

// pollOthers answers what woke the owner from its wait on the engine: the inbox, or the
// client leaving. It never waits.
func (rn *Run) pollOthers() {
	rn.owner.check()
	select {
	case <-rn.inbox.ready:
		rn.onControls()
	default:
	}
	if rn.m.Done() {
		return
	}
	select {
	case <-rn.clientDone:
		rn.clientDone = nil
		rn.step(rn.clientGone())
	default:
	}
}

// closeResponses ends the responses the owner took over, once the request has ended: a
// completed answer's connection is drained and pooled (closeResponse), any other closed.
// Reports its readers left on the channel are ended the same way.
func (rn *Run) closeResponses() {
	rn.owner.check()
	for _, a := range rn.atts.all {
		if a.resp != nil {
			closeResponse(a, a.resp)
			a.resp = nil
		}
	}
	for {
		select {
		case msg := <-rn.atts.up:
			if msg.kind == upResponse {
				closeResponse(msg.a, msg.resp)
			}
		default:
			return
		}
	}
}
