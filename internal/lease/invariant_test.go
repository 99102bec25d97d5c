package lease

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// The randomized schedule below runs a gateway-side Tracker and an agent-side
// Table over a simulated network that loses, delays and reorders messages,
// and checks after every event the invariant the gateway's rerun decision
// rests on: whenever the Table says an attempt may publish, the Tracker's
// ExpiresBy for it, computed from what the gateway knows at that moment, is
// later than both now and the agent's actual expiry.

type netEvent struct {
	at    int64 // ms after t0
	order int   // insertion order, to break ties deterministically
	do    func()
}

type eventQueue []*netEvent

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].order < q[j].order
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*netEvent)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// leaseWorld is one simulated run.
type leaseWorld struct {
	rng   *rand.Rand
	queue eventQueue
	order int
	now   int64

	ttl         time.Duration
	renewEvery  int64 // ms
	delivery    int64 // the network's real maximum one-way delay, ms
	replyDelay  int64 // maximum delay of a reply, ms (acks may be very late)
	lossPercent int

	tracker *Tracker
	table   Table

	live      []string // attempt ids the tracker holds
	removed   map[string]uint64
	requests  int
	lastOfReq map[string]int // logical request → attempts made
	violation string

	validSeen int // checks that found an attempt valid: the run was not vacuous
}

func (w *leaseWorld) schedule(delay int64, do func()) {
	w.order++
	heap.Push(&w.queue, &netEvent{at: w.now + delay, order: w.order, do: do})
}

func (w *leaseWorld) lost() bool { return w.rng.IntN(100) < w.lossPercent }

func (w *leaseWorld) oneWay() int64 { return w.rng.Int64N(w.delivery + 1) }

// grant starts a new attempt: of a new logical request, or a rerun of an
// existing one after fencing its previous attempt (as the gateway does).
func (w *leaseWorld) grant() {
	var req string
	if len(w.live) > 0 && w.rng.IntN(3) == 0 {
		prev := w.live[w.rng.IntN(len(w.live))]
		req = RequestOf(prev)
		w.tracker.Fence(prev)
	} else {
		w.requests++
		req = fmt.Sprintf("req_%d", w.requests)
	}
	w.lastOfReq[req]++
	id := fmt.Sprintf("%s.a%d", req, w.lastOfReq[req])
	epoch := w.tracker.Grant(id, at(w.now))
	w.live = append(w.live, id)
	if w.lost() {
		return
	}
	ttl := w.tracker.TTL()
	w.schedule(w.oneWay(), func() {
		_ = w.table.Start(id, epoch, ttl, at(w.now)) // a stale epoch is refused: nothing to check
	})
}

// renew sends one batched renewal; the agent answers it when it arrives.
func (w *leaseWorld) renew() {
	seq, leases := w.tracker.RenewalSent(at(w.now))
	ttl := w.tracker.TTL()
	if w.lost() {
		return
	}
	w.schedule(w.oneWay(), func() {
		results := make(map[string]Status, len(leases))
		for _, l := range leases {
			results[l.Attempt] = w.table.Renew(l.Attempt, l.Epoch, ttl, at(w.now))
		}
		if w.lost() {
			return
		}
		w.schedule(w.rng.Int64N(w.replyDelay+1), func() {
			w.tracker.RenewalAcked(seq, at(w.now), results)
		})
	})
}

// cancel fences an attempt and sends a revoke, which may be lost.
func (w *leaseWorld) cancel() {
	if len(w.live) == 0 {
		return
	}
	id := w.live[w.rng.IntN(len(w.live))]
	w.tracker.Fence(id)
	epoch, _ := w.tracker.Epoch(id)
	if w.lost() {
		return
	}
	w.schedule(w.oneWay(), func() { w.table.Revoke(id, epoch) })
}

// forget removes fenced attempts whose ExpiresBy has passed, as the gateway
// does before it reruns them.
func (w *leaseWorld) forget() {
	kept := w.live[:0]
	for _, id := range w.live {
		if w.tracker.Fenced(id) && !at(w.now).Before(w.tracker.ExpiresBy(id)) {
			epoch, _ := w.tracker.Epoch(id)
			w.tracker.Remove(id)
			w.removed[id] = epoch
			continue
		}
		kept = append(kept, id)
	}
	w.live = kept
}

// check verifies the invariant at the current instant.
func (w *leaseWorld) check() {
	if w.violation != "" {
		return
	}
	now := at(w.now)
	for _, id := range w.live {
		epoch, _ := w.tracker.Epoch(id)
		if !w.table.Valid(id, epoch, now) {
			continue
		}
		w.validSeen++
		by := w.tracker.ExpiresBy(id)
		agentExp, _ := w.table.ExpiresAt(id)
		if !by.After(now) || agentExp.After(by) {
			w.violation = fmt.Sprintf("t=%dms %s epoch %d: agent valid until %dms, gateway ExpiresBy %dms",
				w.now, id, epoch, agentExp.Sub(t0).Milliseconds(), by.Sub(t0).Milliseconds())
			return
		}
	}
	for id, epoch := range w.removed {
		if w.table.Valid(id, epoch, now) {
			w.violation = fmt.Sprintf("t=%dms %s epoch %d is valid after the gateway forgot it", w.now, id, epoch)
			return
		}
	}
}

// runLeaseWorld simulates duration ms and returns the first violation (or
// "") and how often an attempt was found valid and forgotten.
func runLeaseWorld(seed uint64, assumedDelivery, realDelivery int64, duration int64) (violation string, validSeen, removed int) {
	tracker, err := NewTracker(NewEpochs(seed<<16), TrackerConfig{
		TTL:         ms(300),
		DriftMargin: time.Nanosecond, // no slack: the bound itself must hold
		MaxDelivery: ms(assumedDelivery),
	})
	if err != nil {
		panic(err)
	}
	rng := rand.New(rand.NewPCG(seed, 0x1ea5e))
	w := &leaseWorld{
		rng:         rng,
		ttl:         ms(300),
		renewEvery:  100,
		delivery:    realDelivery,
		replyDelay:  int64(rng.IntN(600)),
		lossPercent: 5 + rng.IntN(40),
		tracker:     tracker,
		removed:     make(map[string]uint64),
		lastOfReq:   make(map[string]int),
	}
	var tick func()
	tick = func() {
		w.renew()
		switch r := w.rng.IntN(20); {
		case r < 4:
			w.grant()
		case r < 5:
			w.cancel()
		case r < 6 && len(w.live) > 0:
			w.tracker.Fence(w.live[w.rng.IntN(len(w.live))])
		case r < 7 && len(w.live) > 0:
			w.table.End(w.live[w.rng.IntN(len(w.live))])
		}
		w.forget()
		// Renewals go out every renewEvery with jitter, as a timer on a busy
		// gateway does.
		w.schedule(w.renewEvery+w.rng.Int64N(40)-20, tick)
	}
	w.schedule(0, tick)
	for w.queue.Len() > 0 && w.violation == "" {
		e := heap.Pop(&w.queue).(*netEvent)
		if e.at > duration {
			break
		}
		w.check() // just before the event: validity only shrinks between events
		w.now = e.at
		e.do()
		w.check()
	}
	return w.violation, w.validSeen, len(w.removed)
}

func TestInvariantAgentValidImpliesGatewayExpiresByLater(t *testing.T) {
	for _, delivery := range []int64{0, 60} {
		valid, removed := 0, 0
		for seed := uint64(1); seed <= 150; seed++ {
			v, n, r := runLeaseWorld(seed, delivery, delivery, 15_000)
			if v != "" {
				t.Fatalf("max delivery %dms, seed %d: %s", delivery, seed, v)
			}
			valid += n
			removed += r
		}
		// Not vacuous: leases were live most of the time, and fenced
		// attempts did reach their ExpiresBy and were forgotten.
		if valid < 10_000 || removed < 500 {
			t.Fatalf("max delivery %dms: only %d valid checks and %d removals", delivery, valid, removed)
		}
		t.Logf("max delivery %dms: %d valid checks, %d attempts fenced and forgotten", delivery, valid, removed)
	}
}

// TestInvariantCheckCatchesUnderestimatedDelivery is the control: when the
// network delays messages longer than the tracker assumes, the same schedule
// must find a violation, or the invariant check above proves nothing.
func TestInvariantCheckCatchesUnderestimatedDelivery(t *testing.T) {
	for seed := uint64(1); seed <= 150; seed++ {
		if v, _, _ := runLeaseWorld(seed, 0, 150, 15_000); v != "" {
			t.Logf("seed %d found: %s", seed, v)
			return
		}
	}
	t.Fatal("no violation found although deliveries exceed the assumed bound")
}
