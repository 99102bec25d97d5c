package request

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/fencegate/fencegate/internal/upstream"
)

// Limits on what the gateway reads from an engine.
const (
	maxDrain           = 64 << 10
	maxDrainWait       = 100 * time.Millisecond
	maxEngineErrorBody = 64 << 10
	maxEngineBody      = 64 << 20
)

// errBodyTooLarge: a non-streaming answer above maxEngineBody; the gateway closes it.
var errBodyTooLarge = errors.New("engine answer larger than 64 MiB")

// upKind names what an attempt's reader reports.
type upKind uint8

const (
	upEnd      upKind = iota + 1 // the stream ended: err nil at EOF, else why
	upFailed                     // the request could not be sent or got no response (err)
	upStatus                     // the engine answered with a non-200 status (status, header, body)
	upBody                       // the complete non-streaming answer (body)
	upResponse                   // a streamed answer's head was read: the owner reads its body (resp)
)

// upMsg is one report of an attempt's reader to the request's owner.
type upMsg struct {
	a      *Attempt
	kind   upKind
	resp   *upstream.Response // upResponse
	body   []byte
	status int
	header http.Header
	err    error
}

// reader sends one attempt's request in its own goroutine and reports what comes back to
// the owner. It touches nothing of the request but the attempt's stop channel, its
// context, its completed flag and its cancel function, and the owner's channel up.
type reader struct {
	a       *Attempt
	up      chan<- upMsg
	client  *upstream.Client
	stream  bool
	readers *sync.WaitGroup
}

// startReader sends req for attempt a: a streamed answer's request that Send writes in
// bounded time (to a plaintext replica, in one write) is sent by the owner itself, at its
// loop's next turn (send.go); any other in a new goroutine, the attempt's reader.
func (rn *Run) startReader(a *Attempt, req *upstream.Request) {
	rn.owner.check()
	if rn.p.Req.Stream && req.QuickSend() && rn.atts.send == nil {
		a.req, rn.atts.send = req, a
		return
	}
	go rn.newReader(a).read(req)
}

// newReader counts a reader of attempt a; it must run. The channel readers report on is
// made for the first: a stream the owner sends and reads itself has none, and an open
// stream is then a channel and its buffer smaller (until then a receive from it, nil, is
// never ready).
func (rn *Run) newReader(a *Attempt) reader {
	rn.owner.check()
	if rn.atts.up == nil {
		rn.atts.up = make(chan upMsg, upDepth)
	}
	rn.atts.readers.Add(1)
	return reader{a: a, up: rn.atts.up, client: rn.srv.Attempts(), stream: rn.p.Req.Stream, readers: &rn.atts.readers}
}

// read sends the attempt's request and reports what comes back. A streamed answer is
// handed to the owner as soon as its head is read (upResponse): the owner reads its body
// itself, in the handler's goroutine, so that no goroutine stands between the engine's
// socket and the client and an event costs one wake-up, not two (docs/design.md §6). A
// refusal and a non-streaming answer are read here whole, while the owner goes on
// answering its other events.
//
// The client never sends the request twice (docs/design.md §3): an error of Do is the
// attempt's failure, with how much of the request was written, and the machine decides.
func (r reader) read(req *upstream.Request) {
	defer r.readers.Done()
	resp, err := r.client.Do(r.a.ctx, req)
	releaseHeader(req)
	if err != nil {
		r.report(upMsg{kind: upFailed, err: err})
		return
	}
	switch {
	case resp.Status != http.StatusOK:
		r.readRefusal(resp)
		return
	case !r.stream:
		body, err := upstream.ReadAll(io.LimitReader(resp, maxEngineBody+1), resp.ContentLength, maxEngineBody)
		if err == nil && len(body) > maxEngineBody {
			err = errBodyTooLarge
		}
		if err != nil {
			r.report(upMsg{kind: upEnd, err: err})
			break
		}
		r.report(upMsg{kind: upBody, body: body})
	default:
		if r.report(upMsg{kind: upResponse, resp: resp}) {
			return // the owner's now
		}
	}
	closeResponse(r.a, resp)
}

// readRefusal reads the body of an engine's refusal (any status but 200), bounded, and
// reports it.
func (r reader) readRefusal(resp *upstream.Response) {
	body, _ := io.ReadAll(io.LimitReader(resp, maxEngineErrorBody))
	r.report(upMsg{kind: upStatus, status: resp.Status, header: resp.Header.HTTP(), body: body})
	closeResponse(r.a, resp)
}

// takeRefusal reads, in a goroutine of its own, a refusal whose head the owner read
// (send.go), so that the owner does not wait on its body.
func (r reader) takeRefusal(resp *upstream.Response) {
	defer r.readers.Done()
	r.readRefusal(resp)
}

// report hands m to the owner, or drops it once the attempt has ended (the owner no longer
// listens to it). It reports whether the owner got it.
func (r reader) report(m upMsg) bool {
	m.a = r.a
	select {
	case r.up <- m:
		return true
	case <-r.a.stop:
		return false
	}
}

// closeResponse ends attempt a's response, in whichever goroutine holds it. A completed
// answer may not be at its end yet (the chunked terminator after [DONE]); reading it,
// bounded, puts the connection back in the pool for the next request instead of dialling
// a new one. A response not read to its end closes its connection, which is how the
// engine learns the request was abandoned; a cancelled attempt's connection was closed
// already, by its context.
func closeResponse(a *Attempt, resp *upstream.Response) {
	if a.completed.Load() {
		resp.Drain(maxDrain, time.Now().Add(maxDrainWait)) // on failure Close closes it
	}
	resp.Close()
	a.cancel()
}
