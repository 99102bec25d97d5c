package request

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fencegate/fencegate/internal/agent"
	"github.com/fencegate/fencegate/internal/failover"
	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/sse"
	"github.com/fencegate/fencegate/internal/store"
	"github.com/fencegate/fencegate/internal/upstream"
	"go.opentelemetry.io/otel/trace"
)

// SyncWriteTimeout bounds the synchronous journal writes of a keyed request: its claim,
// its attempts and its delivery boundary.
const SyncWriteTimeout = 5 * time.Second

// Attempt is one try of a request on one replica. Its fields are the owner's, except
// cancel, stop and completed, which its reader also uses, and box, through which the pool
// reaches the owner (ReplicaLost).
type Attempt struct {
	n       int
	id      string
	replica string
	url     string
	ctx     context.Context
	cancel  context.CancelFunc
	// stop is closed when the attempt ends: its reader stops reporting. completed says
	// the attempt ended with the answer, so its reader drains the connection for reuse.
	stop      chan struct{}
	completed atomic.Bool
	box       *inbox
	// resp is the streamed answer whose body the owner reads (inline.go); nil before its
	// head arrived and once it is closed.
	resp *upstream.Response

	ended bool
	rec   store.Attempt
	dec   sse.Decoder
	// usage: the engine was asked for per-chunk usage (the gateway strips it again);
	// counted is the output tokens counted so far per choice index (below maxCounted),
	// as long as the highest index seen: one entry for most requests, not an array of
	// them in every open stream.
	usage   bool
	counted []int
	key     string // the engine's API key
	// closeAfter: the engine closes the connection after a streamed answer
	// (Pick.ClosesStreams), so the request asks for the connection to be closed and it is
	// never pooled.
	closeAfter bool
	span       trace.Span // the attempt's span
	// ids backs the engine request's X-Request-Id and attempt header values, so that
	// setting them allocates nothing.
	ids [2]string
	// agent is the replica's agent (nil in direct mode); epoch the attempt's lease epoch.
	agent Agent
	epoch uint64
	// req is the engine request the owner sends itself at the top of its loop (send.go),
	// nil once sent.
	req *upstream.Request
}

// Replica is the replica the attempt runs on.
func (a *Attempt) Replica() string { return a.replica }

// startAttempt chooses a replica for attempt n (never one this request already tried),
// sends the request and reports the choice to the machine. When every replica is at its
// capacity the attempt may wait in the pool's queue instead (wait.go): it is sent when
// the pool grants it a slot.
func (rn *Run) startAttempt(n int, now time.Time) {
	rn.owner.check()
	a := &Attempt{n: n, stop: make(chan struct{}), box: rn.inbox}
	var p Pick
	if rn.acquire(a, &p, now) {
		rn.dispatch(a, n, &p, now)
	}
}

// acquire asks the pool for a replica for attempt a, into p. When there is none it tells
// the machine why, or makes the attempt wait in the pool's queue, and reports false. A
// function of its own, as dispatch's halves are: its frame is off the stack when the
// attempt is sent.
//
//go:noinline
func (rn *Run) acquire(a *Attempt, p *Pick, now time.Time) bool {
	var ok bool
	*p, ok = rn.pool.Acquire(now, Want{Affinity: rn.p.Affinity, Blocks: rn.p.Blocks, Pinned: rn.p.Pinned, Attempts: rn.m.Attempts(),
		Class: rn.p.Class, Since: rn.p.Start}, a)
	if ok {
		return true
	}
	var reason failover.EndReason
	switch {
	case p.Queued:
		rn.startWaiting(a, a.n, p.Until, now)
		return false
	case p.QueueFull:
		reason = failover.NoReplicaQueueFull
		rn.srv.Metrics().Shed(rn.rec.model)
	case p.Shed:
		// Also for a pinned request: its replica is there and busy, which is no reason
		// to say the response it continues is gone.
		reason = failover.NoReplicaOverloaded
		rn.srv.Metrics().Shed(rn.rec.model)
	case p.Pinned:
		reason = failover.NoReplicaPinned
	}
	rn.queue(failover.Event{Kind: failover.EvNoReplica, Attempt: a.n, Reason: reason})
	return false
}

// dispatch sends attempt n, a, to the replica p the pool gave it, and reports the choice
// to the machine. Its two halves are functions of their own, so that their frames are
// never on the stack together: this path is the deepest a streaming request's goroutine
// takes, and kept shallower its stack stays half the size for the whole stream
// (docs/performance.md).
func (rn *Run) dispatch(a *Attempt, n int, p *Pick, now time.Time) {
	rn.owner.check()
	if rn.recordAttempt(a, n, p, now) {
		rn.sendAttempt(a, n, p, now)
		rn.rec.update(&store.UpdateRequest{At: now, Phase: store.PhaseRouting})
	}
}

// recordAttempt journals attempt n, a, before it is sent: at once and durably for a keyed
// request, else through the journal's batches. It reports false when the attempt must not
// be sent (the journal could not take it: the request is aborted).
//
//go:noinline
func (rn *Run) recordAttempt(a *Attempt, n int, p *Pick, now time.Time) bool {
	num := rn.p.AttemptBase + n
	a.id, a.replica, a.url = store.AttemptID(rn.p.ID, num), p.Replica, p.URL
	if a.agent = p.Agent; a.agent != nil {
		a.epoch = a.agent.Grant(a.id, now)
	}
	a.rec = store.Attempt{ID: a.id, RequestID: rn.p.ID, N: num, Replica: p.Replica, StartedAt: now, LeaseEpoch: a.epoch, ModelRevision: p.Revision}
	if rn.p.Keyed {
		return rn.writeAttempt(a)
	}
	rn.srv.Journal().Submit(store.UpsertAttempt{Attempt: a.rec})
	return true
}

// writeAttempt writes a keyed request's attempt a to the store before it is sent. A keyed
// request may be taken over by another gateway if this one dies; the new owner must know
// every attempt that was started, so that it numbers its own after them and can tell which
// replica may still be running one. Nothing is sent before the record is written: when it
// cannot be, the request is aborted and writeAttempt reports false.
//
//go:noinline
func (rn *Run) writeAttempt(a *Attempt) bool {
	ctx, cancel := context.WithTimeout(context.Background(), SyncWriteTimeout)
	err := rn.srv.Store().Apply(ctx, []store.Mutation{store.UpsertAttempt{Attempt: a.rec}})
	cancel()
	if err == nil {
		return true
	}
	rn.pool.Release(a, failover.AttemptInfo{}, false)
	if a.agent != nil {
		a.agent.Forget(a.id)
	}
	rn.srv.Log().Warn("attempt not journaled, so not sent", "request_id", rn.p.ID, "attempt", a.id, "err", err)
	rn.queue(failover.Event{Kind: failover.EvAbort, Reason: failover.EndJournalUnavailable,
		Err: &openai.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: string(failover.EndJournalUnavailable),
			Message: "the request journal is unavailable, so the attempt was not started: " + err.Error()}})
	return false
}

// sendAttempt starts attempt n, a, journaled, on the replica p: its engine request, its
// context and its reader.
//
//go:noinline
func (rn *Run) sendAttempt(a *Attempt, n int, p *Pick, now time.Time) {
	a.dec.Protocol = rn.shape.proto
	body := clientBody(rn.p.Req.Body)
	if rn.shape.wantUsage && p.UsagePerChunk {
		body, a.usage = rn.shape.usageBody(), true
	}
	a.key, a.closeAfter = p.Key, p.ClosesStreams && a.agent == nil && rn.p.Req.Stream
	req := rn.upstreamRequest(a, body)
	a.ctx, a.cancel = context.WithCancel(rn.p.R.Context())
	rn.atts.cur = a
	rn.atts.all = append(rn.atts.all, a)
	rn.queue(failover.Event{Kind: failover.EvDispatched, Attempt: n, Replica: p.Replica, Fenceable: a.agent != nil})
	rn.startReader(a, req)
}

// upstreamRequest builds the engine request of attempt a. The body is the client's bytes,
// in the parts the engine body holds them, written as they are (upstream.Request.More).
func (rn *Run) upstreamRequest(a *Attempt, body engineBody) *upstream.Request {
	rn.owner.check()
	// The gateway's own fields; the client's are passed on as they are, but for the
	// hop-by-hop ones and those the gateway sets (upstream.Request.Pass).
	h := engineHeaders.Get().(http.Header)
	h["Content-Type"] = jsonContentType
	if rn.p.Req.Stream {
		h["Accept"] = eventStreamAccept
	}
	setEngineKey(h, a.key)
	a.ids = [2]string{rn.p.ID, a.id}
	h["X-Request-Id"] = a.ids[0:1:1]
	h[agent.HeaderAttempt] = a.ids[1:2:2]
	rn.rec.startAttemptSpan(a, h)
	if a.agent != nil {
		agent.SetLeaseHeaders(h, a.id, a.epoch, rn.srv.LeaseTTL(), rn.srv.ID())
		setAgentKey(h, a.agent.Secret())
	}
	req := &upstream.Request{Method: http.MethodPost, Base: a.url, Path: rn.p.Req.Endpoint.Path(), Header: h,
		Pass: rn.p.R.Header, Skip: hopHeaders, Body: body.parts[0], Close: a.closeAfter}
	if len(body.parts[1]) > 0 || len(body.parts[2]) > 0 {
		req.More = body.parts[1:]
	}
	return req
}

// engineHeaders pools the header maps of engine requests: a map is needed only until its
// request is written, and pooled it is the same map, buckets and all, for the next one.
var engineHeaders = sync.Pool{New: func() any { return make(http.Header, 8) }}

// releaseHeader gives req's header map back to engineHeaders once req was written (or
// failed to be): nothing reads it after.
func releaseHeader(req *upstream.Request) {
	h := req.Header
	req.Header = nil
	clear(h)
	engineHeaders.Put(h)
}

// endAttempt is the one place an attempt is torn down (the machine's ActEndAttempt): its
// reader is stopped and the owner stops reading its stream, its connection is closed
// (cancel) or left to be drained and reused (completed), its
// replica slot and lease released, and its end journaled and counted.
func (rn *Run) endAttempt(act failover.Action, now time.Time) {
	rn.owner.check()
	a := rn.attemptN(act.Attempt)
	if a == nil || a.ended {
		return
	}
	a.ended = true
	if act.Cancel {
		a.cancel()
	} else {
		a.completed.Store(true)
	}
	close(a.stop)
	rn.leaveInline(a)
	info, dispatched := rn.m.Attempt(act.Attempt)
	rn.pool.Release(a, info, dispatched)
	rn.rec.attemptEnded(a, act, info, dispatched, now)
	if a.agent != nil {
		rn.releaseLease(a, act.Cancel, act.AwaitFence)
	}
}

// attemptN returns the attempt the machine numbers n.
func (rn *Run) attemptN(n int) *Attempt {
	rn.owner.check()
	for _, a := range rn.atts.all {
		if a.n == n {
			return a
		}
	}
	return nil
}

// live reports whether a is the attempt the machine listens to.
func (rn *Run) live(a *Attempt) bool {
	rn.owner.check()
	return a == rn.atts.cur && !a.ended && !rn.m.Done()
}
