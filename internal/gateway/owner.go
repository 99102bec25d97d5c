package gateway

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/fencegate/fencegate/internal/config"
	"github.com/fencegate/fencegate/internal/failover"
	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/protocol"
	"github.com/fencegate/fencegate/internal/sse"
	"github.com/fencegate/fencegate/internal/store"
	"go.opentelemetry.io/otel/trace"
)

// run is one logical request and its owner loop (docs/design.md §6). The handler's
// goroutine owns it: it alone steps the failover machine, writes to the client and touches
// the request's journal record. Everything else reports to it — each attempt's reader over
// up, and the timer, the client leaving, fence acks, heartbeat loss, the admin endpoint,
// Drain and the tokenize call through inbox — so nothing is shared under a lock, and no
// sender ever waits for the owner, which may be busy writing to a slow client.
type run struct {
	s    *Server
	cfg  *config.Config // the configuration the request started with
	r    *http.Request
	req  *openai.Request
	pool *pool
	m    *failover.Machine
	cw   *clientWriter

	up      chan upMsg
	inbox   *inbox
	readers sync.WaitGroup
	timer   *time.Timer
	armedAt time.Time // what the timer was last set to (zero: stopped or fired)

	// id is the logical request id; attemptBase offsets attempt numbers when this gateway
	// took the request over from one that died (its attempts keep their numbers).
	id           string
	model        string
	attemptBase  int
	affinity     uint64 // prefix-affinity key of the prompt (0: none)
	start        time.Time
	firstDeltaAt time.Time // when the delivery boundary was crossed (zero: not yet)
	span         trace.Span
	spanCtx      context.Context
	revision     string // weights revision of the replica serving the current attempt
	slowCounted  bool
	// trace keeps what the request's trace document needs (nil: traces are off for it).
	trace *requestTrace
	// done is closed when the owner loop has ended and the final journal update was
	// submitted (a waiting GET /admin/requests/{id}/trace reads the journal then).
	done chan struct{}
	// promptTokens is the prompt's size for the rerun cost: an engine's count once it
	// answered, the estimate until then. waitCount: the first attempt waits for the count
	// (see countPromptTokens).
	promptTokens int
	waitCount    bool
	// keyed requests (Idempotency-Key) record the boundary synchronously and keep the
	// response for replay.
	keyed bool
	// members are the request body's top-level members (openai.Parse), spans of its bytes.
	members openai.Members
	// wantUsage: ask engines that can (usagePerChunk) for usage in every chunk, to count
	// delivered tokens; usageBodyCache is the request body that asks for it.
	wantUsage      bool
	usageBodyCache *engineBody

	// proto is the API's wire format; st what its final events need to know of the
	// stream (the Responses API numbers its events). curSeq and heldSeq are the sequence
	// numbers of the current event and of the last held one (-1: none).
	proto   sse.Protocol
	st      protocol.Stream
	curSeq  int64
	heldSeq int64

	// pinned is the one replica this request may run on: a Responses request continues a
	// response stored there (previous_response_id).
	pinned string

	cur      *attempt // the attempt the machine last started
	attempts []*attempt
	// pending are the events still to step in the current step: follow-ups that actions
	// produced (EvDispatched, EvBoundaryRecorded, ...).
	pending   []failover.Event
	raw       []byte // the event (or body) the current step is about
	held      []byte // held events of the current attempt
	rewritten []byte // an event the gateway had to rewrite (see onEvent)
	stripped  []byte // an event's data without the usage the gateway asked for
	controls  []control
	handBack  []*attempt // attempts whose read buffer the owner still holds
}

// upDepth is the number of reports an attempt's reader may have waiting for its owner: a
// read and the end of the stream that came with it.
const upDepth = 2

func newRun(s *Server, cfg *config.Config, w http.ResponseWriter, r *http.Request, req *openai.Request, p *pool, id string, now time.Time) *run {
	return &run{
		s: s, cfg: cfg, r: r, req: req, pool: p, id: id, model: req.Model, start: now,
		cw:    newClientWriter(w, cfg.Policy.ClientWriteTimeout.D()),
		proto: protocolOf(req.Endpoint), curSeq: -1, heldSeq: -1,
		up:    make(chan upMsg, upDepth),
		inbox: newInbox(),
		done:  make(chan struct{}),
	}
}

func (rn *run) now() time.Time { return rn.s.now() }

// serve is the owner loop: it runs the machine from EvStart to its terminal action,
// flushing the client once per batch of events that were ready together.
func (rn *run) serve() {
	rn.timer = time.NewTimer(time.Hour)
	rn.timer.Stop()
	defer rn.teardown()
	clientGone := rn.r.Context().Done()
	if rn.waitCount = rn.countPromptTokens(); !rn.waitCount {
		rn.step(failover.Event{Kind: failover.EvStart})
	}
	for !rn.m.Done() {
		rn.cw.flush()
		rn.handBackBuffers()
		if rn.cw.err != nil {
			rn.step(rn.clientGone())
			break
		}
		select {
		case msg := <-rn.up:
			rn.onUpstream(msg)
			rn.drainReady()
		case <-rn.inbox.ready:
			rn.onControls()
		case <-rn.timer.C:
			rn.armedAt = time.Time{}
			rn.step(failover.Event{Kind: failover.EvTick})
		case <-clientGone:
			clientGone = nil
			rn.step(rn.clientGone())
		}
	}
	rn.cw.flush()
}

// handBackBuffers returns the buffers of the reads handled since the last flush to their
// readers, which may then read again.
func (rn *run) handBackBuffers() {
	for _, a := range rn.handBack {
		select {
		case a.bufBack <- struct{}{}:
		default: // the reader stopped
		}
	}
	clear(rn.handBack)
	rn.handBack = rn.handBack[:0]
}

// drainReady handles upstream reports that are already waiting, so that they go out in
// one flush when the client has fallen behind.
func (rn *run) drainReady() {
	for i := 0; i < 16 && !rn.m.Done(); i++ {
		select {
		case msg := <-rn.up:
			rn.onUpstream(msg)
		default:
			return
		}
	}
}

// teardown runs after the terminal action: every attempt has ended (the machine ends each
// one it dispatched); the readers are waited for, so a completed answer's connection is
// back in the transport's pool before the client sees the end of its response.
func (rn *run) teardown() {
	rn.timer.Stop()
	now := rn.now()
	for _, a := range rn.attempts {
		if !a.ended {
			rn.s.log.Error("attempt still running when its request ended; closing it", "request_id", rn.id, "attempt", a.id)
			rn.endAttempt(failover.Action{Kind: failover.ActEndAttempt, Attempt: a.n, Reason: "request_ended", Cancel: true}, now)
		}
	}
	rn.readers.Wait()
}

// onControls handles everything posted to the inbox.
func (rn *run) onControls() {
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
		case ctlAbort:
			rn.step(failover.Event{Kind: failover.EvAbort, Reason: c.reason, Err: c.err})
		case ctlPromptTokens:
			if c.tokens > 0 {
				rn.promptTokens = c.tokens
			}
			if rn.waitCount {
				rn.waitCount = false
				rn.step(failover.Event{Kind: failover.EvStart})
			}
		}
	}
	clear(rn.controls)
}

// clientGone is the event of the client going away. A write that hit its deadline also
// cancels the request's context (net/http does so on any write error), so however the
// owner learns of it, the write error says whether the client stalled or left.
func (rn *run) clientGone() failover.Event {
	return failover.Event{Kind: failover.EvClientGone, Stalled: rn.cw.stalled}
}

// queue adds a follow-up event to the current step.
func (rn *run) queue(ev failover.Event) { rn.pending = append(rn.pending, ev) }

// step feeds one event to the machine and performs the resulting actions, then any
// follow-up events those actions produced, in order.
func (rn *run) step(ev failover.Event) {
	rn.pending = append(rn.pending, ev)
	now := rn.now() // one reading per step: its follow-up events happen at the same instant
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
func (rn *run) perform(a failover.Action, now time.Time) {
	switch a.Kind {
	case failover.ActStartAttempt:
		if a.Rerun {
			reason := ""
			if infos := rn.m.Attempts(); len(infos) > 0 {
				reason = infos[len(infos)-1].EndReason
			}
			rn.s.metrics.reruns.WithLabelValues(rn.model, reason).Inc()
		}
		rn.startAttempt(a.Attempt, now)
	case failover.ActEndAttempt:
		rn.endAttempt(a, now)
	case failover.ActSendHeaders:
		rn.cw.streamHeaders()
	case failover.ActKeepalive:
		if !rn.slowCounted {
			rn.slowCounted = true
			rn.s.metrics.softTimeouts.WithLabelValues(rn.model).Inc()
		}
		rn.cw.write(sse.KeepaliveEvent)
	case failover.ActRecordBoundary:
		// The machine parked the event that crosses the boundary; it is delivered when
		// the answer below is stepped, which must come before any other event.
		rn.queue(rn.recordBoundary(now))
	case failover.ActMarkFirstDelta:
		// Recorded before the write that follows (docs/design.md §2). A keyed request's
		// boundary is already durable (ActRecordBoundary); this journal write is
		// asynchronous, off the token path.
		u := store.UpdateRequest{At: now, Phase: store.PhaseStreaming, FirstDeltaSent: true, ModelRevision: rn.revision}
		if rn.st.ResponseID != "" && rn.cur != nil {
			// The client now knows this response id; a request that continues it must run
			// where the engine stored it.
			u.ResponseID, u.ResponseReplica = rn.st.ResponseID, rn.cur.replica
		}
		rn.update(u)
		if u.ResponseID != "" && rn.req.Store {
			// Durable before the client sees the id, or a client that continues at once
			// could find the journal without it and be routed where the state is not.
			ctx, cancel := context.WithTimeout(context.Background(), boundaryWriteTimeout)
			if err := rn.s.journal.Flush(ctx); err != nil {
				rn.s.log.Warn("response id not yet durable", "request_id", rn.id, "response_id", u.ResponseID, "err", err)
			}
			cancel()
		}
		if rn.cur != nil {
			rn.pool.notePrefix(rn.affinity, rn.cur.replica, now) // it prefilled the prompt
		}
		rn.s.metrics.observeFirstDelta(rn.model, rn.start, now)
		rn.firstDeltaAt = now
		if rn.cur != nil && rn.cur.span != nil {
			rn.cur.span.AddEvent("first_delta")
		}
	case failover.ActHold:
		rn.held = append(rn.held, rn.raw...)
		rn.heldSeq = max(rn.heldSeq, rn.curSeq)
	case failover.ActDiscardHeld:
		rn.held = rn.held[:0]
		rn.heldSeq = -1
		// The response the discarded events named (response.created) never reaches the
		// client: the final events and the journal name the response of the attempt whose
		// events the client does receive.
		rn.st.ResponseID, rn.st.Model, rn.st.CreatedAt = "", "", 0
	case failover.ActWriteHeld:
		rn.cw.write(rn.held)
		rn.held = rn.held[:0]
		rn.sent(rn.heldSeq)
	case failover.ActWrite:
		if !rn.req.Stream {
			rn.cw.bodyHeaders(len(rn.raw))
		}
		rn.cw.write(rn.raw)
		rn.sent(rn.curSeq)
	case failover.ActFinish:
		if a.WriteDone {
			rn.cw.write(protocol.Done(rn.proto))
		}
		rn.finish(a.Outcome, nil, now)
	case failover.ActFail:
		if a.Err.RetryAfter == 0 && (a.Err.Status == http.StatusTooManyRequests || a.Err.Status == http.StatusServiceUnavailable) {
			a.Err.RetryAfter = rn.pool.retryAfter(now)
		}
		rn.cw.writeError(rn.proto, a.Err, a.AsEvent, rn.st)
		rn.finish(a.Outcome, a.Err, now)
	}
}

// sent notes that the event numbered seq reached the client (the Responses API: the
// gateway's own final events continue the numbering).
func (rn *run) sent(seq int64) {
	if seq >= 0 {
		rn.st.NextSequence = max(rn.st.NextSequence, seq+1)
	}
}

// finish journals how the request ended.
func (rn *run) finish(o failover.Outcome, e *openai.Error, now time.Time) {
	if a := accessOf(rn.r); a != nil {
		a.model, a.endpoint, a.outcome = rn.model, rn.req.Endpoint.String(), o.String()
		a.attempts, a.delivered = len(rn.attempts), rn.m.Delivered()
		if rn.cur != nil {
			a.replica = rn.cur.replica
		}
		if !rn.firstDeltaAt.IsZero() {
			a.ttft = rn.firstDeltaAt.Sub(rn.start)
		}
		if e != nil {
			a.errCode = e.Code
		}
	}
	u := store.UpdateRequest{At: now, Phase: store.PhaseDone, Outcome: store.Outcome(o.String()),
		DeliveredOutputTokens: int64(rn.m.Delivered())}
	rn.s.metrics.requests.WithLabelValues(rn.model, o.String()).Inc()
	rn.s.metrics.delivered.WithLabelValues(rn.model).Add(float64(rn.m.Delivered()))
	if e != nil {
		u.Error = e.AppendJSON(nil)
	}
	if rn.keyed && o != failover.Cancelled && o != failover.ClientStalled {
		if resp, ok := rn.cw.replay.response(); ok {
			u.Response, u.ResponseIsSSE, u.ResponseStatus = resp, rn.req.Stream, rn.cw.status
		}
	}
	// Journaled before the final update, so a reader that sees the outcome sees the trace.
	rn.journalTrace(o, &u, now)
	code := ""
	if e != nil {
		code = e.Code
	}
	rn.endRequestSpan(o.String(), code)
	rn.update(u)
	if rn.keyed {
		// The outcome of a keyed request is durable before its client sees the end of the
		// response, so that a retry with the same key finds it done and gets the replay.
		ctx, cancel := context.WithTimeout(context.Background(), boundaryWriteTimeout)
		if err := rn.s.journal.Flush(ctx); err != nil {
			rn.s.log.Warn("outcome of a keyed request not yet durable", "request_id", rn.id, "err", err)
		}
		cancel()
	}
}

// update journals a change of the logical request, fenced by this gateway's ownership.
func (rn *run) update(u store.UpdateRequest) {
	u.ID, u.Owner = rn.id, rn.s.gatewayID
	rn.s.journal.Submit(u)
}

// rearm points the deadline timer at the machine's next deadline when that is earlier than
// what the timer waits for. Deadlines that move later are found when the timer fires, so
// the token path never resets a timer.
func (rn *run) rearm() {
	d := rn.m.Deadline()
	if d.IsZero() || rn.m.Done() {
		return
	}
	if !rn.armedAt.IsZero() && !d.Before(rn.armedAt) {
		return
	}
	rn.armedAt = d
	rn.timer.Reset(d.Sub(rn.now()))
}
