package gateway

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/fencegate/fencegate/internal/agent"
	"github.com/fencegate/fencegate/internal/failover"
	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/sse"
	"github.com/fencegate/fencegate/internal/store"
	"go.opentelemetry.io/otel/trace"
)

// boundaryWriteTimeout bounds the synchronous journal writes of a keyed request (its
// attempts and its delivery boundary).
const boundaryWriteTimeout = 5 * time.Second

// hopHeaders are not forwarded from the client to the engine: hop-by-hop headers, the
// gateway's own credentials and headers the transport sets itself. Idempotency-Key and
// X-Idempotency-Key must never reach the transport: with either, Go's HTTP client treats a
// POST as replayable and silently resends it on a new connection when a reused one fails
// after the request was written — an attempt that the machine, the journal and
// max_attempts would never see.
var hopHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "Host": true,
	"Content-Length": true, "Authorization": true, "Cookie": true, "Accept-Encoding": true,
	"Idempotency-Key": true, "X-Idempotency-Key": true, "X-Request-Id": true, "X-Api-Key": true,
	"X-Fencegate-Agent-Key": true, // a client's guess at the agents' secret goes nowhere
}

// attempt is one try of the request on one replica. Its fields are the owner's, except
// stop, completed and cancel, which its reader also uses.
type attempt struct {
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
	// bufBack returns the reader's buffer once the owner is done with a read.
	bufBack chan struct{}

	ended bool
	rec   store.Attempt
	dec   sse.Decoder
	// usage: the engine was asked for per-chunk usage (the gateway strips it again);
	// counted is the output tokens counted so far per choice index (below 64).
	usage   bool
	counted [64]int
	key     string // the engine's API key
	// closeAfter: the engine closes the connection after a streamed answer (closesStreams),
	// so the request asks for the connection to be closed and it is never pooled.
	closeAfter bool
	span       trace.Span // the attempt's span
	// link is the replica's agent (nil in direct mode); epoch the attempt's lease epoch.
	link  *agentLink
	epoch uint64
}

func (a *attempt) isStopped() bool {
	select {
	case <-a.stop:
		return true
	default:
		return false
	}
}

// startAttempt chooses a replica for attempt n (never one this request already tried),
// sends the request and reports the choice to the machine.
func (rn *run) startAttempt(n int, now time.Time) {
	a := &attempt{n: n, stop: make(chan struct{}), bufBack: make(chan struct{}, 1)}
	p := rn.pool.acquire(now, rn, a, rn.affinity)
	if !p.ok {
		reason := ""
		switch {
		case p.pinned:
			reason = failover.NoReplicaPinned
		case p.shed:
			reason = failover.NoReplicaOverloaded
			rn.s.metrics.shed.WithLabelValues(rn.model).Inc()
		}
		rn.queue(failover.Event{Kind: failover.EvNoReplica, Attempt: n, Reason: reason})
		return
	}
	num := rn.attemptBase + n
	a.id, a.replica, a.url = store.AttemptID(rn.id, num), p.name, p.url
	rn.revision = rn.pool.revision(p.name)
	if a.link = p.link; a.link != nil {
		a.epoch = a.link.grant(a.id, now)
	}
	a.rec = store.Attempt{ID: a.id, RequestID: rn.id, N: num, Replica: p.name, StartedAt: now, LeaseEpoch: a.epoch, ModelRevision: rn.revision}
	if rn.keyed {
		// A keyed request may be taken over by another gateway if this one dies; the new
		// owner must know every attempt that was started, so that it numbers its own after
		// them and can tell which replica may still be running one. Nothing is sent before
		// the record is written.
		ctx, cancel := context.WithTimeout(context.Background(), boundaryWriteTimeout)
		err := rn.s.store.Apply(ctx, []store.Mutation{store.UpsertAttempt{Attempt: a.rec}})
		cancel()
		if err != nil {
			rn.pool.release(p.name, a)
			if a.link != nil {
				a.link.forget(a.id)
			}
			rn.s.log.Warn("attempt not journaled, so not sent", "request_id", rn.id, "attempt", a.id, "err", err)
			rn.queue(failover.Event{Kind: failover.EvAbort, Reason: "journal_unavailable",
				Err: &openai.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "journal_unavailable",
					Message: "the request journal is unavailable, so the attempt was not started: " + err.Error()}})
			return
		}
	} else {
		rn.s.journal.Submit(store.UpsertAttempt{Attempt: a.rec})
	}
	a.dec.Protocol = rn.proto
	body := clientBody(rn.req.Body)
	if rn.wantUsage && p.usagePerChunk {
		body, a.usage = rn.usageBody(), true
	}
	a.key, a.closeAfter = p.key, p.closesStreams && a.link == nil && rn.req.Stream
	req, err := rn.upstreamRequest(a, body)
	if err != nil {
		// A replica URL that does not make a request: configuration validation prevents
		// it, so this is a bug; the attempt fails as if the replica refused it.
		rn.s.log.Error("upstream request not built", "request_id", rn.id, "replica", p.name, "err", err)
	}
	a.ctx, a.cancel = context.WithCancel(rn.r.Context())
	rn.cur = a
	rn.attempts = append(rn.attempts, a)
	rn.update(store.UpdateRequest{At: now, Phase: store.PhaseRouting})
	rn.queue(failover.Event{Kind: failover.EvDispatched, Attempt: n, Replica: p.name, Fenceable: a.link != nil})
	if req == nil {
		rn.queue(failover.Event{Kind: failover.EvFailed, Attempt: n, Failure: failover.Dead, Reason: "bad_upstream_url", Dial: true})
		return
	}
	rn.readers.Add(1)
	go rn.read(a, req.WithContext(a.ctx), rn.req.Stream)
}

// upstreamRequest builds the engine request of attempt a.
func (rn *run) upstreamRequest(a *attempt, body engineBody) (*http.Request, error) {
	req, err := http.NewRequest(http.MethodPost, a.url+rn.req.Endpoint.Path(), body.reader())
	if err != nil {
		return nil, err
	}
	// As for a bytes.Reader: the length is known, and the body can be read again (only
	// by net/http itself, never to resend: see hopHeaders).
	req.ContentLength = int64(body.size())
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(body.reader()), nil }
	for k, v := range rn.r.Header {
		if !hopHeaders[k] {
			req.Header[k] = v
		}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Close = a.closeAfter
	if rn.req.Stream {
		req.Header.Set("Accept", "text/event-stream")
	}
	setEngineKey(req.Header, a.key)
	req.Header.Set("X-Request-Id", rn.id)
	req.Header.Set(agent.HeaderAttempt, a.id)
	rn.startAttemptSpan(a, req.Header)
	if a.link != nil {
		agent.SetLeaseHeaders(req.Header, a.id, a.epoch, rn.s.boot.Leases.TTL.D(), rn.s.gatewayID)
		setAgentKey(req.Header, a.link.client.Secret)
	}
	return req, nil
}

// endAttempt is the one place an attempt is torn down (the machine's ActEndAttempt): its
// reader is stopped, its connection closed (cancel) or left to be reused (completed), its
// replica slot and lease released, and its end journaled and counted.
func (rn *run) endAttempt(act failover.Action, now time.Time) {
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
	rn.pool.release(a.replica, a)
	a.rec.EndedAt = now
	a.rec.EndReason = act.Reason
	a.rec.CancelSent = act.Cancel
	if info, ok := rn.m.Attempt(act.Attempt); ok {
		if info.Failure != 0 {
			a.rec.Failure = info.Failure.String()
		}
		a.rec.EngineMayHaveActed = info.EngineMayHaveActed
	}
	end := a.rec.Failure
	if end == "" {
		end = "completed"
		if act.Cancel {
			end = "cancelled"
		}
	}
	rn.s.metrics.attempts.WithLabelValues(rn.model, a.replica, end).Inc()
	rn.s.journal.Submit(store.UpsertAttempt{Attempt: a.rec})
	endAttemptSpan(a, act.Reason, a.rec.Failure, act.Cancel)
	if a.link != nil {
		rn.releaseLease(a, act.Cancel, act.AwaitFence)
	}
}

// attemptN returns the attempt the machine numbers n.
func (rn *run) attemptN(n int) *attempt {
	for _, a := range rn.attempts {
		if a.n == n {
			return a
		}
	}
	return nil
}

// live reports whether a is the attempt the machine listens to.
func (rn *run) live(a *attempt) bool { return a == rn.cur && !a.ended && !rn.m.Done() }
