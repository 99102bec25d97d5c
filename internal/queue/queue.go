// Package queue orders the requests that wait for a slot on a pool whose replicas are all
// at their capacity (docs/design.md §3, "The queue"): strict priority classes, weighted fair
// queuing between API keys and, within a key, between the fairness ids it sets; reruns
// first; expiry; shedding the lowest class, and within it the key furthest over its share,
// when the queue is full; and the rate at which it drains, for a refused request's
// Retry-After.
//
// It is pure: it holds no locks, starts no goroutines and reads no clock; time is passed
// in. The gateway's pool keeps one Queue under its lock and posts each decision to the
// request it concerns. It imports no other fencegate package.
package queue

import (
	"slices"
	"time"
)

// Entry is one request waiting for a slot.
type Entry struct {
	// ID names the entry for Remove; the caller chooses it, unique within the queue.
	ID uint64
	// Flow is who the request is fair against: its API key ("" for requests without one,
	// which share one flow). Sub is the fairness id within the flow that its key set ("":
	// none), for a platform that fronts many users with one key.
	Flow, Sub string
	// Weight is the flow's share of the freed slots against the other flows of its class
	// (below 1: 1). A flow takes the weight of its latest entry.
	Weight int
	// Priority is the entry's class: every entry of a higher class is served before any of
	// a lower one.
	Priority int
	// Rerun: the request was served once and its attempt failed before any output; it keeps
	// its place, ahead of every first try of its class (in the order of At).
	Rerun bool
	// At is when the request first asked for a slot; Deadline when it stops waiting (zero:
	// never).
	At, Deadline time.Time
}

// Queue is a pool's waiting requests. The zero value is an empty, unbounded queue.
type Queue struct {
	// MaxLen bounds the entries (0 or less: no bound). A Push into a full queue sheds one.
	MaxLen int

	levels []*level // by priority, highest first
	byID   map[uint64]*slot
	n      int
	seq    uint64
	drain  drainRate
}

// level is one priority class: its reruns in the order they first asked, and its flows.
type level struct {
	prio   int
	reruns []*slot
	flows  map[string]*flow
	// vt is the class's virtual time: the pass of the flow served last. A flow that becomes
	// backlogged starts no earlier, so an idle flow banks no credit.
	vt float64
}

// flow is one API key's entries within a class, by fairness id.
type flow struct {
	name   string
	weight int
	pass   float64 // advances by 1/weight per entry served
	n      int
	subs   map[string]*sub
	subVT  float64 // as level.vt, between the flow's fairness ids
}

// sub is one fairness id's entries within a flow, first come first served.
type sub struct {
	name string
	pass float64 // advances by 1 per entry served: fairness ids share their key equally
	fifo []*slot
}

type slot struct {
	e   Entry
	seq uint64 // arrival order, which breaks every tie
	lvl *level
	fl  *flow
	sb  *sub
}

// Len is the number of waiting entries.
func (q *Queue) Len() int { return q.n }

// LenOf is the number of waiting entries of priority class prio.
func (q *Queue) LenOf(prio int) int {
	n := 0
	if lv := q.level(prio, false); lv != nil {
		n = len(lv.reruns)
		for _, f := range lv.flows {
			n += f.n
		}
	}
	return n
}

// Priorities lists the classes that have entries, highest first.
func (q *Queue) Priorities() []int {
	var out []int
	for _, lv := range q.levels {
		if len(lv.reruns) > 0 || anyQueued(lv) {
			out = append(out, lv.prio)
		}
	}
	return out
}

func anyQueued(lv *level) bool {
	for _, f := range lv.flows {
		if f.n > 0 {
			return true
		}
	}
	return false
}

// Push adds e. When the queue is full one entry is shed to make room: of the lowest class
// that is not above e's and has a first try waiting, the newest first try of the flow
// furthest over its share (most entries per weight, e counted in its own flow). When that
// would be e itself — its class is the lowest and its flow the fullest, or no entry may be
// shed — e is refused (ok false) and nothing changes. A rerun is never shed, and is
// refused only when nothing else may be.
func (q *Queue) Push(e Entry) (shed *Entry, ok bool) {
	if e.Weight < 1 {
		e.Weight = 1
	}
	if q.MaxLen > 0 && q.n >= q.MaxLen {
		v := q.victim(e)
		if v == nil {
			return nil, false
		}
		q.remove(v)
		out := v.e
		shed = &out
	}
	if q.byID == nil {
		q.byID = make(map[uint64]*slot)
	}
	q.seq++
	s := &slot{e: e, seq: q.seq, lvl: q.level(e.Priority, true)}
	q.byID[e.ID] = s
	q.n++
	lv := s.lvl
	if e.Rerun {
		i, _ := slices.BinarySearchFunc(lv.reruns, s, func(a, b *slot) int {
			if c := a.e.At.Compare(b.e.At); c != 0 {
				return c
			}
			return cmpSeq(a.seq, b.seq)
		})
		lv.reruns = slices.Insert(lv.reruns, i, s)
		return shed, true
	}
	f := lv.flows[e.Flow]
	if f == nil {
		f = &flow{name: e.Flow, subs: make(map[string]*sub)}
		lv.flows[e.Flow] = f
	}
	f.weight = e.Weight
	if f.n == 0 {
		f.pass = max(f.pass, lv.vt)
	}
	sb := f.subs[e.Sub]
	if sb == nil {
		sb = &sub{name: e.Sub, pass: f.subVT}
		f.subs[e.Sub] = sb
	}
	sb.fifo = append(sb.fifo, s)
	f.n++
	s.fl, s.sb = f, sb
	return shed, true
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// level returns the class prio, created when make is set.
func (q *Queue) level(prio int, make bool) *level {
	i, found := slices.BinarySearchFunc(q.levels, prio, func(lv *level, p int) int { return p - lv.prio })
	if found {
		return q.levels[i]
	}
	if !make {
		return nil
	}
	lv := &level{prio: prio, flows: map[string]*flow{}}
	q.levels = slices.Insert(q.levels, i, lv)
	return lv
}

// victim chooses the entry a Push of e into a full queue sheds, or nil when e is refused.
func (q *Queue) victim(e Entry) *slot {
	for i := len(q.levels) - 1; i >= 0; i-- {
		lv := q.levels[i]
		if lv.prio > e.Priority {
			break
		}
		var worst *flow
		var worstShare float64
		for _, f := range lv.flows {
			if newest(f) == nil {
				continue
			}
			share := float64(f.n) / float64(f.weight)
			if worst == nil || share > worstShare || (share == worstShare && newest(f).seq > newest(worst).seq) {
				worst, worstShare = f, share
			}
		}
		if lv.prio == e.Priority && !e.Rerun {
			// e competes in its own class, counted in its own flow: it is refused when its
			// flow is (one of) the furthest over its share.
			own := 1.0
			if f := lv.flows[e.Flow]; f != nil {
				own = float64(f.n+1) / float64(e.Weight)
			}
			if worst == nil || own >= worstShare {
				return nil
			}
		}
		if worst != nil {
			return newest(worst)
		}
	}
	return nil
}

// newest is the flow's latest first try, nil when it has none.
func newest(f *flow) *slot {
	var out *slot
	for _, sb := range f.subs {
		if n := len(sb.fifo); n > 0 && (out == nil || sb.fifo[n-1].seq > out.seq) {
			out = sb.fifo[n-1]
		}
	}
	return out
}

// Next removes and returns the entry to serve: of the highest class with an entry that
// eligible accepts, its first such rerun, else the eligible entry of the flow with the
// lowest pass (then of its fairness id with the lowest pass), first come first served.
// eligible (nil: every entry) lets a caller pass over entries the freed slot cannot take,
// such as a rerun that must avoid the replica it failed on. now is when the entry is
// served, which the drain rate counts.
func (q *Queue) Next(now time.Time, eligible func(Entry) bool) (Entry, bool) {
	ok := func(s *slot) bool { return eligible == nil || eligible(s.e) }
	for _, lv := range q.levels {
		for _, s := range lv.reruns {
			if ok(s) {
				return q.serve(s, now), true
			}
		}
		flows := make([]*flow, 0, len(lv.flows))
		for _, f := range lv.flows {
			if f.n > 0 {
				flows = append(flows, f)
			} else if f.pass <= lv.vt {
				delete(lv.flows, f.name) // idle and owing nothing: forget it
			}
		}
		slices.SortFunc(flows, func(a, b *flow) int {
			if a.pass != b.pass {
				if a.pass < b.pass {
					return -1
				}
				return 1
			}
			return cmpSeq(head(a), head(b))
		})
		for _, f := range flows {
			subs := make([]*sub, 0, len(f.subs))
			for _, sb := range f.subs {
				if len(sb.fifo) > 0 {
					subs = append(subs, sb)
				}
			}
			slices.SortFunc(subs, func(a, b *sub) int {
				if a.pass != b.pass {
					if a.pass < b.pass {
						return -1
					}
					return 1
				}
				return cmpSeq(a.fifo[0].seq, b.fifo[0].seq)
			})
			for _, sb := range subs {
				for _, s := range sb.fifo {
					if ok(s) {
						lv.vt = max(lv.vt, f.pass)
						f.pass += 1 / float64(f.weight)
						f.subVT = max(f.subVT, sb.pass)
						sb.pass++
						return q.serve(s, now), true
					}
				}
			}
		}
	}
	return Entry{}, false
}

// head is the arrival of the flow's oldest entry.
func head(f *flow) uint64 {
	var h uint64
	for _, sb := range f.subs {
		if len(sb.fifo) > 0 && (h == 0 || sb.fifo[0].seq < h) {
			h = sb.fifo[0].seq
		}
	}
	return h
}

func (q *Queue) serve(s *slot, now time.Time) Entry {
	q.remove(s)
	q.drain.served(now)
	return s.e
}

// Remove takes the entry id out of the queue (its request stopped waiting) and returns it.
func (q *Queue) Remove(id uint64) (Entry, bool) {
	s := q.byID[id]
	if s == nil {
		return Entry{}, false
	}
	q.remove(s)
	return s.e, true
}

// Expire removes and returns the entries whose deadline is not after now, oldest first.
func (q *Queue) Expire(now time.Time) []Entry {
	var gone []*slot
	for _, s := range q.byID {
		if !s.e.Deadline.IsZero() && !now.Before(s.e.Deadline) {
			gone = append(gone, s)
		}
	}
	slices.SortFunc(gone, func(a, b *slot) int { return cmpSeq(a.seq, b.seq) })
	out := make([]Entry, len(gone))
	for i, s := range gone {
		q.remove(s)
		out[i] = s.e
	}
	return out
}

// NextDeadline is the earliest deadline of a waiting entry (zero: none).
func (q *Queue) NextDeadline() time.Time {
	var d time.Time
	for _, s := range q.byID {
		if t := s.e.Deadline; !t.IsZero() && (d.IsZero() || t.Before(d)) {
			d = t
		}
	}
	return d
}

func (q *Queue) remove(s *slot) {
	delete(q.byID, s.e.ID)
	q.n--
	if s.e.Rerun {
		s.lvl.reruns = slices.DeleteFunc(s.lvl.reruns, func(o *slot) bool { return o == s })
		return
	}
	s.sb.fifo = slices.DeleteFunc(s.sb.fifo, func(o *slot) bool { return o == s })
	s.fl.n--
	if len(s.sb.fifo) == 0 {
		// A fairness id that waits for nothing is forgotten: one that comes back starts at
		// the flow's virtual time, like a key that comes back (fairness ids are many and
		// short-lived; keys are few).
		delete(s.fl.subs, s.sb.name)
	}
}

// RetryAfter estimates how long the entries now waiting take to be served, at the rate the
// queue was served over the last minute: what a refused request is told to wait. With
// fewer than two entries served in that minute there is no rate, and it is fallback.
func (q *Queue) RetryAfter(now time.Time, fallback time.Duration) time.Duration {
	rate, ok := q.drain.perSecond(now)
	if !ok {
		return fallback
	}
	return time.Duration(float64(q.n+1) / rate * float64(time.Second))
}
