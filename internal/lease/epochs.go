package lease

import (
	"sync/atomic"
	"time"
)

// Epochs is the gateway-wide epoch counter: every Grant on every Tracker of a
// gateway draws from one Epochs, so epochs only grow across all agents and
// all logical requests. It is safe for concurrent use.
type Epochs struct {
	last atomic.Uint64
}

// NewEpochs returns a counter whose first epoch is seed+1. Pass SeedFromTime
// of the gateway's start so a restarted gateway keeps growing past every
// epoch its previous run granted.
func NewEpochs(seed uint64) *Epochs {
	e := &Epochs{}
	e.last.Store(seed)
	return e
}

// Next returns a new epoch, greater than every epoch returned before.
func (e *Epochs) Next() uint64 { return e.last.Add(1) }

// SeedFromTime returns start's Unix time in milliseconds shifted left by 16
// bits. A run that starts at least one millisecond after the previous run
// started begins above every epoch the previous run could have granted,
// unless that run granted more than 65,536 epochs per millisecond of its life,
// which no gateway does.
func SeedFromTime(start time.Time) uint64 {
	return uint64(start.UnixMilli()) << 16
}
