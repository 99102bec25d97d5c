package request

import (
	"context"
	"time"

	"github.com/fencegate/fencegate/internal/failover"
	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/store"
	"go.opentelemetry.io/otel/trace"
)

// recorder is what is kept of a request besides its answer: its journal record (fenced by
// this gateway's ownership), its trace document, its spans, its metrics, and the End the
// access log and the key's limits read. Every update is per request or per attempt, never
// per token.
type recorder struct {
	srv   Server
	id    string
	model string
	start time.Time
	// firstDeltaAt is when the delivery boundary was crossed (zero: not yet).
	firstDeltaAt time.Time
	span         trace.Span
	spanCtx      context.Context
	// slowCounted: the request was counted as slow to its first token (its first
	// keepalive).
	slowCounted bool
	// trace keeps what the request's trace document needs (nil: traces are off for it).
	trace *requestTrace
	end   End
}

// End is how a request ended, as the access log and the key's limits need it.
type End struct {
	Outcome failover.Outcome
	// ErrCode is the code of the error the client got ("" : none).
	ErrCode string
	// Attempts is the number of attempts; Replica the last one's replica.
	Attempts int
	Replica  string
	// TTFT is the time to first token (0: no output was delivered).
	TTFT time.Duration
	// Delivered is the number of output tokens the client received.
	Delivered int
	// Queued is how long the request waited in its pool's queue (TTFT includes it).
	Queued time.Duration
}

// update journals a change of the logical request, fenced by this gateway's ownership.
func (rc *recorder) update(u *store.UpdateRequest) {
	u.ID, u.Owner = rc.id, rc.srv.ID()
	rc.srv.Journal().Submit(*u)
}

// keepalive counts the request as slow to its first token, once.
func (rc *recorder) keepalive() {
	if !rc.slowCounted {
		rc.slowCounted = true
		rc.srv.Metrics().SlowFirstToken(rc.model)
	}
}

// attemptEnded records the end of attempt a (the machine's act): its journal record, its
// metric and its span. info is the machine's record of it, if it was dispatched.
func (rc *recorder) attemptEnded(a *Attempt, act failover.Action, info failover.AttemptInfo, dispatched bool, now time.Time) {
	a.rec.EndedAt = now
	a.rec.EndReason = string(act.Reason)
	a.rec.CancelSent = act.Cancel
	if dispatched {
		if info.Failure != 0 {
			a.rec.Failure = info.Failure.String()
		}
		a.rec.EngineMayHaveActed = info.EngineMayHaveActed
	}
	end := a.rec.Failure
	if end == "" {
		end = failover.Completed.String()
		if act.Cancel {
			end = failover.Cancelled.String()
		}
	}
	rc.srv.Metrics().AttemptEnded(rc.model, a.replica, end)
	rc.srv.Journal().Submit(store.UpsertAttempt{Attempt: a.rec})
	endAttemptSpan(a, string(act.Reason), a.rec.Failure, act.Cancel)
}

// markFirstDelta records the crossing of the delivery boundary (the machine's
// ActMarkFirstDelta), before the write that follows (docs/design.md §2). A keyed request's
// boundary is already durable (ActRecordBoundary); this journal write is asynchronous, off
// the token path.
func (rn *Run) markFirstDelta(now time.Time) {
	rn.owner.check()
	cur := rn.atts.cur
	u := store.UpdateRequest{At: now, Phase: store.PhaseStreaming, FirstDeltaSent: true, FirstDeltaAt: now}
	if cur != nil {
		u.ModelRevision = cur.rec.ModelRevision
		if rn.shape.st.ResponseID != "" {
			// The client now knows this response id; a request that continues it must run
			// where the engine stored it.
			u.ResponseID, u.ResponseReplica = rn.shape.st.ResponseID, cur.replica
		}
	}
	rn.rec.update(&u)
	if u.ResponseID != "" && rn.p.Req.Store {
		// Durable before the client sees the id, or a client that continues at once
		// could find the journal without it and be routed where the state is not.
		rn.flushJournal("response id", u.ResponseID)
	}
	if cur != nil {
		rn.pool.NotePrefix(rn.p.Affinity, cur.replica, now) // it prefilled the prompt
	}
	rn.srv.Metrics().FirstDelta(rn.rec.model, now.Sub(rn.rec.start))
	rn.rec.firstDeltaAt = now
	if cur != nil && cur.span != nil {
		cur.span.AddEvent("first_delta")
	}
}

// flushJournal makes what the journal holds durable now, logging at WARN that what (with
// the response id, if any) is not yet durable when that fails within SyncWriteTimeout. A function of its
// own: its frame is not on the stack under the journal's update, on the deepest paths a
// stream takes (docs/performance.md, "Memory per idle stream").
//
//go:noinline
func (rn *Run) flushJournal(what, responseID string) {
	ctx, cancel := context.WithTimeout(context.Background(), SyncWriteTimeout)
	defer cancel()
	err := rn.srv.Journal().Flush(ctx)
	switch {
	case err == nil:
	case responseID != "":
		rn.srv.Log().Warn(what+" not yet durable", "request_id", rn.p.ID, "response_id", responseID, "err", err)
	default:
		rn.srv.Log().Warn(what+" not yet durable", "request_id", rn.p.ID, "err", err)
	}
}

// finish journals how the request ended (the machine's terminal action) and notes its End.
func (rn *Run) finish(o failover.Outcome, e *openai.Error, now time.Time) {
	rn.owner.check()
	rc := &rn.rec
	delivered := rn.m.Delivered()
	rc.end = End{Outcome: o, Attempts: len(rn.atts.all), Delivered: delivered, Queued: rn.queued(now)}
	if cur := rn.atts.cur; cur != nil {
		rc.end.Replica = cur.replica
	}
	if !rc.firstDeltaAt.IsZero() {
		rc.end.TTFT = rc.firstDeltaAt.Sub(rc.start)
	}
	if e != nil {
		rc.end.ErrCode = e.Code
	}
	u := store.UpdateRequest{At: now, Phase: store.PhaseDone, Outcome: store.Outcome(o.String()),
		DeliveredOutputTokens: int64(delivered), QueuedMs: rc.end.Queued.Milliseconds()}
	rn.srv.Metrics().RequestEnded(rc.model, rn.p.Req.Endpoint, o, delivered)
	if e != nil {
		u.Error = e.AppendJSON(nil)
	}
	if rn.p.Keyed && o != failover.Cancelled && o != failover.ClientStalled {
		if resp, ok := rn.cw.replay.response(); ok {
			u.Response, u.ResponseIsSSE, u.ResponseStatus = resp, rn.p.Req.Stream, rn.cw.status
		}
	}
	// Journaled before the final update, so a reader that sees the outcome sees the trace.
	rn.journalTrace(o, &u, now)
	rc.endRequestSpan(o.String(), rc.end.ErrCode, len(rn.atts.all), delivered, rn.m.Committed())
	rc.update(&u)
	if rn.p.Keyed {
		// The outcome of a keyed request is durable before its client sees the end of the
		// response, so that a retry with the same key finds it done and gets the replay.
		rn.flushJournal("outcome of a keyed request", "")
	}
}
