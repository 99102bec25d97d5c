package limits

import (
	"context"
	"sync"
	"time"
)

// Local counts in this process: each gateway enforces a key's limits on its own requests.
type Local struct {
	mu   sync.Mutex
	keys map[string]*localKey
}

type localKey struct {
	running  int64
	requests counter
	tokens   counter
}

// counter is one key's counts in the current window and the one before.
type counter struct {
	idx       int64
	prev, cur int64
}

// at returns the previous and current counts as of window idx.
func (c *counter) at(idx int64) (prev, cur int64) {
	switch idx - c.idx {
	case 0:
		return c.prev, c.cur
	case 1:
		return c.cur, 0
	}
	return 0, 0
}

func (c *counter) add(idx, n int64) {
	if idx < c.idx {
		return // a late count for a window gone by: it can no longer change a decision
	}
	c.prev, c.cur = c.at(idx)
	c.idx = idx
	c.cur += n
}

// NewLocal returns an empty Local backend.
func NewLocal() *Local { return &Local{keys: make(map[string]*localKey)} }

// Acquire implements Backend.
func (b *Local) Acquire(ctx context.Context, key, id string, l Limits, now time.Time) (Decision, error) {
	idx, elapsed := windowOf(now)
	b.mu.Lock()
	defer b.mu.Unlock()
	k := b.keys[key]
	if k == nil {
		k = &localKey{}
		b.keys[key] = k
	}
	var c counts
	c.reqPrev, c.reqCur = k.requests.at(idx)
	c.tokPrev, c.tokCur = k.tokens.at(idx)
	c.running = k.running
	v := verdict(c, l, elapsed)
	if v == Allowed {
		if l.RPM > 0 {
			k.requests.add(idx, 1)
			c.reqCur++
		}
		k.running++
		c.running++
	}
	return decide(c, v, l, elapsed), nil
}

// Release implements Backend.
func (b *Local) Release(ctx context.Context, key, id string, l Limits, tokens int64, now time.Time) error {
	idx, _ := windowOf(now)
	b.mu.Lock()
	defer b.mu.Unlock()
	k := b.keys[key]
	if k == nil {
		return nil
	}
	k.running = max(k.running-1, 0)
	if l.TPM > 0 && tokens > 0 {
		k.tokens.add(idx, tokens)
	}
	return nil
}
