package queue

import "time"

// drainWindow is how far back the drain rate looks; drainSamples how many services it
// remembers.
const (
	drainWindow  = time.Minute
	drainSamples = 64
)

// drainRate remembers when the last entries were served.
type drainRate struct {
	at   [drainSamples]time.Time
	next int // where the next service is written
	n    int // how many are written (at most drainSamples)
}

func (d *drainRate) served(now time.Time) {
	d.at[d.next] = now
	d.next = (d.next + 1) % drainSamples
	d.n = min(d.n+1, drainSamples)
}

// perSecond is the rate of services within drainWindow before now: the services in it over
// the time since the oldest of them. ok is false with fewer than two in it.
func (d *drainRate) perSecond(now time.Time) (rate float64, ok bool) {
	count := 0
	var oldest time.Time
	for i := 0; i < d.n; i++ {
		t := d.at[(d.next-1-i+drainSamples)%drainSamples]
		if now.Sub(t) > drainWindow {
			break
		}
		count++
		oldest = t
	}
	span := now.Sub(oldest)
	if count < 2 || span <= 0 {
		return 0, false
	}
	return float64(count) / span.Seconds(), true
}
