package upstream

import (
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// ErrWoken is what Read returns when its wait for the engine was cut short, by Wake or by
// the deadline of SetWakeAt, before anything arrived. The response is intact: nothing was
// consumed, and Read may be called again.
var ErrWoken = errors.New("upstream: read woken before the engine sent anything")

// aLongTimeAgo is a read deadline in the past: it ends a blocked read at once.
var aLongTimeAgo = time.Unix(1, 0)

// wakeState lets a goroutine that reads the body itself, and must also answer to other
// events (a request's owner: docs/design.md §6), be woken from its wait on the engine. A
// wake is a read deadline in the past; a timer of the reader's own is a deadline at that
// time. Both end the blocked read with ErrWoken and leave the connection as it was.
type wakeState struct {
	on bool // EnableWake was called: the reader's
	// at is the deadline the reader last set; stale says the socket's deadline is no longer
	// at (a wake or an expiry moved it), so that the next SetWakeAt sets it again. The
	// reader's.
	at    time.Time
	stale bool
	// woken is set by Wake before it moves the deadline, and taken by Woken.
	woken atomic.Bool
	// mu guards nc against the response ending while another goroutine wakes it: a wake
	// must never reach a connection that went back to the pool and serves another request.
	mu sync.Mutex
	nc net.Conn
}

// EnableWake makes the response's reads wakeable (Wake, SetWakeAt). Call it once, from the
// goroutine that reads the body, after Do.
func (r *Response) EnableWake() {
	if r.wake.on || r.cn == nil {
		return
	}
	r.wake.on = true
	r.wake.mu.Lock()
	r.wake.nc = r.cn.nc
	r.wake.mu.Unlock()
}

// Wake ends the body reader's current or next wait on the engine with ErrWoken, and has
// Woken report true. Safe from any goroutine, at any time: once the exchange is over it
// does nothing.
func (r *Response) Wake() {
	r.wake.woken.Store(true)
	r.wake.mu.Lock()
	if r.wake.nc != nil {
		r.wake.nc.SetReadDeadline(aLongTimeAgo)
	}
	r.wake.mu.Unlock()
}

// Woken reports, and clears, whether Wake was called since Woken last reported true. The
// reader calls SetWakeAt, then Woken, then reads: a Wake that comes before the deadline
// is set is seen by Woken, and one that comes after it ends the read.
func (r *Response) Woken() bool {
	if !r.wake.woken.Load() {
		return false
	}
	r.wake.woken.Store(false)
	r.wake.stale = true
	return true
}

// SetWakeAt has a read that is still waiting for the engine at t end with ErrWoken (zero t:
// never). It touches the socket only when t differs from what is set.
func (r *Response) SetWakeAt(t time.Time) {
	if !r.wake.on || r.cn == nil || (!r.wake.stale && t.Equal(r.wake.at)) {
		return
	}
	r.wake.at, r.wake.stale = t, false
	r.cn.nc.SetReadDeadline(t)
}

// woke reports whether err, from a read of the head or the body, is the end of a wait set
// by Wake or SetWakeAt rather than a failure of the connection: a deadline error while no
// Wake is pending and the reader's own time has not come is not a wake of ours.
func (r *Response) woke(err error) bool {
	if !r.wake.on || !errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	if !r.wake.woken.Load() && (r.wake.at.IsZero() || time.Now().Before(r.wake.at)) {
		return false
	}
	r.wake.stale = true
	return true
}

// detachWake ends the wakes of an exchange that is over, before its connection is pooled
// or closed: a pooled connection keeps no deadline, and no late Wake reaches it.
func (r *Response) detachWake() {
	if !r.wake.on {
		return
	}
	r.wake.mu.Lock()
	nc := r.wake.nc
	r.wake.nc = nil
	r.wake.mu.Unlock()
	if nc != nil && (r.wake.stale || !r.wake.at.IsZero()) {
		nc.SetReadDeadline(time.Time{})
	}
}
