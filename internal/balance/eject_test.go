package balance

import (
	"strings"
	"testing"
	"time"
)

// ejectPool is two replicas, a and b, that eject after three consecutive failures with a
// ten-second cooldown.
func ejectPool() *Pool {
	return &Pool{Model: "m", Cooldown: 10 * time.Second, EjectAfter: 3, Replicas: []*Replica{{Name: "a"}, {Name: "b"}}}
}

// Counting: each step is "F" (an attempt on a failed), "C" (one completed); ejected says
// after which step a is first ejected (0: never).
func TestEjectionCountsConsecutiveFailures(t *testing.T) {
	for _, tc := range []struct {
		name       string
		ejectAfter int
		steps      string
		ejected    int
		failures   int // a's count after the last step
	}{
		{"three in a row", 3, "FFF", 3, 0},
		{"two are not enough", 3, "FF", 0, 2},
		{"a completion resets the count", 3, "FFCFF", 0, 2},
		{"a completion resets, then three in a row", 3, "FFCFFF", 6, 0},
		{"alternating never ejects", 3, "FCFCFCFC", 0, 0},
		{"one is enough with eject_after 1", 1, "CF", 2, 0},
		{"off", 0, "FFFFFFFFFF", 0, 0},
		{"off (negative)", -1, "FFFFFFFFFF", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ejectPool()
			p.EjectAfter = tc.ejectAfter
			a, now := p.Find("a"), time.Unix(1000, 0)
			got := 0
			for i, s := range tc.steps {
				switch s {
				case 'F':
					e := p.AttemptFailed(a, now, "connection_reset")
					if e.Ejected && got == 0 {
						got = i + 1
					}
				case 'C':
					p.AttemptCompleted(a)
				}
				now = now.Add(time.Millisecond)
			}
			if got != tc.ejected {
				t.Fatalf("first ejected after step %d, want %d", got, tc.ejected)
			}
			if a.ConsecutiveFailures() != tc.failures {
				t.Fatalf("%d consecutive failures, want %d", a.ConsecutiveFailures(), tc.failures)
			}
			if st := a.StateAt(now, p.Limits); (st == Dead) != (tc.ejected > 0) {
				t.Fatalf("state %v", st)
			}
		})
	}
}

func TestEjectionStateAndReason(t *testing.T) {
	p, now := ejectPool(), time.Unix(1000, 0)
	a := p.Find("a")
	for i := 1; i <= 2; i++ {
		if e := p.AttemptFailed(a, now, "connection_reset"); e.Ejected || e.Held || e.Failures != i {
			t.Fatalf("failure %d: %+v", i, e)
		}
	}
	e := p.AttemptFailed(a, now, "engine_status_500")
	want := "ejected after 3 consecutive failed attempts (engine_status_500)"
	if !e.Ejected || e.For != 10*time.Second || !e.Until.Equal(now.Add(10*time.Second)) || e.Reason != want || e.Last != "engine_status_500" {
		t.Fatalf("ejection %+v", e)
	}
	if st := a.StateAt(now, p.Limits); st != Dead || a.ReasonAt(now) != want {
		t.Fatalf("ejected replica is %v (%q)", st, a.ReasonAt(now))
	}
	if ok, until := a.Ejected(now); !ok || !until.Equal(e.Until) {
		t.Fatalf("Ejected = %v, %v", ok, until)
	}
	if at := a.AvailableAt(now); !at.Equal(e.Until) {
		t.Fatalf("available at %v, want %v", at, e.Until)
	}
	if r := p.Pick(now, nil, AffinityKey(strings.Repeat("x", 64), 32)).Replica; r == nil || r.Name != "b" {
		t.Fatalf("picked %v while a is ejected", r)
	}
	// Attempts that started before the ejection and fail during it count for nothing.
	if e := p.AttemptFailed(a, now.Add(time.Second), "connection_reset"); e != (Ejection{}) || a.ConsecutiveFailures() != 0 {
		t.Fatalf("a failure during the ejection: %+v, count %d", e, a.ConsecutiveFailures())
	}
	// The ejection ends on time.
	end := now.Add(10 * time.Second)
	if st := a.StateAt(end.Add(-time.Nanosecond), p.Limits); st != Dead {
		t.Fatalf("state %v just before the ejection ends", st)
	}
	if st := a.StateAt(end, p.Limits); st != Healthy || a.ReasonAt(end) != "" {
		t.Fatalf("state %v (%q) once the ejection ended", st, a.ReasonAt(end))
	}
	// It needs EjectAfter new failures to be ejected again.
	if e := p.AttemptFailed(a, end, "connection_reset"); e.Ejected || e.Failures != 1 {
		t.Fatalf("first failure after the ejection: %+v", e)
	}
}

// Each ejection lasts twice the previous, up to 8× the cooldown; a replica that went a
// whole maximum ejection time after its last ejection without another starts over.
func TestEjectionDoublesCapsAndDecays(t *testing.T) {
	const cool = 10 * time.Second
	for _, tc := range []struct {
		name string
		// gaps: how long after the previous ejection ended each ejection happens.
		gaps []time.Duration
		want []time.Duration
	}{
		{"doubling to the cap", []time.Duration{0, 0, 0, 0, 0, 0},
			[]time.Duration{cool, 2 * cool, 4 * cool, 8 * cool, 8 * cool, 8 * cool}},
		{"back soon keeps doubling", []time.Duration{0, time.Second, 79 * time.Second, 79 * time.Second},
			[]time.Duration{cool, 2 * cool, 4 * cool, 8 * cool}},
		{"a whole max ejection time without one decays", []time.Duration{0, 0, 0, 80 * time.Second, 0},
			[]time.Duration{cool, 2 * cool, 4 * cool, cool, 2 * cool}},
		{"decay from the cap", []time.Duration{0, 0, 0, 0, 0, 81 * time.Second, 0},
			[]time.Duration{cool, 2 * cool, 4 * cool, 8 * cool, 8 * cool, cool, 2 * cool}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ejectPool()
			a := p.Find("a")
			if p.MaxEjection() != 80*time.Second {
				t.Fatalf("max ejection %v", p.MaxEjection())
			}
			now := time.Unix(1000, 0)
			for i, gap := range tc.gaps {
				now = now.Add(gap)
				var e Ejection
				for range p.EjectAfter {
					e = p.AttemptFailed(a, now, "connection_reset")
				}
				if !e.Ejected || e.For != tc.want[i] {
					t.Fatalf("ejection %d: %+v, want one for %v", i+1, e, tc.want[i])
				}
				now = e.Until
			}
		})
	}
}

// A passing probe ends a dial failure's cooldown but not an ejection: its health endpoint
// passing is the case ejection is for. An operator's "active" (Readmit) ends it.
func TestProbeDoesNotEndEjection(t *testing.T) {
	p, now := ejectPool(), time.Unix(1000, 0)
	a := p.Find("a")
	for range 3 {
		p.AttemptFailed(a, now, "connection_reset")
	}
	p.ProbeResult(a, true, "")
	if st := a.StateAt(now.Add(time.Second), p.Limits); st != Dead || !strings.HasPrefix(a.ReasonAt(now), "ejected after 3") {
		t.Fatalf("after a passing probe: %v (%q)", st, a.ReasonAt(now))
	}
	// A dial failure during the ejection, then a passing probe: still ejected.
	p.MarkDialFailed(a, now.Add(time.Second), "connection_refused")
	p.ProbeResult(a, true, "")
	if st := a.StateAt(now.Add(2*time.Second), p.Limits); st != Dead {
		t.Fatalf("after a dial failure and a passing probe: %v", st)
	}
	// A failed probe does not shorten it either, nor does its end end the ejection.
	p.ProbeResult(a, false, "probe: 500")
	p.ProbeResult(a, true, "")
	if st := a.StateAt(now.Add(9*time.Second), p.Limits); st != Dead {
		t.Fatalf("after probes: %v", st)
	}
	// Completed attempts that started before it reset the count, not the ejection.
	p.AttemptCompleted(a)
	if st := a.StateAt(now.Add(9*time.Second), p.Limits); st != Dead {
		t.Fatalf("after a completed attempt: %v", st)
	}
	p.Readmit(a, now.Add(5*time.Second))
	if st := a.StateAt(now.Add(5*time.Second), p.Limits); st != Healthy {
		t.Fatalf("after an operator readmitted it: %v", st)
	}
}

// The failures may be the network's or the requests' rather than the replicas': a replica
// is never ejected when no other replica of the pool is healthy. It is held, counting on,
// and ejected at its next failure once another replica is healthy again.
func TestNeverEjectTheLastHealthyReplica(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		name  string
		other func(p *Pool, b *Replica) // makes b what it is
		held  bool
	}{
		{"b healthy", func(p *Pool, b *Replica) {}, false},
		{"b dead after a dial failure", func(p *Pool, b *Replica) { p.MarkDialFailed(b, now, "connection_refused") }, true},
		{"b unhealthy", func(p *Pool, b *Replica) { p.ProbeResult(b, false, "probe: 500") }, true},
		{"b draining", func(p *Pool, b *Replica) { p.SetDraining(b, true, "operator") }, true},
		{"b overloaded", func(p *Pool, b *Replica) { p.MarkOverloaded(b, now.Add(time.Minute), "engine_status_429") }, true},
		{"b at max_outstanding", func(p *Pool, b *Replica) { p.Limits.MaxOutstanding = 1; b.Outstanding = 1 }, true},
		{"b incompatible", func(p *Pool, b *Replica) { p.SetIncompatible(b, "revision differs") }, true},
		{"b ejected", func(p *Pool, b *Replica) {
			for range p.EjectAfter {
				p.AttemptFailed(b, now, "connection_reset")
			}
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ejectPool()
			a, b := p.Find("a"), p.Find("b")
			tc.other(p, b)
			var e Ejection
			for range 3 {
				e = p.AttemptFailed(a, now, "connection_reset")
			}
			if e.Held != tc.held || e.Ejected == tc.held || e.Failures != 3 {
				t.Fatalf("third failure: %+v, want held %v", e, tc.held)
			}
			if st := a.StateAt(now, p.Limits); (st == Healthy) != tc.held {
				t.Fatalf("a is %v", st)
			}
			if !tc.held {
				return
			}
			// Held: it counts on, and stays held while b is out.
			if e := p.AttemptFailed(a, now, "connection_reset"); !e.Held || e.Failures != 4 {
				t.Fatalf("fourth failure: %+v", e)
			}
			// b comes back: a's next failure ejects it.
			p2 := ejectPool()
			p.Replicas[1] = p2.Find("b")
			p.Limits = Limits{}
			if e := p.AttemptFailed(a, now, "connection_reset"); !e.Ejected || e.Failures != 5 ||
				e.Reason != "ejected after 5 consecutive failed attempts (connection_reset)" {
				t.Fatalf("with b healthy again: %+v", e)
			}
		})
	}
	// A pool of one replica never ejects it.
	p := &Pool{Model: "m", Cooldown: time.Second, EjectAfter: 1, Replicas: []*Replica{{Name: "only"}}}
	for i := 1; i <= 5; i++ {
		if e := p.AttemptFailed(p.Replicas[0], now, "engine_status_500"); !e.Held || e.Failures != i {
			t.Fatalf("failure %d of the only replica: %+v", i, e)
		}
	}
	if st := p.Replicas[0].StateAt(now, p.Limits); st != Healthy {
		t.Fatalf("the only replica is %v", st)
	}
}
