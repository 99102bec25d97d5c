package limits_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/faultproxy"
	"github.com/fencegate/fencegate/internal/limits"
	"github.com/fencegate/fencegate/internal/limits/redistest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 starts a window; every test moves time by hand.
var t0 = time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// backend makes one gateway's view of a backend; shared backends made by one factory in
// one test share their counts.
type factory func(t *testing.T) func() limits.Backend

func localFactory(t *testing.T) func() limits.Backend {
	b := limits.NewLocal()
	return func() limits.Backend { return b }
}

func redisFactory(t *testing.T) func() limits.Backend {
	u := redistest.URL(t)
	prefix := redistest.Prefix(t, u)
	return func() limits.Backend { return newRedis(t, u, prefix) }
}

func newRedis(t *testing.T, u, prefix string) *limits.Redis {
	t.Helper()
	r, err := limits.NewRedis(limits.RedisOptions{URL: u, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

var backends = []struct {
	name string
	make factory
}{{"local", localFactory}, {"redis", redisFactory}}

func acquire(t *testing.T, b limits.Backend, key, id string, l limits.Limits, now time.Time) limits.Decision {
	t.Helper()
	d, err := b.Acquire(t.Context(), key, id, l, now)
	if err != nil {
		t.Fatalf("Acquire(%s, %s): %v", key, id, err)
	}
	return d
}

func release(t *testing.T, b limits.Backend, key, id string, l limits.Limits, tokens int64, now time.Time) {
	t.Helper()
	if err := b.Release(t.Context(), key, id, l, tokens, now); err != nil {
		t.Fatalf("Release(%s, %s): %v", key, id, err)
	}
}

func wantRefused(t *testing.T, d limits.Decision, kind limits.Kind, what string) {
	t.Helper()
	if d.Refused != kind {
		t.Fatalf("%s: refused for %v, want %v (decision %+v)", what, d.Refused, kind, d)
	}
}

// The rules every backend keeps, each on one gateway.
func TestBackends(t *testing.T) {
	for _, bk := range backends {
		t.Run(bk.name, func(t *testing.T) {
			t.Run("Concurrency", func(t *testing.T) { testConcurrency(t, bk.make(t)()) })
			t.Run("RequestsPerMinute", func(t *testing.T) { testRPM(t, bk.make(t)()) })
			t.Run("TokensPerMinute", func(t *testing.T) { testTPM(t, bk.make(t)()) })
			t.Run("SlidingWindow", func(t *testing.T) { testSliding(t, bk.make(t)()) })
			t.Run("KeysApart", func(t *testing.T) { testKeysApart(t, bk.make(t)()) })
		})
	}
}

func testConcurrency(t *testing.T, b limits.Backend) {
	l := limits.Limits{MaxConcurrent: 2}
	for _, id := range []string{"r1", "r2"} {
		if d := acquire(t, b, "k", id, l, t0); d.Refused != limits.Allowed {
			t.Fatalf("%s refused: %+v", id, d)
		}
	}
	d := acquire(t, b, "k", "r3", l, t0)
	wantRefused(t, d, limits.Concurrency, "a third request at once")
	if d.RetryAfter != time.Second || d.Requests != nil || d.Tokens != nil {
		t.Errorf("decision %+v: want a nominal 1s and no per-minute quotas", d)
	}
	release(t, b, "k", "r1", l, 0, t0)
	if d := acquire(t, b, "k", "r3", l, t0); d.Refused != limits.Allowed || d.Concurrent != 2 {
		t.Fatalf("after a release: %+v", d)
	}
}

func testRPM(t *testing.T, b limits.Backend) {
	l := limits.Limits{RPM: 3}
	now := t0.Add(10 * time.Second)
	for i := range 3 {
		d := acquire(t, b, "k", fmt.Sprint("r", i), l, now)
		if d.Refused != limits.Allowed || d.Requests == nil || d.Requests.Limit != 3 || d.Requests.Remaining != int64(2-i) {
			t.Fatalf("request %d: %+v %+v", i, d, d.Requests)
		}
		if d.Requests.Reset != 2*time.Minute-10*time.Second {
			t.Errorf("request %d: reset %s, want 1m50s (the current window's count slides out by then)", i, d.Requests.Reset)
		}
		release(t, b, "k", fmt.Sprint("r", i), l, 0, now)
	}
	d := acquire(t, b, "k", "r3", l, now)
	wantRefused(t, d, limits.Requests, "a fourth request in a minute")
	// Three in this window: the next fits once they weigh 2 in the next one, 20 s into it.
	if want := 50*time.Second + 20*time.Second; d.RetryAfter != want {
		t.Errorf("retry after %s, want %s", d.RetryAfter, want)
	}
	if d.Requests.Remaining != 0 {
		t.Errorf("remaining %d", d.Requests.Remaining)
	}
	if d := acquire(t, b, "k", "r3", l, now.Add(d.RetryAfter-time.Millisecond)); d.Refused != limits.Requests {
		t.Errorf("a millisecond before Retry-After: %+v", d)
	}
	if d := acquire(t, b, "k", "r3", l, now.Add(d.RetryAfter)); d.Refused != limits.Allowed {
		t.Errorf("at Retry-After: %+v", d)
	}
}

func testTPM(t *testing.T, b limits.Backend) {
	l := limits.Limits{TPM: 100}
	d := acquire(t, b, "k", "r1", l, t0)
	if d.Refused != limits.Allowed || d.Tokens == nil || d.Tokens.Remaining != 100 {
		t.Fatalf("first: %+v %+v", d, d.Tokens)
	}
	// Output is counted when a request ends; a request that ran past the limit is not cut.
	release(t, b, "k", "r1", l, 150, t0.Add(30*time.Second))
	d = acquire(t, b, "k", "r2", l, t0.Add(30*time.Second))
	wantRefused(t, d, limits.Tokens, "after 150 of 100 tokens")
	if d.Tokens.Remaining != 0 {
		t.Errorf("remaining %d", d.Tokens.Remaining)
	}
	// 150 now weigh 99 at 60·(1−99/150) = 20.4 s into the next window.
	if want := 30*time.Second + 20400*time.Millisecond; d.RetryAfter != want {
		t.Errorf("retry after %s, want %s", d.RetryAfter, want)
	}
	if d := acquire(t, b, "k", "r2", l, t0.Add(30*time.Second+d.RetryAfter)); d.Refused != limits.Allowed {
		t.Errorf("at Retry-After: %+v", d)
	}
}

// A key that spent its limit at the end of one minute does not get it again at the start
// of the next, as a fixed window would allow.
func testSliding(t *testing.T, b limits.Backend) {
	l := limits.Limits{RPM: 10}
	late := t0.Add(59 * time.Second)
	for i := range 10 {
		if d := acquire(t, b, "k", fmt.Sprint("r", i), l, late); d.Refused != limits.Allowed {
			t.Fatalf("request %d: %+v", i, d)
		}
	}
	next := t0.Add(61 * time.Second)
	d := acquire(t, b, "k", "x", l, next)
	wantRefused(t, d, limits.Requests, "just after the window turned")
	// The 10 weigh 9 once 6 s of the new window have passed: 5 s from 61 s.
	if d.RetryAfter != 5*time.Second {
		t.Errorf("retry after %s, want 5s", d.RetryAfter)
	}
	if d := acquire(t, b, "k", "x", l, next.Add(5*time.Second-time.Millisecond)); d.Refused != limits.Requests {
		t.Errorf("a millisecond before Retry-After: %+v", d)
	}
	if d := acquire(t, b, "k", "x", l, next.Add(5*time.Second)); d.Refused != limits.Allowed {
		t.Errorf("at Retry-After: %+v", d)
	}
}

func testKeysApart(t *testing.T, b limits.Backend) {
	l := limits.Limits{MaxConcurrent: 1, RPM: 1}
	if d := acquire(t, b, "a", "r1", l, t0); d.Refused != limits.Allowed {
		t.Fatal(d)
	}
	if d := acquire(t, b, "b", "r2", l, t0); d.Refused != limits.Allowed {
		t.Fatalf("key b is refused for key a's use: %+v", d)
	}
}

// Two gateways sharing Redis share every limit.
func TestRedisSharedAcrossGateways(t *testing.T) {
	mk := redisFactory(t)
	gw1, gw2 := mk(), mk()
	l := limits.Limits{MaxConcurrent: 1, RPM: 2, TPM: 50}
	if d := acquire(t, gw1, "k", "r1", l, t0); d.Refused != limits.Allowed {
		t.Fatal(d)
	}
	wantRefused(t, acquire(t, gw2, "k", "r2", l, t0), limits.Concurrency, "gateway 2 while gateway 1 runs one")
	release(t, gw1, "k", "r1", l, 60, t0)
	wantRefused(t, acquire(t, gw2, "k", "r2", l, t0), limits.Tokens, "gateway 2 after gateway 1 delivered 60 tokens")
	l.TPM = 0
	if d := acquire(t, gw2, "k", "r2", l, t0); d.Refused != limits.Allowed || d.Requests.Remaining != 0 {
		t.Fatalf("second request of the minute: %+v", d)
	}
	release(t, gw2, "k", "r2", l, 0, t0)
	wantRefused(t, acquire(t, gw1, "k", "r3", l, t0), limits.Requests, "a third request of the minute, on gateway 1")
}

// A gateway that dies holding slots holds them for one lease at most; one that lives
// refreshes them.
func TestRedisLeases(t *testing.T) {
	u := redistest.URL(t)
	prefix := redistest.Prefix(t, u)
	dead, alive, other := newRedis(t, u, prefix), newRedis(t, u, prefix), newRedis(t, u, prefix)
	l := limits.Limits{MaxConcurrent: 1}
	if d := acquire(t, dead, "a", "r1", l, t0); d.Refused != limits.Allowed {
		t.Fatal(d)
	}
	if d := acquire(t, alive, "b", "r2", l, t0); d.Refused != limits.Allowed {
		t.Fatal(d)
	}
	if err := alive.Refresh(t.Context(), t0.Add(20*time.Second)); err != nil {
		t.Fatal(err)
	}
	before, after := t0.Add(limits.DefaultLease-time.Millisecond), t0.Add(limits.DefaultLease)
	wantRefused(t, acquire(t, other, "a", "x", l, before), limits.Concurrency, "the dead gateway's slot within its lease")
	if d := acquire(t, other, "a", "x", l, after); d.Refused != limits.Allowed {
		t.Errorf("the dead gateway's slot after its lease: %+v", d)
	}
	wantRefused(t, acquire(t, other, "b", "x", l, after), limits.Concurrency, "a refreshed slot")
	release(t, alive, "b", "r2", l, 0, after)
	// A refresh after the release does not bring the slot back.
	if err := alive.Refresh(t.Context(), after); err != nil {
		t.Fatal(err)
	}
	if d := acquire(t, other, "b", "x", l, after); d.Refused != limits.Allowed {
		t.Errorf("after the release: %+v", d)
	}
}

// While Redis is unreachable a limiter failing open counts on its own, reports the
// backend down, and shares again once Redis is back; one failing closed refuses.
func TestLimiterBackendDown(t *testing.T) {
	u := redistest.URL(t)
	prefix := redistest.Prefix(t, u)
	proxy, err := faultproxy.Start("127.0.0.1:6379")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	viaProxy := "redis://" + proxy.Addr() + u[len("redis://127.0.0.1:6379"):]
	if u != redistest.DefaultURL {
		t.Skip("the test proxies the default server only")
	}
	open := limits.New(limits.Options{Shared: newRedis(t, viaProxy, prefix), Logger: quiet})
	closed := limits.New(limits.Options{Shared: newRedis(t, viaProxy, prefix), FailClosed: true, Logger: quiet})
	l := limits.Limits{MaxConcurrent: 1}

	tk, d, err := open.Acquire(t.Context(), "k", "r1", l, t0)
	if err != nil || d.Refused != limits.Allowed || !open.Up() {
		t.Fatalf("with Redis up: %v %+v up=%v", err, d, open.Up())
	}
	proxy.Refuse(true)
	proxy.Reset()
	// Down: the open limiter counts alone (r1 is in Redis, not in its local counts).
	tk2, d, err := open.Acquire(t.Context(), "k", "r2", l, t0)
	if err != nil || d.Refused != limits.Allowed || open.Up() {
		t.Fatalf("open limiter with Redis down: %v %+v up=%v", err, d, open.Up())
	}
	_, d, err = open.Acquire(t.Context(), "k", "r3", l, t0)
	if err != nil || d.Refused != limits.Concurrency {
		t.Fatalf("local count while down: %v %+v", err, d)
	}
	if _, _, err := closed.Acquire(t.Context(), "k", "r4", l, t0); !errors.Is(err, limits.ErrUnavailable) || closed.Up() {
		t.Fatalf("closed limiter with Redis down: %v up=%v", err, closed.Up())
	}
	// Keys without limits never need the backend.
	if _, _, err := closed.Acquire(t.Context(), "free", "r5", limits.Limits{}, t0); err != nil {
		t.Fatalf("a key without limits: %v", err)
	}
	tk2.Done(0, t0)
	tk.Done(0, t0) // lost: its slot expires with its lease

	proxy.Refuse(false)
	// Within the retry second the limiter does not try Redis again.
	if _, _, err := closed.Acquire(t.Context(), "k", "r6", l, t0.Add(500*time.Millisecond)); !errors.Is(err, limits.ErrUnavailable) {
		t.Fatalf("closed limiter within the retry second: %v", err)
	}
	later := t0.Add(limits.DefaultLease + time.Second)
	tk, d, err = closed.Acquire(t.Context(), "k", "r7", l, later)
	if err != nil || d.Refused != limits.Allowed || !closed.Up() {
		t.Fatalf("closed limiter with Redis back: %v %+v up=%v", err, d, closed.Up())
	}
	_, d, err = open.Acquire(t.Context(), "k", "r8", l, later)
	if err != nil || d.Refused != limits.Concurrency || !open.Up() {
		t.Fatalf("open limiter with Redis back shares again: %v %+v up=%v", err, d, open.Up())
	}
	tk.Done(0, later)
	open.Close()
	closed.Close()
}

// Redis not listening at all: the configured behaviour from the first request on.
func TestLimiterRedisNeverUp(t *testing.T) {
	for _, failClosed := range []bool{false, true} {
		r, err := limits.NewRedis(limits.RedisOptions{URL: "redis://127.0.0.1:1/0", Prefix: "x:"})
		if err != nil {
			t.Fatal(err)
		}
		lim := limits.New(limits.Options{Shared: r, FailClosed: failClosed, Logger: quiet})
		tk, d, err := lim.Acquire(context.Background(), "k", "r1", limits.Limits{RPM: 1}, t0)
		switch {
		case failClosed && !errors.Is(err, limits.ErrUnavailable):
			t.Errorf("fail closed: %v", err)
		case !failClosed && (err != nil || d.Refused != limits.Allowed):
			t.Errorf("fail open: %v %+v", err, d)
		}
		if lim.Up() {
			t.Errorf("failClosed=%v: Up() with Redis never reachable", failClosed)
		}
		tk.Done(1, t0)
		lim.Close()
	}
}
