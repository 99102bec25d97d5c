package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/fencegate/fencegate/internal/failover"
	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/sse"
	"github.com/fencegate/fencegate/internal/store"
)

// run drives one logical request: it performs the failover machine's actions and feeds it
// what the upstream and the client do. One goroutine (the handler's) reads the upstream;
// the deadline timer's goroutine only sends EvTick. Both hold mu while they step the
// machine or write to the client, so the machine and the response are never used
// concurrently.
type run struct {
	s    *Server
	w    http.ResponseWriter
	rc   *http.ResponseController
	r    *http.Request
	req  *openai.Request
	pool *pool

	mu sync.Mutex
	m  *failover.Machine
	// id is the logical request id; attemptBase offsets attempt numbers when this gateway
	// took the request over from one that died (its attempts keep their numbers).
	id           string
	model        string
	attemptBase  int
	affinity     uint64 // prefix-affinity key of the prompt (0: none)
	start        time.Time
	revision     string // weights revision of the replica serving the current attempt
	slowCounted  bool
	traceSeq     int64
	tokenized    bool // promptTokens is known (counted by an engine, or estimated)
	promptTokens int
	// keyed requests (Idempotency-Key) record the boundary synchronously and keep the
	// response for replay.
	keyed          bool
	replay         []byte
	replayOverflow bool
	status         int // HTTP status sent to the client

	cur       *attempt // the attempt the machine last started
	attempts  []*attempt
	pending   []failover.Event // follow-up events produced while performing actions
	raw       []byte           // the event (or body) the current Step is about
	held      []byte           // held events of the current attempt
	rewritten []byte           // an event the gateway had to rewrite (see chunk)
	writeErr  error
	dirty     bool // bytes written since the last flush

	timer   *time.Timer
	armedAt time.Time
	// wake is signalled after every step; serve waits on it while an uncertain attempt is
	// being fenced.
	wake *sync.Cond
}

// attempt is one try on one replica.
type attempt struct {
	n         int
	id        string
	replica   string
	url       string
	ctx       context.Context
	cancel    context.CancelFunc
	ended     bool
	rec       store.Attempt
	completed bool // ended with the request's answer; its connection may be reused
	// link is the replica's agent (nil in direct mode); epoch the attempt's lease epoch.
	link  *agentLink
	epoch uint64
}

func (rn *run) now() time.Time { return rn.s.now() }

// step feeds one event to the machine and performs the resulting actions, then any
// follow-up events those actions produced. Callers hold mu.
func (rn *run) step(ev failover.Event) {
	rn.pending = append(rn.pending, ev)
	for i := 0; i < len(rn.pending); i++ {
		ev := rn.pending[i]
		now := rn.now()
		for _, a := range rn.m.Step(ev, now) {
			rn.perform(a, now)
		}
	}
	rn.pending = rn.pending[:0]
	rn.rearm()
	rn.wake.Broadcast()
}

// perform carries out one action of the machine.
func (rn *run) perform(a failover.Action, now time.Time) {
	switch a.Kind {
	case failover.ActStartAttempt:
		if a.Rerun {
			rn.s.metrics.reruns.WithLabelValues(rn.model).Inc()
		}
		rn.startAttempt(a.Attempt, now)
	case failover.ActCancelAttempt:
		rn.endAttempt(a.Attempt, now, a.Reason, true, a.AwaitFence)
	case failover.ActSendHeaders:
		h := rn.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		rn.w.WriteHeader(http.StatusOK)
		rn.status = http.StatusOK
		rn.dirty = true
	case failover.ActKeepalive:
		if !rn.slowCounted {
			rn.slowCounted = true
			rn.s.metrics.softTimeouts.WithLabelValues(rn.model).Inc()
		}
		rn.write(sse.KeepaliveEvent)
		rn.flush()
	case failover.ActMarkFirstDelta:
		// Recorded before the write that follows (DESIGN §2). A keyed request's latch was
		// made durable before the machine saw the event (see recordBoundary); the journal
		// write here is asynchronous, off the token path.
		rn.update(store.UpdateRequest{At: now, Phase: store.PhaseStreaming, FirstDeltaSent: true, ModelRevision: rn.revision})
		if rn.cur != nil {
			rn.pool.notePrefix(rn.affinity, rn.cur.replica, now) // it prefilled the prompt
		}
		rn.s.metrics.observeFirstDelta(rn.model, rn.start, now)
		rn.trace(now, "first_delta", nil)
	case failover.ActHold:
		rn.held = append(rn.held, rn.raw...)
	case failover.ActDiscardHeld:
		rn.held = rn.held[:0]
	case failover.ActWriteHeld:
		rn.write(rn.held)
		rn.held = rn.held[:0]
	case failover.ActWrite:
		if !rn.req.Stream {
			rn.w.Header().Set("Content-Type", "application/json")
			rn.w.Header().Set("Content-Length", strconv.Itoa(len(rn.raw)))
			rn.w.WriteHeader(http.StatusOK)
			rn.status = http.StatusOK
		}
		rn.write(rn.raw)
	case failover.ActFinish:
		if a.WriteDone {
			rn.write(sse.DoneEvent)
		}
		rn.finish(a.Outcome, nil, now)
	case failover.ActFail:
		rn.writeError(a.Err, a.AsEvent)
		rn.finish(a.Outcome, a.Err, now)
	}
}

// startAttempt chooses a replica for attempt n (never one this request already tried) and
// reports the choice to the machine.
func (rn *run) startAttempt(n int, now time.Time) {
	a := &attempt{n: n}
	p := rn.pool.acquire(now, rn, a, rn.affinity)
	if !p.ok {
		reason := ""
		if p.shed {
			reason = failover.NoReplicaOverloaded
			rn.s.metrics.shed.WithLabelValues(rn.model).Inc()
		}
		rn.pending = append(rn.pending, failover.Event{Kind: failover.EvNoReplica, Attempt: n, Reason: reason})
		return
	}
	num := rn.attemptBase + n
	a.id, a.replica, a.url = store.AttemptID(rn.id, num), p.name, p.url
	a.ctx, a.cancel = context.WithCancel(rn.r.Context())
	name := p.name
	rn.revision = rn.pool.revision(name)
	if a.link = rn.s.agents[name]; a.link != nil {
		a.epoch = a.link.grant(a.id, now)
	}
	a.rec = store.Attempt{ID: a.id, RequestID: rn.id, N: num, Replica: name, StartedAt: now, LeaseEpoch: a.epoch}
	rn.cur = a
	rn.attempts = append(rn.attempts, a)
	if rn.keyed {
		// A keyed request may be taken over by another gateway if this one dies; the new
		// owner must know every attempt that was started, so that it numbers its own after
		// them and can tell which replica may still be running one.
		ctx, cancel := context.WithTimeout(context.Background(), boundaryWriteTimeout)
		err := rn.s.store.Apply(ctx, []store.Mutation{store.UpsertAttempt{Attempt: a.rec}})
		cancel()
		if err != nil {
			rn.s.log.Warn("attempt not journaled", "request_id", rn.id, "err", err)
			rn.pending = append(rn.pending, failover.Event{Kind: failover.EvAbort, Reason: "journal_unavailable",
				Err: &openai.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "journal_unavailable",
					Message: "the request journal is unavailable, so the attempt was not started: " + err.Error()}})
			return
		}
	} else {
		rn.s.journal.Submit(store.UpsertAttempt{Attempt: a.rec})
	}
	rn.update(store.UpdateRequest{At: now, Phase: store.PhaseRouting})
	rn.trace(now, "attempt_started", attemptTrace{Attempt: a.id, Replica: name, Epoch: a.epoch, Revision: rn.revision})
	rn.pending = append(rn.pending, failover.Event{Kind: failover.EvDispatched, Attempt: n, Replica: name, Fenceable: a.link != nil})
}

// endAttempt closes attempt n's upstream connection and releases its replica. cancel says
// whether the gateway itself fenced it (as opposed to the attempt completing); awaitFence
// that a rerun waits for proof that it stopped (its agent's cancel ack or lease expiry).
func (rn *run) endAttempt(n int, now time.Time, reason string, cancel, awaitFence bool) {
	for _, a := range rn.attempts {
		if a.n != n || a.ended {
			continue
		}
		a.ended = true
		if cancel {
			a.cancel()
		} else {
			// Completed: its reader drains the response so that the connection goes back
			// to the pool, then cancels (see runAttempt).
			a.completed = true
		}
		rn.pool.release(a.replica, a)
		a.rec.EndedAt = now
		a.rec.EndReason = reason
		a.rec.CancelSent = cancel
		if infos := rn.m.Attempts(); len(infos) >= n && infos[n-1].Failure != 0 {
			a.rec.Failure = infos[n-1].Failure.String()
		}
		end := a.rec.Failure
		if end == "" {
			end = "completed"
			if cancel {
				end = "cancelled"
			}
		}
		rn.s.metrics.attempts.WithLabelValues(rn.model, a.replica, end).Inc()
		rn.trace(now, "attempt_ended", attemptTrace{Attempt: a.id, Replica: a.replica, EndReason: reason, Failure: a.rec.Failure})
		rn.s.journal.Submit(store.UpsertAttempt{Attempt: a.rec})
		if a.link != nil {
			rn.releaseLease(a, cancel, awaitFence)
		}
	}
}

func (rn *run) finish(o failover.Outcome, e *openai.Error, now time.Time) {
	for _, a := range rn.attempts {
		if !a.ended {
			rn.endAttempt(a.n, now, "completed", false, false)
		}
	}
	u := store.UpdateRequest{At: now, Phase: store.PhaseDone, Outcome: store.Outcome(o.String()),
		DeliveredOutputTokens: int64(rn.m.Delivered())}
	rn.s.metrics.requests.WithLabelValues(rn.model, o.String()).Inc()
	rn.s.metrics.delivered.WithLabelValues(rn.model).Add(float64(rn.m.Delivered()))
	if e != nil {
		u.Error = e.AppendJSON(nil)
	}
	if rn.keyed && !rn.replayOverflow && o != failover.Cancelled {
		u.Response, u.ResponseIsSSE, u.ResponseStatus = rn.replay, rn.req.Stream, rn.status
	}
	// Traced before the final update, so a reader that sees the outcome sees every trace.
	rn.trace(now, "finished", map[string]any{"outcome": o.String(), "delivered_output_tokens": rn.m.Delivered(), "error": json.RawMessage(u.Error)})
	rn.update(u)
	if rn.timer != nil {
		rn.timer.Stop()
	}
}

// update journals a change of the logical request, fenced by this gateway's ownership.
func (rn *run) update(u store.UpdateRequest) {
	u.ID, u.Owner = rn.id, rn.s.gatewayID
	rn.s.journal.Submit(u)
}

func (rn *run) write(b []byte) {
	if rn.writeErr != nil || len(b) == 0 {
		return
	}
	_, rn.writeErr = rn.w.Write(b)
	rn.dirty = true
	if rn.keyed && !rn.replayOverflow {
		if len(rn.replay)+len(b) > rn.s.cfg.Idempotency.MaxReplayBytes {
			rn.replayOverflow, rn.replay = true, nil
		} else {
			rn.replay = append(rn.replay, b...)
		}
	}
}

func (rn *run) flush() {
	if !rn.dirty || rn.writeErr != nil {
		return
	}
	rn.dirty = false
	if err := rn.rc.Flush(); err != nil {
		rn.writeErr = err
	}
}

// writeError answers with e: a final SSE event when headers went out (no [DONE]),
// otherwise an HTTP error response.
func (rn *run) writeError(e *openai.Error, asEvent bool) {
	if asEvent {
		rn.write(sse.AppendData(nil, e.AppendJSON(nil)))
		return
	}
	if e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable {
		rn.w.Header().Set("Retry-After", "1")
	}
	body := e.AppendJSON(nil)
	rn.status = e.Status
	openai.WriteError(rn.w, e)
	rn.dirty = true
	if rn.keyed {
		rn.replay = body
	}
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
	wait := d.Sub(rn.now())
	if rn.timer == nil {
		rn.timer = time.AfterFunc(wait, rn.onTimer)
	} else {
		rn.timer.Reset(wait)
	}
}

func (rn *run) onTimer() {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if rn.m.Done() {
		return
	}
	rn.armedAt = time.Time{}
	rn.step(failover.Event{Kind: failover.EvTick})
	rn.flush()
	rn.checkClient()
}

// checkClient turns a failed write into "the client went away".
func (rn *run) checkClient() {
	if rn.writeErr != nil && !rn.m.Done() {
		rn.step(failover.Event{Kind: failover.EvClientGone})
	}
}
