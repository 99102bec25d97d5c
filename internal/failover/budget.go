package failover

import (
	"math"
	"time"
)

// RetryBudget is a pool-wide token bucket bounding reruns, so that a mass replica failure
// does not become a flood of repeated prefills: every request deposits Ratio tokens, time
// deposits PerSecond tokens per second, a rerun withdraws one, and the bucket holds at most
// Burst. Its methods are safe on a nil receiver (no budget: every rerun allowed), so "no
// budget configured" needs no special case. It is not safe for concurrent use; the shell
// serialises access.
type RetryBudget struct {
	Ratio     float64
	PerSecond float64
	Burst     float64

	tokens float64
	last   time.Time
}

// NewRetryBudget returns a full bucket.
func NewRetryBudget(ratio, perSecond, burst float64, now time.Time) *RetryBudget {
	return &RetryBudget{Ratio: ratio, PerSecond: perSecond, Burst: burst, tokens: burst, last: now}
}

func (b *RetryBudget) refill(now time.Time) {
	if dt := now.Sub(b.last); dt > 0 {
		b.tokens = math.Min(b.Burst, b.tokens+dt.Seconds()*b.PerSecond)
		b.last = now
	}
}

// OnRequest deposits a new request's share.
func (b *RetryBudget) OnRequest(now time.Time) {
	if b == nil {
		return
	}
	b.refill(now)
	b.tokens = math.Min(b.Burst, b.tokens+b.Ratio)
}

// TryRerun withdraws one token if there is one.
func (b *RetryBudget) TryRerun(now time.Time) bool {
	if b == nil {
		return true
	}
	b.refill(now)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// Tokens reports the current balance (for metrics).
func (b *RetryBudget) Tokens(now time.Time) float64 {
	if b == nil {
		return math.Inf(1)
	}
	b.refill(now)
	return b.tokens
}
