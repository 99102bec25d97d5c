package faultproxy

import (
	"fmt"
	"time"
)

// Direction names the way bytes travel through the proxy. The values are bits, so Both is
// Upstream|Downstream.
type Direction int

const (
	// Upstream is client → target: what the dialling party sends.
	Upstream Direction = iota + 1
	// Downstream is target → client: what the dialled party answers.
	Downstream
	// Both is Upstream and Downstream together.
	Both
)

// String names the direction for test failure messages.
func (d Direction) String() string {
	switch d {
	case Upstream:
		return "upstream"
	case Downstream:
		return "downstream"
	case Both:
		return "both"
	default:
		return fmt.Sprintf("Direction(%d)", int(d))
	}
}

// valid reports whether d is one of the three named directions.
func (d Direction) valid() bool { return d >= Upstream && d <= Both }

// faultState is what the proxy currently does to forwarded bytes. It is guarded by the
// proxy's mu; wake is closed and replaced on every change so that chunks held by a fault
// are re-examined at once (Heal releases them without waiting out their timers).
type faultState struct {
	blackHoled Direction // bit set of black-holed directions
	latency    time.Duration
	wake       chan struct{}
}

func newFaultState() faultState {
	return faultState{wake: make(chan struct{})}
}

// faultView is one direction's view of the fault state at one moment.
type faultView struct {
	blackHoled bool
	latency    time.Duration
	changed    <-chan struct{} // closed when the fault state next changes
}

// view returns what is currently done to bytes travelling in dir.
func (p *Proxy) view(dir Direction) faultView {
	p.mu.Lock()
	defer p.mu.Unlock()
	return faultView{
		blackHoled: p.faults.blackHoled&dir != 0,
		latency:    p.faults.latency,
		changed:    p.faults.wake,
	}
}

// changeFaults applies change to the fault state and wakes every held chunk.
func (p *Proxy) changeFaults(change func(*faultState)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	change(&p.faults)
	close(p.faults.wake)
	p.faults.wake = make(chan struct{})
}

// BlackHole stops forwarding in dir, adding to any direction already black-holed, as a
// network partition does while both hosts stay up: connections stay open, the sender's
// writes keep succeeding, and every byte that would cross in dir is read and dropped
// (counted in Stats) rather than held, so Heal does not deliver what was sent during the
// partition. Connections accepted while black-holed are black-holed too. A close or reset
// by the sending side is held, not dropped, and passed on after Heal, so a party that gives
// up during a partition is not seen to do so across it. It panics on an unknown direction.
func (p *Proxy) BlackHole(dir Direction) {
	if !dir.valid() {
		panic(fmt.Sprintf("faultproxy: BlackHole(%v): unknown direction", dir))
	}
	p.changeFaults(func(f *faultState) { f.blackHoled |= dir })
}

// Latency delays every chunk forwarded in either direction by d from the moment the proxy
// read it, keeping the order of each direction. It applies to chunks already waiting: a
// shorter d releases them sooner. Zero or a negative d removes the delay.
func (p *Proxy) Latency(d time.Duration) {
	p.changeFaults(func(f *faultState) { f.latency = max(d, 0) })
}

// Heal clears every black hole and the latency; chunks waiting out a delay are forwarded
// at once. It does not undo Refuse, and it cannot bring back bytes already dropped.
func (p *Proxy) Heal() {
	p.changeFaults(func(f *faultState) {
		f.blackHoled = 0
		f.latency = 0
	})
}

// Reset severs every connection open now, on both sides, with a TCP reset (linger 0): the
// client's next read or write fails with ECONNRESET, and so does the target's. Connections
// accepted afterwards are not affected.
func (p *Proxy) Reset() {
	p.mu.Lock()
	links := p.linksLocked()
	p.mu.Unlock()
	for _, l := range links {
		l.end(true)
	}
}
