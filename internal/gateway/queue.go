package gateway

import (
	"slices"
	"strconv"
	"time"

	"github.com/fencegate/fencegate/internal/balance"
	"github.com/fencegate/fencegate/internal/queue"
	"github.com/fencegate/fencegate/internal/request"
)

// poolQueue is a pool's queue (docs/design.md §3, "The queue"): the order is
// queue.Queue's; this is who waits, and the grants, sheds and expiries posted to them.
// The pool's lock guards it.
type poolQueue struct {
	q       queue.Queue
	maxWait time.Duration
	off     bool // queue.max_len -1: no request waits
	waiters map[*request.Attempt]*waiter
	byID    map[uint64]*waiter
	lastID  uint64
	// prios are the classes that ever waited, whose length gauge is kept.
	prios map[int]bool
}

// waiter is an attempt waiting in the queue, and how its wait ended once it has.
type waiter struct {
	a     *request.Attempt
	id    uint64
	want  request.Want
	prio  int
	since time.Time
	end   request.QueueEnd
	pick  request.Pick // QueueGranted: the slot
}

// configureQueue applies queue.max_wait and queue.max_len. Callers hold mu.
func (p *pool) configureQueue(maxWait time.Duration, maxLen int) {
	p.queue.maxWait, p.queue.off = maxWait, maxLen < 0
	p.queue.q.MaxLen = max(maxLen, 0)
	if p.queue.waiters == nil {
		p.queue.waiters = make(map[*request.Attempt]*waiter)
		p.queue.byID = make(map[uint64]*waiter)
		p.queue.prios = make(map[int]bool)
	}
}

// knowsCapacity reports whether the pool's replicas have a known capacity
// (max_outstanding, or the slots an engine reports: balance.Limits.Capacity): only then do
// requests wait here; otherwise the engines' own queues hold them, as without this queue.
// Callers hold mu.
func (p *pool) knowsCapacity() bool {
	for _, r := range p.b.Replicas {
		if p.b.Limits.Capacity(r) > 0 {
			return true
		}
	}
	return false
}

// enqueue makes attempt a wait for a slot, shedding a waiter when the queue is full, and
// answers Acquire. Callers hold mu.
func (p *pool) enqueue(now time.Time, w *request.Want, a *request.Attempt) request.Pick {
	pq := &p.queue
	p.expireWaiters(now)
	pq.lastID++
	rerun := len(w.Attempts) > 0
	since := now
	if rerun {
		since = w.Since // keeps its place: the order of when its request first asked
	}
	e := queue.Entry{ID: pq.lastID, Flow: w.Class.Flow, Sub: w.Class.Sub, Weight: w.Class.Weight, Priority: w.Class.Priority,
		Rerun: rerun, At: since, Deadline: now.Add(pq.maxWait)}
	shed, ok := pq.q.Push(e)
	if !ok {
		p.countQueue(w.Class.Priority, queueShed)
		return request.Pick{Shed: true, QueueFull: true}
	}
	wt := &waiter{a: a, id: e.ID, want: *w, prio: e.Priority, since: now}
	wt.want.Attempts = slices.Clone(w.Attempts) // the machine's slice is read after Acquire
	pq.waiters[a], pq.byID[e.ID] = wt, wt
	pq.prios[e.Priority] = true
	if shed != nil {
		p.decide(pq.byID[shed.ID], request.QueueShed, now)
	}
	p.queueGauges()
	return request.Pick{Queued: true, Until: e.Deadline}
}

// decide ends a waiter's wait as the pool decided (shed, expired) and tells its owner.
// Callers hold mu.
func (p *pool) decide(wt *waiter, end request.QueueEnd, now time.Time) {
	wt.end = end
	delete(p.queue.byID, wt.id)
	switch end {
	case request.QueueShed:
		p.countQueue(wt.prio, queueShed)
	case request.QueueExpired:
		p.countQueue(wt.prio, queueExpired)
	}
	wt.a.QueueDecided()
}

// expireWaiters ends the waits that reached queue.max_wait. Callers hold mu.
func (p *pool) expireWaiters(now time.Time) {
	for _, e := range p.queue.q.Expire(now) {
		if wt := p.queue.byID[e.ID]; wt != nil {
			p.decide(wt, request.QueueExpired, now)
		}
	}
}

// grantWaiting gives the replicas' free slots to the waiters, in the queue's order, as long
// as one of them can take one; it runs whenever a slot may have freed (an attempt ended,
// a replica's load or state changed). A waiter whose request has ended meanwhile gives its
// slot back at once. Callers hold mu.
func (p *pool) grantWaiting(now time.Time) {
	pq := &p.queue
	if pq.q.Len() == 0 {
		return
	}
	p.expireWaiters(now)
	for pq.q.Len() > 0 {
		if c := p.b.Pick(now, nil, 0); c.Replica == nil {
			break // no slot free for anyone
		}
		var chosen *balance.Replica
		e, ok := pq.q.Next(now, func(e queue.Entry) bool {
			wt := pq.byID[e.ID]
			chosen = p.choose(now, &wt.want).Replica
			return chosen != nil
		})
		if !ok {
			break
		}
		wt := pq.byID[e.ID]
		delete(pq.byID, wt.id)
		wt.end, wt.pick = request.QueueGranted, p.take(chosen, wt.a, wt.want.Blocks)
		p.observeWait(wt.prio, now.Sub(wt.since))
		if !wt.a.QueueDecided() {
			// Its request has ended: nothing will take the slot.
			p.untake(chosen, wt.a)
			delete(pq.waiters, wt.a)
		}
	}
	p.queueGauges()
}

// grantWaitingNow is grantWaiting at the gateway's time. Callers hold mu.
func (p *pool) grantWaitingNow() {
	if p.srv != nil && p.queue.q.Len() > 0 {
		p.grantWaiting(p.srv.now())
	}
}

// unqueue answers request.Pool.Unqueue. Callers hold mu.
func (p *pool) unqueue(a *request.Attempt, now time.Time, why request.QueueEnd) (request.Pick, request.QueueEnd) {
	pq := &p.queue
	wt := pq.waiters[a]
	if wt == nil {
		return request.Pick{}, request.QueueNone
	}
	if wt.end == 0 {
		if why == request.QueueWaiting {
			return request.Pick{}, request.QueueWaiting
		}
		pq.q.Remove(wt.id)
		delete(pq.byID, wt.id)
		wt.end = why
		switch why {
		case request.QueueExpired:
			p.countQueue(wt.prio, queueExpired)
		default:
			p.countQueue(wt.prio, queueLeft)
		}
		p.queueGauges()
	}
	delete(pq.waiters, a)
	return wt.pick, wt.end
}

// queueRetryAfter is the Retry-After, in seconds, of a request refused or expired while
// others wait: how long the queue takes to drain at its recent rate. Callers hold mu.
func (p *pool) queueRetryAfter(now time.Time) int {
	d := p.queue.q.RetryAfter(now, p.queue.maxWait)
	return min(max(int((d+time.Second-1)/time.Second), 1), 60)
}

// What the queue counts, besides the requests it grants a slot.
const (
	queueShed    = "shed"
	queueExpired = "expired"
	queueLeft    = "left"
)

func (p *pool) countQueue(prio int, what string) {
	if m := p.metrics(); m != nil {
		m.queueEnded.WithLabelValues(p.b.Model, strconv.Itoa(prio), what).Inc()
	}
}

func (p *pool) observeWait(prio int, d time.Duration) {
	if m := p.metrics(); m != nil {
		label := strconv.Itoa(prio)
		m.queueEnded.WithLabelValues(p.b.Model, label, "dequeued").Inc()
		m.queueWait.WithLabelValues(p.b.Model, label).Observe(d.Seconds())
	}
}

// queueGauges sets the queue's length per class. Callers hold mu.
func (p *pool) queueGauges() {
	m := p.metrics()
	if m == nil {
		return
	}
	for prio := range p.queue.prios {
		m.queueLen.WithLabelValues(p.b.Model, strconv.Itoa(prio)).Set(float64(p.queue.q.LenOf(prio)))
	}
}

func (p *pool) metrics() *metrics {
	if p.srv == nil {
		return nil
	}
	return p.srv.metrics
}
