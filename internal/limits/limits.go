package limits

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Window is the length of the per-minute limits.
const Window = time.Minute

// Limits are one key's limits; 0 means none.
type Limits struct {
	MaxConcurrent int64
	RPM           int64 // requests per minute
	TPM           int64 // output tokens per minute
}

// None reports whether l limits nothing.
func (l Limits) None() bool { return l.MaxConcurrent <= 0 && l.RPM <= 0 && l.TPM <= 0 }

// Kind is the limit a request was refused for.
type Kind int

const (
	Allowed Kind = iota
	Requests
	Tokens
	Concurrency
)

func (k Kind) String() string {
	switch k {
	case Requests:
		return "requests"
	case Tokens:
		return "tokens"
	case Concurrency:
		return "concurrency"
	}
	return "allowed"
}

// Quota is what one per-minute limit says of a key after a decision, as OpenAI's
// x-ratelimit-* headers carry it.
type Quota struct {
	Limit     int64
	Remaining int64
	// Reset is how long until the key's use is back to none (all of Limit available).
	Reset time.Duration
}

// Decision is the answer to Acquire.
type Decision struct {
	// Refused is the limit the request was refused for; Allowed when it may start.
	Refused Kind
	// RetryAfter is how long until the refused limit admits a request, if the key sends
	// nothing else meanwhile (a concurrency slot: a nominal second, since a slot frees
	// when some running request ends).
	RetryAfter time.Duration
	// Requests and Tokens are set when the key has an RPM or TPM limit.
	Requests, Tokens *Quota
	// Concurrent is the key's requests running, this one included when allowed.
	Concurrent int64
}

// counts is what a backend read of a key when it decided: the previous and current
// window's counters of requests and tokens, and the running requests.
type counts struct {
	reqPrev, reqCur int64
	tokPrev, tokCur int64
	running         int64
}

// windowOf returns the index of the window holding now and how far into it now is.
func windowOf(now time.Time) (int64, time.Duration) {
	ms := now.UnixMilli()
	w := Window.Milliseconds()
	idx := floorDiv(ms, w)
	return idx, time.Duration(ms-idx*w) * time.Millisecond
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// estimate is the sliding count: the current window's, plus the previous window's weighted
// by the share of it the last Window still covers. The Redis script computes the same.
func estimate(prev, cur int64, elapsed time.Duration) float64 {
	w := float64(Window.Milliseconds())
	return float64(prev)*(w-float64(elapsed.Milliseconds()))/w + float64(cur)
}

// admits reports whether one more unit fits under limit (0: no limit).
func admits(prev, cur int64, elapsed time.Duration, limit int64) bool {
	return limit <= 0 || estimate(prev, cur, elapsed)+1 <= float64(limit)
}

// waitFor is how long until one more unit fits under limit, if nothing else is counted
// meanwhile: within the current window as the previous one's weight decays, or else in
// the next one, once the current count has decayed enough.
func waitFor(prev, cur int64, elapsed time.Duration, limit int64) time.Duration {
	if admits(prev, cur, elapsed, limit) {
		return 0
	}
	w := float64(Window.Milliseconds())
	e := float64(elapsed.Milliseconds())
	var ms float64
	if cur+1 <= limit && prev > 0 {
		ms = w - e - float64(limit-cur-1)*w/float64(prev)
	} else {
		next := w - float64(limit-1)*w/float64(cur)
		ms = (w - e) + max(next, 0)
	}
	return time.Duration(math.Ceil(max(ms, 1))) * time.Millisecond
}

// quota describes one per-minute limit after a decision.
func quota(prev, cur int64, elapsed time.Duration, limit int64) *Quota {
	if limit <= 0 {
		return nil
	}
	q := &Quota{Limit: limit, Remaining: int64(math.Floor(float64(limit) - estimate(prev, cur, elapsed)))}
	q.Remaining = max(q.Remaining, 0)
	switch {
	case cur > 0:
		q.Reset = 2*Window - elapsed
	case prev > 0:
		q.Reset = Window - elapsed
	}
	return q
}

// decide turns a backend's counts into a Decision; refused is the backend's verdict (the
// Redis script decides atomically), computed here with the same rule for Local.
func decide(c counts, refused Kind, l Limits, elapsed time.Duration) Decision {
	d := Decision{Refused: refused, Concurrent: c.running,
		Requests: quota(c.reqPrev, c.reqCur, elapsed, l.RPM), Tokens: quota(c.tokPrev, c.tokCur, elapsed, l.TPM)}
	switch refused {
	case Requests:
		d.RetryAfter = waitFor(c.reqPrev, c.reqCur, elapsed, l.RPM)
	case Tokens:
		d.RetryAfter = waitFor(c.tokPrev, c.tokCur, elapsed, l.TPM)
	case Concurrency:
		d.RetryAfter = time.Second
	}
	return d
}

// verdict is the admission rule both backends apply, in this order: requests per minute,
// tokens per minute, running requests.
func verdict(c counts, l Limits, elapsed time.Duration) Kind {
	switch {
	case !admits(c.reqPrev, c.reqCur, elapsed, l.RPM):
		return Requests
	case !admits(c.tokPrev, c.tokCur, elapsed, l.TPM):
		return Tokens
	case l.MaxConcurrent > 0 && c.running >= l.MaxConcurrent:
		return Concurrency
	}
	return Allowed
}

// Backend counts keys' use.
type Backend interface {
	// Acquire decides whether request id of key may start at now under l; when it may, it
	// counts the request and takes one of the key's concurrency slots (if l limits them).
	Acquire(ctx context.Context, key, id string, l Limits, now time.Time) (Decision, error)
	// Release ends request id: its slot is freed and its output tokens counted at now.
	Release(ctx context.Context, key, id string, l Limits, tokens int64, now time.Time) error
}

// ErrUnavailable is returned by Limiter.Acquire when the shared backend is unreachable and
// the limiter fails closed.
var ErrUnavailable = errors.New("limits: the limits backend is unreachable")

// retryBackend is how long a Limiter keeps away from a shared backend that failed before
// trying it again: requests meanwhile do not each wait for a dial to time out.
const retryBackend = time.Second

// Limiter decides admissions on a shared backend (Redis), or on local counts alone.
type Limiter struct {
	shared     *Redis // nil: local only
	local      *Local
	failClosed bool
	log        *slog.Logger

	up      atomic.Bool
	mu      sync.Mutex
	retryAt time.Time // while the shared backend is down: when to try it again
}

// Options configure a Limiter.
type Options struct {
	// Shared is the shared backend; nil counts in this process only.
	Shared *Redis
	// FailClosed refuses keys with limits while Shared is unreachable, instead of counting
	// them locally.
	FailClosed bool
	Logger     *slog.Logger
}

// New returns a Limiter.
func New(o Options) *Limiter {
	l := &Limiter{shared: o.Shared, local: NewLocal(), failClosed: o.FailClosed, log: o.Logger}
	if l.log == nil {
		l.log = slog.Default()
	}
	l.up.Store(true)
	return l
}

// Up reports whether the backend counting is the configured one: always true without a
// shared backend; false while the shared one is unreachable.
func (l *Limiter) Up() bool { return l.up.Load() }

// Ticket is one admitted request; Done ends it.
type Ticket struct {
	b      Backend
	key    string
	id     string
	limits Limits
	done   atomic.Bool
	lim    *Limiter
}

// Acquire decides whether request id of key may start. An allowed request gets a Ticket,
// which must be ended with Done. A refused one gets no ticket and the decision says why.
// err is ErrUnavailable when the shared backend is down and the limiter fails closed.
func (l *Limiter) Acquire(ctx context.Context, key, id string, lim Limits, now time.Time) (*Ticket, Decision, error) {
	if lim.None() {
		return &Ticket{lim: l}, Decision{}, nil
	}
	var b Backend = l.local
	if l.shared != nil && l.tryShared(now) {
		d, err := l.shared.Acquire(ctx, key, id, lim, now)
		switch {
		case err == nil:
			l.sharedUp()
			return l.ticket(l.shared, key, id, lim, d), d, nil
		case ctx.Err() != nil:
			return nil, Decision{}, ctx.Err()
		}
		l.sharedDown(now, err)
	}
	if l.shared != nil && l.failClosed {
		return nil, Decision{}, ErrUnavailable
	}
	d, err := b.Acquire(ctx, key, id, lim, now)
	if err != nil {
		return nil, Decision{}, err
	}
	return l.ticket(b, key, id, lim, d), d, nil
}

func (l *Limiter) ticket(b Backend, key, id string, lim Limits, d Decision) *Ticket {
	if d.Refused != Allowed {
		return nil
	}
	return &Ticket{b: b, key: key, id: id, limits: lim, lim: l}
}

// Done ends the request, counting the output tokens it delivered. It is safe to call more
// than once (the first call counts) and on a nil Ticket.
func (t *Ticket) Done(tokens int64, now time.Time) {
	if t == nil || t.b == nil || t.done.Swap(true) {
		return
	}
	// The request is over; the client may be gone, but its tokens still count.
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if err := t.b.Release(ctx, t.key, t.id, t.limits, tokens, now); err != nil {
		// A lost release costs at most the slot's lease (it expires) and these tokens.
		t.lim.log.Warn("limits: request end not counted", "key_id", t.key, "request_id", t.id, "err", err)
	}
}

// releaseTimeout bounds the write that ends a request.
const releaseTimeout = 2 * time.Second

// tryShared reports whether the shared backend should be asked now: it is up, or its
// retry time has come.
func (l *Limiter) tryShared(now time.Time) bool {
	if l.up.Load() {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return !now.Before(l.retryAt)
}

func (l *Limiter) sharedUp() {
	if l.up.Load() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.up.Swap(true) {
		l.log.Info("limits backend reachable again; limits are shared again")
	}
}

func (l *Limiter) sharedDown(now time.Time, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.retryAt = now.Add(retryBackend)
	if l.up.Swap(false) {
		if l.failClosed {
			l.log.Error("limits backend unreachable; refusing keys that have limits until it is back", "err", err)
		} else {
			l.log.Warn("limits backend unreachable; counting on this gateway alone until it is back", "err", err)
		}
	}
}

// Refresh extends the leases of the requests this gateway runs on the shared backend (see
// Redis.Refresh); Run calls it periodically.
func (l *Limiter) Refresh(ctx context.Context, now time.Time) error {
	if l.shared == nil {
		return nil
	}
	return l.shared.Refresh(ctx, now)
}

// Run refreshes leases every third of the lease until ctx ends, reading the time from now.
func (l *Limiter) Run(ctx context.Context, now func() time.Time) {
	if l.shared == nil {
		return
	}
	t := time.NewTicker(l.shared.lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := l.Refresh(ctx, now()); err != nil && ctx.Err() == nil {
				l.log.Debug("limits: leases not refreshed", "err", err)
			}
		}
	}
}

// Close releases the shared backend's connections.
func (l *Limiter) Close() error {
	if l.shared == nil {
		return nil
	}
	return l.shared.Close()
}
