package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/fencegate/fencegate/internal/agent"
	"github.com/fencegate/fencegate/internal/failover"
	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/sse"
	"github.com/fencegate/fencegate/internal/store"
	"github.com/fencegate/fencegate/internal/upstream"
	"github.com/tidwall/gjson"
)

// Limits on what the gateway reads from an engine.
const (
	boundaryWriteTimeout = 5 * time.Second
	maxDrain             = 64 << 10
	maxDrainWait         = 100 * time.Millisecond
	maxEngineErrorBody   = 64 << 10
	maxEngineBody        = 64 << 20
	readChunk            = 32 << 10
)

// hopHeaders are not forwarded from the client to the engine: hop-by-hop headers, the
// gateway's own credentials and headers the transport sets itself.
var hopHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "Host": true,
	"Content-Length": true, "Authorization": true, "Cookie": true, "Accept-Encoding": true,
	"Idempotency-Key": true, "X-Request-Id": true,
}

// runAttempt performs attempt a: sends the request, then reads the response and feeds the
// machine until the attempt ends one way or another. It is called without mu held.
func (rn *run) runAttempt(a *attempt) {
	req, err := http.NewRequestWithContext(a.ctx, http.MethodPost, a.url+rn.req.Endpoint.Path(), bytes.NewReader(rn.req.Body))
	if err != nil {
		rn.locked(func() { rn.failAttempt(a, upstream.Failure{Class: failover.Dead, Reason: "bad_upstream_url"}, nil) })
		return
	}
	for k, v := range rn.r.Header {
		if !hopHeaders[k] {
			req.Header[k] = v
		}
	}
	req.Header.Set("Content-Type", "application/json")
	if rn.req.Stream {
		req.Header.Set("Accept", "text/event-stream")
	}
	req.Header.Set("X-Request-Id", rn.id)
	req.Header.Set(agent.HeaderAttempt, a.id)
	if a.link != nil {
		agent.SetLeaseHeaders(req.Header, a.id, a.epoch, rn.s.cfg.Leases.TTL.D(), rn.s.gatewayID)
	}

	resp, err := rn.s.client.Do(req)
	if err != nil {
		rn.locked(func() { rn.upstreamError(a, err) })
		return
	}
	defer func() {
		rn.mu.Lock()
		completed := a.completed
		rn.mu.Unlock()
		if !completed {
			resp.Body.Close()
			a.cancel()
			return
		}
		// The answer is complete, but the response may not be at EOF yet (the chunked
		// terminator after [DONE]); reading it lets the transport reuse the connection
		// instead of dialling a new one for the next request. It is read before the
		// handler returns, so the connection is back in the pool when the client sees the
		// end of its response, bounded in case an engine keeps the response open.
		stop := time.AfterFunc(maxDrainWait, a.cancel)
		io.CopyN(io.Discard, resp.Body, maxDrain)
		stop.Stop()
		resp.Body.Close()
		a.cancel()
	}()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxEngineErrorBody))
		f := upstream.ClassifyStatus(resp.StatusCode)
		if f.Class == failover.Overloaded {
			// An explicit "busy": keep new work off this replica for its Retry-After.
			rn.pool.overloaded(a.replica, rn.now().Add(upstream.RetryAfter(resp.Header, time.Second)), f.Reason)
		}
		rn.locked(func() { rn.failAttempt(a, f, openai.NormalizeEngineError(resp.StatusCode, body)) })
		return
	}
	if rn.req.Stream {
		rn.readStream(a, resp.Body)
	} else {
		rn.readBody(a, resp.Body)
	}
}

// readStream reads SSE from the engine, feeding the machine one event at a time and
// flushing the client once per read: events that are already available go out together.
func (rn *run) readStream(a *attempt, body io.Reader) {
	var dec sse.Decoder
	buf := rn.s.bufs.Get().(*[]byte)
	defer rn.s.bufs.Put(buf)
	for {
		n, err := body.Read(*buf)
		rn.mu.Lock()
		if !rn.live(a) {
			rn.mu.Unlock()
			return
		}
		if n > 0 {
			dec.Append((*buf)[:n])
			for rn.live(a) {
				ev, ok := dec.Next()
				if !ok {
					break
				}
				rn.chunk(a, ev)
			}
			if dec.Err() != nil && rn.live(a) {
				rn.failAttempt(a, upstream.Failure{Class: failover.Dead, Reason: "event_too_large"}, nil)
			}
		}
		if err != nil && rn.live(a) {
			if errors.Is(err, io.EOF) {
				rn.step(failover.Event{Kind: failover.EvEnd, Attempt: a.n})
			} else {
				rn.upstreamError(a, err)
			}
		}
		rn.flush()
		rn.checkClient()
		stop := !rn.live(a)
		rn.mu.Unlock()
		if stop {
			return
		}
	}
}

// chunk classifies one SSE event and steps the machine with it.
func (rn *run) chunk(a *attempt, ev sse.Event) {
	class := ev.Class
	e := failover.Event{Kind: failover.EvChunk, Attempt: a.n, Chunk: class, Tokens: ev.Outputs}
	data, rewrite := ev.Data, false
	if class&sse.NullError != 0 {
		// Never forward "error": null in an ordinary chunk (DESIGN §2): the official SDKs
		// take any "error" key for an error.
		data, rewrite = sse.StripNullError(nil, data), true
	}
	if class&sse.ToolCalls != 0 {
		if d, ok := deterministicToolCallIDs(data, true); ok {
			data, rewrite = d, true
		}
	}
	if rewrite {
		// Rare, so the event is rebuilt as one data line.
		rn.rewritten = sse.AppendData(rn.rewritten[:0], data)
		ev.Raw = rn.rewritten
	}
	if class&sse.Error != 0 {
		e.Err = openai.NormalizeEngineError(http.StatusInternalServerError, ev.Data)
	}
	if !rn.recordBoundary(class) {
		return
	}
	rn.raw = ev.Raw
	rn.step(e)
	rn.raw = nil
}

// recordBoundary makes the delivery boundary of a keyed request durable before the machine
// is given the event that crosses it, so that after a crash another gateway can tell a safe
// rerun from an unsafe one. It returns false when the request must not go on: the record
// failed, and nothing may be written that the journal does not know of.
func (rn *run) recordBoundary(class sse.Class) bool {
	if !rn.keyed || rn.m.Committed() || class&(sse.Output|sse.Finish|sse.Done) == 0 || class&(sse.Error|sse.Malformed) != 0 {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), boundaryWriteTimeout)
	err := rn.s.store.MarkFirstDelta(ctx, rn.id, rn.s.gatewayID, rn.now())
	cancel()
	if err == nil {
		return true
	}
	code, msg := "journal_unavailable", "the gateway could not record the delivery boundary durably, so it delivered nothing: "+err.Error()
	if errors.Is(err, store.ErrNotOwner) {
		code, msg = "request_ownership_lost", "another gateway took over this request, so this one delivered nothing"
	}
	rn.s.log.Warn("delivery boundary not recorded", "request_id", rn.id, "err", err)
	rn.step(failover.Event{Kind: failover.EvAbort, Reason: code,
		Err: &openai.Error{Status: http.StatusServiceUnavailable, Type: "server_error", Code: code, Message: msg}})
	return false
}

// readBody reads a complete non-streaming response.
func (rn *run) readBody(a *attempt, body io.Reader) {
	b, err := io.ReadAll(io.LimitReader(body, maxEngineBody))
	rn.locked(func() {
		if !rn.live(a) {
			return
		}
		if err != nil {
			rn.upstreamError(a, err)
			return
		}
		tokens := int(gjson.GetBytes(b, "usage.completion_tokens").Int())
		if sse.Classify(b)&sse.ToolCalls != 0 {
			b, _ = deterministicToolCallIDs(b, false)
		}
		if !rn.recordBoundary(sse.Output) {
			return
		}
		rn.raw = b
		rn.step(failover.Event{Kind: failover.EvBody, Attempt: a.n, Tokens: tokens})
		rn.raw = nil
		rn.flush()
		rn.checkClient()
	})
}

// live reports whether a is still the attempt the machine listens to.
func (rn *run) live(a *attempt) bool { return !a.ended && rn.cur == a && !rn.m.Done() }

// upstreamError classifies err. The client going away is never an upstream failure.
func (rn *run) upstreamError(a *attempt, err error) {
	if rn.r.Context().Err() != nil {
		rn.step(failover.Event{Kind: failover.EvClientGone})
		return
	}
	if a.ctx.Err() != nil {
		return // fenced by the gateway; the machine already knows
	}
	rn.failAttempt(a, upstream.ClassifyError(err), nil)
}

func (rn *run) failAttempt(a *attempt, f upstream.Failure, e *openai.Error) {
	if f.Dial {
		rn.pool.dialFailed(a.replica, rn.now(), f.Reason)
	} else {
		rn.refineCost(a)
	}
	rn.step(failover.Event{Kind: failover.EvFailed, Attempt: a.n, Failure: f.Class, Reason: f.Reason, Err: e, Dial: f.Dial})
}

func (rn *run) locked(f func()) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	f()
}
