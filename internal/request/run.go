package request

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/failover"
	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/sse"
	"github.com/fencegate/fencegate/internal/upstream"
)

// Run is one logical request and its owner loop (docs/design.md §6). The handler's
// goroutine owns it: it alone steps the failover machine, writes to the client and touches
// the request's journal record. Everything else reports to it — each attempt's reader over
// attempts.up, and the timer, the client leaving, fence acks, heartbeat loss, the admin
// endpoint, Drain and the tokenize call through inbox — so nothing is shared under a lock,
// and no sender ever waits for the owner, which may be busy writing to a slow client.
//
// Only ID, Done and Shutdown may be called from other goroutines.
type Run struct {
	owner ownerGoroutine
	srv   Server
	pool  Pool
	p     Params
	m     *failover.Machine
	cw    *clientWriter
	shape shaper
	run   passRun // the current read's run of passing chunks (passing.go)
	rec   recorder
	atts  attempts
	cost  cost
	wait  waiting

	inbox    *inbox
	controls []control
	timer    *time.Timer
	armedAt  time.Time // what the timer was last set to (zero: stopped or fired)
	// wakeAt is armedAt on the real clock (zero: none): the read deadline of a body the
	// owner reads itself (inline.go). wakeTarget is that body's response, which a post to
	// the inbox wakes.
	wakeAt     time.Time
	wakeTarget atomic.Pointer[upstream.Response]
	// clientDone is the client's request context's Done (nil once the client left).
	clientDone <-chan struct{}
	// pending are the events still to step in the current step: follow-ups that actions
	// produced (EvDispatched, EvBoundaryRecorded, EvRerunBudget, ...).
	pending []failover.Event
	// done is closed when the owner loop has ended and the final journal update was
	// submitted (a waiting GET /admin/requests/{id}/trace reads the journal then).
	done chan struct{}
}

// Params is what the gateway decided about a request before its owner takes it.
type Params struct {
	// ID is the logical request id; AttemptBase offsets attempt numbers when this gateway
	// took the request over from one that died (its attempts keep their numbers).
	ID          string
	AttemptBase int
	// Keyed: the request has an Idempotency-Key, claimed in the journal. Its boundary is
	// recorded synchronously and its response kept for replay.
	Keyed bool
	// Config is the configuration the request started with, to its end.
	Config *config.Config
	W      http.ResponseWriter
	R      *http.Request
	Req    *openai.Request
	// Members are the request body's top-level members (openai.Parse), spans of its bytes.
	Members openai.Members
	// Start is when the request was accepted.
	Start time.Time
	// Pinned is the one replica the request may run on: a Responses request continues a
	// response stored there (previous_response_id).
	Pinned string
	// Affinity is the prompt prefix's affinity key in the pool (0: none); Blocks the
	// prompt's chained block hashes for the cache-aware policy (nil: none).
	Affinity uint64
	Blocks   []uint64
	// Traces is the request's trace mode (the key's, else the gateway's).
	Traces config.TraceMode
	// Class is the request's place in its pool's queue.
	Class Class
}

// attempts are the attempts of a request, and the channel their readers report on.
type attempts struct {
	cur *Attempt // the attempt the machine last started
	all []*Attempt
	// inline is the attempt whose streamed body the owner reads itself (inline.go), nil
	// when it waits on its channels; poll: its next turn looks at the inbox first.
	inline *Attempt
	poll   bool
	// send is the attempt whose request the owner sends at its loop's next turn (send.go).
	send *Attempt
	// up carries the readers' reports (made for the first reader: newReader); readers
	// counts the readers still running.
	up      chan upMsg
	readers sync.WaitGroup
}

// upDepth is the number of reports the attempts' readers may have waiting for their owner:
// each reader makes one report, and an ended attempt's reader may still make its own while
// the next attempt's comes.
const upDepth = 2

// New builds the owner of a request and its failover machine. The goroutine that calls it
// owns the request, and must call Serve.
func New(srv Server, pool Pool, p Params) *Run {
	req, cfg := p.Req, p.Config
	rn := &Run{
		owner: newOwnerGoroutine(), srv: srv, pool: pool, p: p,
		cw:    newClientWriter(p.W, cfg.Policy.ClientWriteTimeout.D()),
		shape: newShaper(req, p.Members, p.ID),
		rec:   recorder{srv: srv, id: p.ID, model: req.Model, start: p.Start},
		cost:  cost{promptTokens: estimateTokens(req)},
		done:  make(chan struct{}),
	}
	rn.inbox = newInbox(rn.cw)
	rn.inbox.wake = rn.wakeOwner
	if p.Keyed {
		rn.cw.keep(cfg.Idempotency.MaxReplayBytes)
	}
	if rn.rec.trace = newRequestTrace(p.Traces, cfg.Traces.MaxBytes, p.R, req.Body, p.Members, req.Stream, p.Start); rn.rec.trace != nil {
		rn.cw.rec = rn.rec.trace.rec
	}
	pol := cfg.Policy
	firstToken, idle := pol.FirstTokenTimeout.D(), pol.IdleTimeout.D()
	if !req.Stream {
		firstToken, idle = pol.NonStreamTimeout.D(), pol.NonStreamTimeout.D()
	}
	rn.m = failover.New(failover.Config{
		RequestID: p.ID, Model: req.Model, Stream: req.Stream, Choices: req.Choices, MaxAttempts: pol.MaxAttempts,
		FirstTokenTimeout: firstToken, IdleTimeout: idle, MaxDuration: pol.MaxRequestDuration.D(),
		Keepalive: keepaliveFor(req.Stream, pol.Keepalive.D()), MaxHeldBytes: pol.MaxHeldBytes,
		DurableBoundary: p.Keyed, RetryBudget: true,
		RerunTokenLimit: rerunTokenLimit(cfg), PromptTokens: rn.cost.promptTokens,
		EngineTools: req.EngineTools.Types, RerunEngineTools: req.EngineTools.Idempotent(pol.IdempotentServers()),
	})
	return rn
}

func keepaliveFor(stream bool, d time.Duration) time.Duration {
	if !stream {
		return 0
	}
	return d
}

// ID is the logical request id. Safe from any goroutine.
func (rn *Run) ID() string { return rn.p.ID }

// Done is closed when the request has ended and its final journal update was submitted.
// Safe from any goroutine.
func (rn *Run) Done() <-chan struct{} { return rn.done }

func (rn *Run) now() time.Time { return rn.srv.Now() }

// Serve is the owner loop: it runs the machine from EvStart to its terminal action,
// flushing the client once per batch of events that were ready together, and returns how
// the request ended once every attempt has ended and its reader has returned.
func (rn *Run) Serve() End {
	rn.owner.check()
	defer close(rn.done)
	// From here on nothing reaches the request: the handler is about to return, after
	// which its response writer may not be touched (see inbox.close).
	defer rn.inbox.close()
	rn.timer = time.NewTimer(time.Hour)
	rn.timer.Stop()
	defer rn.teardown()
	rn.rec.startRequestSpan(rn.p.R, rn.p.Req)
	if rn.shape.wantUsage {
		// Made here, where the stack is shallow, rather than when the first attempt is
		// sent: rewriting the body's stream_options takes sjson's deep frames, which on the
		// attempt's path would double the stack this goroutine keeps for the whole stream
		// (docs/performance.md). Engines that cannot send usage in every chunk get the
		// client's body.
		rn.shape.usageBody()
	}
	rn.clientDone = rn.p.R.Context().Done()
	if rn.cost.waitCount = rn.countPromptTokens(); !rn.cost.waitCount {
		rn.step(failover.Event{Kind: failover.EvStart})
	}
	for !rn.m.Done() {
		rn.cw.flush()
		if rn.cw.err != nil {
			rn.step(rn.clientGone())
			break
		}
		if a := rn.atts.send; a != nil {
			rn.sendInline(a)
			continue
		}
		if a := rn.atts.inline; a != nil {
			rn.readInline(a)
			continue
		}
		select {
		case msg := <-rn.atts.up:
			rn.onUpstream(msg)
			rn.drainReady()
		case <-rn.inbox.ready:
			rn.onControls()
		case <-rn.timer.C:
			rn.armedAt = time.Time{}
			if !rn.queueTimerFired() {
				rn.step(failover.Event{Kind: failover.EvTick})
			}
		case <-rn.clientDone:
			rn.clientDone = nil
			rn.step(rn.clientGone())
		}
	}
	// When nothing is left to read before the handler returns, the last events are not
	// flushed here: the server writes them with the chunked body's end, in one write
	// (clientWriter.finish). teardown, which runs first, then waits for nothing.
	rn.cw.finish(rn.nothingLeftToRead())
	return rn.rec.end
}

// nothingLeftToRead reports whether the request's one attempt was answered with a
// response whose body has been read to its end, so that teardown reads nothing more of
// the engine before the handler returns.
func (rn *Run) nothingLeftToRead() bool {
	rn.owner.check()
	if len(rn.atts.all) != 1 {
		return false
	}
	resp := rn.atts.all[0].resp
	return resp != nil && resp.Ended()
}

// drainReady handles upstream reports that are already waiting, so that they go out in
// one flush when the client has fallen behind.
func (rn *Run) drainReady() {
	rn.owner.check()
	for i := 0; i < 16 && !rn.m.Done(); i++ {
		select {
		case msg := <-rn.atts.up:
			rn.onUpstream(msg)
		default:
			return
		}
	}
}

// teardown runs after the terminal action: every attempt has ended (the machine ends each
// one it dispatched); the readers are waited for and the responses closed, so a completed
// answer's connection is back in the engine client's pool before the client sees the end
// of its response.
func (rn *Run) teardown() {
	rn.owner.check()
	rn.timer.Stop()
	rn.leaveQueue()
	now := rn.now()
	for _, a := range rn.atts.all {
		if !a.ended {
			rn.srv.Log().Error("attempt still running when its request ended; closing it", "request_id", rn.p.ID, "attempt", a.id)
			rn.endAttempt(failover.Action{Kind: failover.ActEndAttempt, Attempt: a.n, Reason: failover.EndRequestEnded, Cancel: true}, now)
		}
	}
	rn.atts.readers.Wait()
	rn.closeResponses()
}

// onControls handles everything posted to the inbox.
func (rn *Run) onControls() {
	rn.owner.check()
	rn.controls = rn.inbox.take(rn.controls[:0])
	for _, c := range rn.controls {
		if rn.m.Done() {
			break
		}
		switch c.kind {
		case ctlAttemptFailed:
			if rn.live(c.a) {
				rn.failAttempt(c.a, c.failure, nil)
			}
		case ctlFenced:
			rn.step(failover.Event{Kind: failover.EvFenced, Attempt: c.a.n, Reason: c.reason})
		case ctlShutdown:
			rn.step(failover.Event{Kind: failover.EvAbort, Reason: failover.EndGatewayShutdown, Err: shutdownError()})
		case ctlPromptTokens:
			rn.promptCounted(c.tokens)
		case ctlQueue:
			rn.queueDecided(c.a)
		}
	}
	clear(rn.controls)
}

// clientGone is the event of the client going away. A write that hit its deadline also
// cancels the request's context (both servers do so on any write error), so however the
// owner learns of it, the write error says whether the client stalled or left.
func (rn *Run) clientGone() failover.Event {
	rn.owner.check()
	return failover.Event{Kind: failover.EvClientGone, Stalled: rn.cw.stalled}
}

// queue adds a follow-up event to the current step.
func (rn *Run) queue(ev failover.Event) {
	rn.owner.check()
	rn.pending = append(rn.pending, ev)
}

// step feeds one event to the machine and performs the resulting actions, then any
// follow-up events those actions produced, in order.
func (rn *Run) step(ev failover.Event) {
	rn.owner.check()
	rn.stepAt(ev, rn.now()) // one reading per step: its follow-up events happen at the same instant
}

// resume runs f, which queues the events to step (an attempt granted a slot after it
// waited in the queue is dispatched there), then steps them and their follow-ups as step
// does.
func (rn *Run) resume(f func(now time.Time)) {
	rn.owner.check()
	rn.resumeAt(f, rn.now()) // one reading per step: its follow-up events happen at the same instant
}

// stepAt is step at a time already read: the events of one read of the engine are
// stepped at the time it returned, with one reading of the clock for all of them.
func (rn *Run) stepAt(ev failover.Event, now time.Time) {
	rn.owner.check()
	rn.pending = append(rn.pending, ev)
	rn.resumeAt(nil, now)
}

// resumeAt is resume at a time already read; f may be nil (the events are queued).
func (rn *Run) resumeAt(f func(now time.Time), now time.Time) {
	if f != nil {
		f(now)
	}
	for i := 0; i < len(rn.pending); i++ {
		for _, a := range rn.m.Step(rn.pending[i], now) {
			rn.perform(a, now)
		}
	}
	clear(rn.pending)
	rn.pending = rn.pending[:0]
	rn.rearm()
}

// perform carries out one action of the machine.
func (rn *Run) perform(a failover.Action, now time.Time) {
	rn.owner.check()
	switch a.Kind {
	case failover.ActStartAttempt:
		if a.Rerun {
			var after failover.EndReason
			if infos := rn.m.Attempts(); len(infos) > 0 {
				after = infos[len(infos)-1].EndReason
			}
			rn.srv.Metrics().Rerun(rn.rec.model, after)
		}
		rn.startAttempt(a.Attempt, now)
	case failover.ActEndAttempt:
		rn.endAttempt(a, now)
	case failover.ActSendHeaders:
		rn.cw.streamHeaders()
	case failover.ActKeepalive:
		rn.rec.keepalive()
		rn.cw.write(sse.KeepaliveEvent)
	case failover.ActTryRerun, failover.ActRecordBoundary:
		rn.answer(a, now)
	case failover.ActMarkFirstDelta:
		rn.markFirstDelta(now)
	case failover.ActHold:
		rn.shape.hold()
	case failover.ActDiscardHeld:
		rn.shape.discardHeld()
	case failover.ActWriteHeld:
		rn.cw.write(rn.shape.held)
		rn.shape.heldWritten()
	case failover.ActWrite:
		if !rn.p.Req.Stream {
			rn.cw.bodyHeaders(len(rn.shape.raw))
		}
		rn.cw.write(rn.shape.raw)
		rn.shape.sent(rn.shape.curSeq)
	case failover.ActFinish:
		if a.WriteDone {
			rn.cw.write(rn.shape.done())
		}
		rn.finish(a.Outcome, nil, now)
	case failover.ActFail:
		rn.fail(&a, now)
	}
}

// answer queues the answer to the machine's question a, which is stepped before any other
// event: whether the pool's rerun budget grants a rerun (shared by the pool's requests,
// docs/design.md §3), or the delivery boundary's record, once the event that crosses it
// is parked. perform's rarer cases are functions of their own, kept out of its frame:
// it is on the deepest paths a stream takes (docs/performance.md, "Memory per idle
// stream").
//
//go:noinline
func (rn *Run) answer(a failover.Action, now time.Time) {
	if a.Kind == failover.ActTryRerun {
		rn.queue(failover.Event{Kind: failover.EvRerunBudget, Attempt: a.Attempt, Granted: rn.pool.TryRerun(now)})
		return
	}
	rn.queue(rn.recordBoundary(now))
}

// fail writes the machine's error a to the client and ends the request.
//
//go:noinline
func (rn *Run) fail(a *failover.Action, now time.Time) {
	if a.Err.RetryAfter == 0 && (a.Err.Status == http.StatusTooManyRequests || a.Err.Status == http.StatusServiceUnavailable) {
		a.Err.RetryAfter = rn.pool.RetryAfter(now)
	}
	rn.cw.writeError(rn.shape.proto, a.Err, a.AsEvent, rn.shape.st)
	rn.finish(a.Outcome, a.Err, now)
}

// rearm points the deadline timer at the machine's next deadline when that is earlier than
// what the timer waits for. Deadlines that move later are found when the timer fires, so
// the token path never resets a timer.
func (rn *Run) rearm() {
	rn.owner.check()
	d := rn.m.Deadline()
	if u := rn.wait.until; rn.wait.a != nil && (d.IsZero() || u.Before(d)) {
		d = u // the wait in the queue ends then, unless the pool decides before
	}
	if d.IsZero() || rn.m.Done() {
		return
	}
	if !rn.armedAt.IsZero() && !d.Before(rn.armedAt) {
		return
	}
	rn.armedAt = d
	wait := d.Sub(rn.now())
	if rn.atts.inline != nil {
		rn.wakeAt = time.Now().Add(wait)
		return
	}
	rn.timer.Reset(wait)
}
