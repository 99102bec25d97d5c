package limits

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Redis counts in a Redis shared by several gateways. Per key (its id in a hash tag, so a
// key's counters share a cluster slot and one script can touch them all):
//
//	PREFIX{id}:running     sorted set: running request ids, scored by lease deadline (ms)
//	PREFIX{id}:r:WINDOW    requests counted in that minute
//	PREFIX{id}:t:WINDOW    output tokens counted in that minute
//
// Counters expire two windows after theirs ended; the set expires one lease after its
// last refresh.
type Redis struct {
	c      *redis.Client
	prefix string
	lease  time.Duration

	mu      sync.Mutex
	running map[string]map[string]struct{} // key -> this gateway's running request ids
	// refreshing orders releases after a refresh in flight: a refresh that read an id
	// before its release must not add it back after the release removed it.
	refreshing sync.RWMutex
}

// DefaultLease is how long a running request holds its slot in Redis without a refresh.
const DefaultLease = 30 * time.Second

// RedisOptions configure the Redis backend.
type RedisOptions struct {
	// URL is redis://[user:password@]HOST:PORT/DB (rediss:// for TLS).
	URL string
	// Prefix starts every key written.
	Prefix string
	// Lease is how long a slot outlives its gateway's last refresh (default DefaultLease).
	Lease time.Duration
	// Timeout bounds each Redis call (default 250ms): limits are checked on every request,
	// and a Redis that answers slower than this is treated as down.
	Timeout time.Duration
}

// NewRedis connects lazily to the Redis at o.URL: an unreachable Redis is an error of the
// calls, not of NewRedis.
func NewRedis(o RedisOptions) (*Redis, error) {
	opt, err := redis.ParseURL(o.URL)
	if err != nil {
		return nil, fmt.Errorf("limits: redis URL: %w", err)
	}
	if o.Timeout == 0 {
		o.Timeout = 250 * time.Millisecond
	}
	if o.Lease == 0 {
		o.Lease = DefaultLease
	}
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = o.Timeout, o.Timeout, o.Timeout
	// No retries: a failed call falls back at once (or refuses, failing closed), instead of
	// holding the request for several timeouts.
	opt.MaxRetries = -1
	opt.DialerRetries = 1
	opt.Protocol = 2
	opt.DisableIdentity = true
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	quietRedisLog.Do(func() { redis.SetLogger(discardLog{}) })
	return &Redis{c: redis.NewClient(opt), prefix: o.Prefix, lease: o.Lease, running: make(map[string]map[string]struct{})}, nil
}

func (r *Redis) keys(key string, idx int64) (running, reqCur, reqPrev, tokCur, tokPrev string) {
	base := r.prefix + "{" + key + "}:"
	cur, prev := strconv.FormatInt(idx, 10), strconv.FormatInt(idx-1, 10)
	return base + "running", base + "r:" + cur, base + "r:" + prev, base + "t:" + cur, base + "t:" + prev
}

// counterTTL keeps a window's counter while it can still be the previous window.
const counterTTL = 2*Window + 10*time.Second

// acquireScript decides and counts atomically, with the rule of verdict.
//
//	KEYS: running, requests now, requests before, tokens now, tokens before
//	ARGV: now ms, request id, lease deadline ms, max concurrent, rpm, tpm,
//	      ms into the window, window ms, counter ttl ms, lease ms
//	returns: {verdict, running, requests before, requests now, tokens before, tokens now}
var acquireScript = redis.NewScript(`
local now = tonumber(ARGV[1])
local maxc, rpm, tpm = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local e, w = tonumber(ARGV[7]), tonumber(ARGV[8])
local running = 0
if maxc > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
  running = redis.call('ZCARD', KEYS[1])
end
local rc = tonumber(redis.call('GET', KEYS[2]) or '0')
local rp = tonumber(redis.call('GET', KEYS[3]) or '0')
local tc = tonumber(redis.call('GET', KEYS[4]) or '0')
local tp = tonumber(redis.call('GET', KEYS[5]) or '0')
local v = 0
if rpm > 0 and rp * (w - e) / w + rc + 1 > rpm then
  v = 1
elseif tpm > 0 and tp * (w - e) / w + tc + 1 > tpm then
  v = 2
elseif maxc > 0 and running >= maxc then
  v = 3
end
if v == 0 then
  if rpm > 0 then
    rc = redis.call('INCR', KEYS[2])
    redis.call('PEXPIRE', KEYS[2], ARGV[9])
  end
  if maxc > 0 then
    redis.call('ZADD', KEYS[1], ARGV[3], ARGV[2])
    redis.call('PEXPIRE', KEYS[1], ARGV[10])
    running = running + 1
  end
end
return {v, running, rp, rc, tp, tc}
`)

// Acquire implements Backend.
func (r *Redis) Acquire(ctx context.Context, key, id string, l Limits, now time.Time) (Decision, error) {
	idx, elapsed := windowOf(now)
	running, reqCur, reqPrev, tokCur, tokPrev := r.keys(key, idx)
	res, err := acquireScript.Run(ctx, r.c, []string{running, reqCur, reqPrev, tokCur, tokPrev},
		now.UnixMilli(), id, now.Add(r.lease).UnixMilli(), l.MaxConcurrent, l.RPM, l.TPM,
		elapsed.Milliseconds(), Window.Milliseconds(), counterTTL.Milliseconds(), r.lease.Milliseconds()).Int64Slice()
	if err != nil {
		return Decision{}, fmt.Errorf("limits: redis: %w", err)
	}
	if len(res) != 6 {
		return Decision{}, fmt.Errorf("limits: redis: the script answered %d values", len(res))
	}
	c := counts{running: res[1], reqPrev: res[2], reqCur: res[3], tokPrev: res[4], tokCur: res[5]}
	v := Kind(res[0])
	if v == Allowed && l.MaxConcurrent > 0 {
		r.mu.Lock()
		ids := r.running[key]
		if ids == nil {
			ids = make(map[string]struct{})
			r.running[key] = ids
		}
		ids[id] = struct{}{}
		r.mu.Unlock()
	}
	return decide(c, v, l, elapsed), nil
}

// Release implements Backend.
func (r *Redis) Release(ctx context.Context, key, id string, l Limits, tokens int64, now time.Time) error {
	r.refreshing.RLock()
	defer r.refreshing.RUnlock()
	r.mu.Lock()
	if ids := r.running[key]; ids != nil {
		delete(ids, id)
		if len(ids) == 0 {
			delete(r.running, key)
		}
	}
	r.mu.Unlock()
	idx, _ := windowOf(now)
	running, _, _, tokCur, _ := r.keys(key, idx)
	pipe := r.c.Pipeline()
	if l.MaxConcurrent > 0 {
		pipe.ZRem(ctx, running, id)
	}
	if l.TPM > 0 && tokens > 0 {
		pipe.IncrBy(ctx, tokCur, tokens)
		pipe.PExpire(ctx, tokCur, counterTTL)
	}
	if pipe.Len() == 0 {
		return nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("limits: redis: %w", err)
	}
	return nil
}

// Refresh moves the lease deadline of every request this gateway runs to now plus the
// lease, adding back any that expired while Redis was unreachable.
func (r *Redis) Refresh(ctx context.Context, now time.Time) error {
	r.refreshing.Lock()
	defer r.refreshing.Unlock()
	r.mu.Lock()
	byKey := make(map[string][]redis.Z, len(r.running))
	deadline := float64(now.Add(r.lease).UnixMilli())
	for key, ids := range r.running {
		for id := range ids {
			byKey[key] = append(byKey[key], redis.Z{Score: deadline, Member: id})
		}
	}
	r.mu.Unlock()
	if len(byKey) == 0 {
		return nil
	}
	pipe := r.c.Pipeline()
	for key, members := range byKey {
		running, _, _, _, _ := r.keys(key, 0)
		pipe.ZAdd(ctx, running, members...)
		pipe.PExpire(ctx, running, r.lease)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("limits: redis: refresh: %w", err)
	}
	return nil
}

// quietRedisLog silences the client library's own log, which would print a line per failed
// dial while Redis is down: the Limiter logs the change of state once instead.
var quietRedisLog sync.Once

type discardLog struct{}

func (discardLog) Printf(context.Context, string, ...any) {}

// Ping checks that Redis answers.
func (r *Redis) Ping(ctx context.Context) error { return r.c.Ping(ctx).Err() }

// Close closes the connections.
func (r *Redis) Close() error { return r.c.Close() }
