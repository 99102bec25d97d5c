package gateway

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/fencegate/fencegate/internal/failover"
	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/sse"
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

	mu       sync.Mutex
	m        *failover.Machine
	rec      requestRecord
	cur      *attempt // the attempt the machine last started
	attempts []*attempt
	pending  []failover.Event // follow-up events produced while performing actions
	raw      []byte           // the event (or body) the current Step is about
	held     []byte           // held events of the current attempt
	writeErr error
	dirty    bool // bytes written since the last flush

	timer   *time.Timer
	armedAt time.Time
}

// attempt is one try on one replica.
type attempt struct {
	n       int
	id      string
	replica string
	url     string
	ctx     context.Context
	cancel  context.CancelFunc
	ended   bool
	rec     int // index in run.rec.Attempts
}

func (rn *run) now() time.Time { return rn.s.now() }

// step feeds one event to the machine and performs the resulting actions, then any
// follow-up events those actions produced. Callers hold mu.
func (rn *run) step(ev failover.Event) {
	rn.pending = append(rn.pending, ev)
	for len(rn.pending) > 0 {
		ev := rn.pending[0]
		rn.pending = rn.pending[1:]
		now := rn.now()
		for _, a := range rn.m.Step(ev, now) {
			rn.perform(a, now)
		}
	}
	rn.rearm()
}

// perform carries out one action of the machine.
func (rn *run) perform(a failover.Action, now time.Time) {
	switch a.Kind {
	case failover.ActStartAttempt:
		rn.startAttempt(a.Attempt, now)
	case failover.ActCancelAttempt:
		rn.endAttempt(a.Attempt, now, a.Reason, true)
	case failover.ActSendHeaders:
		h := rn.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
		rn.w.WriteHeader(http.StatusOK)
		rn.dirty = true
	case failover.ActKeepalive:
		rn.write(sse.KeepaliveEvent)
		rn.flush()
	case failover.ActMarkFirstDelta:
		// Recorded before the write that follows (DESIGN §2).
		rn.rec.FirstDeltaSent = true
		rn.rec.Phase = phaseStreaming
		rn.journal(now)
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
	name, url, ok := rn.pool.acquire(now, rn.m.Tried)
	if !ok {
		rn.pending = append(rn.pending, failover.Event{Kind: failover.EvNoReplica, Attempt: n})
		return
	}
	ctx, cancel := context.WithCancel(rn.r.Context())
	a := &attempt{n: n, id: rn.rec.ID + ".a" + strconv.Itoa(n), replica: name, url: url, ctx: ctx, cancel: cancel, rec: len(rn.rec.Attempts)}
	rn.cur = a
	rn.attempts = append(rn.attempts, a)
	rn.rec.Attempts = append(rn.rec.Attempts, attemptRecord{ID: a.id, N: n, Replica: name, StartedAt: now})
	rn.pending = append(rn.pending, failover.Event{Kind: failover.EvDispatched, Attempt: n, Replica: name})
	rn.journal(now)
}

// endAttempt closes attempt n's upstream connection and releases its replica. cancel says
// whether the gateway itself fenced it (as opposed to the attempt completing).
func (rn *run) endAttempt(n int, now time.Time, reason string, cancel bool) {
	for _, a := range rn.attempts {
		if a.n != n || a.ended {
			continue
		}
		a.ended = true
		a.cancel()
		rn.pool.release(a.replica)
		ar := &rn.rec.Attempts[a.rec]
		ar.EndedAt = now
		ar.EndReason = reason
		ar.CancelSent = cancel
		if infos := rn.m.Attempts(); len(infos) >= n && infos[n-1].Failure != 0 {
			ar.Failure = infos[n-1].Failure.String()
		}
	}
}

func (rn *run) finish(o failover.Outcome, e *openai.Error, now time.Time) {
	for _, a := range rn.attempts {
		if !a.ended {
			rn.endAttempt(a.n, now, "completed", false)
		}
	}
	rn.rec.Phase = phaseDone
	rn.rec.Outcome = o.String()
	rn.rec.DeliveredOutputTokens = rn.m.Delivered()
	rn.rec.Error = errorJSON(e)
	rn.journal(now)
	if rn.timer != nil {
		rn.timer.Stop()
	}
}

func (rn *run) journal(now time.Time) {
	rn.rec.UpdatedAt = now
	rn.rec.DeliveredOutputTokens = rn.m.Delivered()
	rn.s.journal.put(&rn.rec)
}

func (rn *run) write(b []byte) {
	if rn.writeErr != nil || len(b) == 0 {
		return
	}
	_, rn.writeErr = rn.w.Write(b)
	rn.dirty = true
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
	openai.WriteError(rn.w, e)
	rn.dirty = true
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
