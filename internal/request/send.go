package request

import (
	"errors"
	"net/http"

	"github.com/fencegate/fencegate/internal/upstream"
)

// The owner sends a streamed answer's request itself (docs/design.md §6): when it goes out
// in one write, the owner writes it at the top of its loop, where its stack is shallow, and
// waits for the head as it waits for the body, on the engine's socket and wakeable
// (inline.go). An open stream then never has a goroutine besides its handler's, not even
// while the engine has yet to answer; a burst of new streams does not double the
// goroutines and their stacks. While the request is being written the owner answers
// nothing else: the connection is pooled or dialled (bounded by the dial timeout; a client
// that leaves cancels the dial) and the write fits the socket's buffer, so it is a short
// wait; whatever came meanwhile is looked at first once the head is awaited. A larger body,
// which the engine must read before the write can end, and a TLS replica, whose handshake
// only the context bounds, are sent by a reader goroutine (upstream.Request.QuickSend).

// sendInline sends the request of attempt a, which startReader left to the owner.
func (rn *Run) sendInline(a *Attempt) {
	rn.owner.check()
	req := a.req
	rn.atts.send, a.req = nil, nil
	if !rn.live(a) {
		releaseHeader(req)
		return // ended before it went out: nothing was sent
	}
	resp, err := rn.srv.Attempts().Send(a.ctx, req)
	releaseHeader(req)
	if err != nil {
		rn.onUpstream(upMsg{a: a, kind: upFailed, err: err})
		return
	}
	rn.onUpstream(upMsg{a: a, kind: upResponse, resp: resp})
}

// readHeadInline is one turn of the owner loop while it waits for the head of attempt a's
// answer: the head read, or a wake answered. A streamed answer's body is then read by the
// next turns; a refusal's body by a reader of its own, so that the owner never waits on
// anything but a stream.
func (rn *Run) readHeadInline(a *Attempt, resp *upstream.Response) {
	rn.owner.check()
	err := resp.ReadHead()
	switch {
	case err == nil && resp.Status == http.StatusOK:
	case err == nil:
		rn.leaveInline(a)
		a.resp = nil
		go rn.newReader(a).takeRefusal(resp)
	case errors.Is(err, upstream.ErrWoken):
		rn.onWoken(resp)
	default:
		rn.leaveInline(a)
		rn.onUpstream(upMsg{a: a, kind: upFailed, err: err})
	}
}
