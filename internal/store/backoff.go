package store

import (
	"math/rand/v2"
	"time"
)

// RetryDelay is the wait before the n-th retry (n ≥ 1) of a connection: base doubled
// n-1 times, capped at most, of which the second half is random ("equal jitter"). The
// random half keeps gateways that lost their store together from knocking on it in step
// when it comes back; the fixed half keeps a retry from following a failure at once.
// rnd is the jitter's source (seeded by the caller, so that tests can predict it).
func RetryDelay(n int, base, most time.Duration, rnd *rand.Rand) time.Duration {
	if n < 1 {
		n = 1
	}
	d := base
	for i := 1; i < n && d < most; i++ {
		d *= 2
	}
	d = min(d, most)
	half := d / 2
	if half <= 0 {
		return d
	}
	return d - half + time.Duration(rnd.Int64N(int64(half)+1))
}
