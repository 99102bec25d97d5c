package request

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/fencegate/fencegate/internal/failover"
	"github.com/fencegate/fencegate/internal/openai"
	"github.com/fencegate/fencegate/internal/store"
	"github.com/fencegate/fencegate/internal/upstream"
	"go.opentelemetry.io/otel/trace"
)

// Server is what a request needs from the gateway that runs it: the services every request
// shares. The gateway implements it once. Its methods are safe for concurrent use, and none
// of them waits on a request (docs/design.md §6).
type Server interface {
	// Now is the gateway's clock.
	Now() time.Time
	// ID names the gateway as the owner of its requests in the journal.
	ID() string
	Log() *slog.Logger
	// Journal takes the request's journal writes, batched and asynchronous.
	Journal() Journal
	// Store takes the synchronous writes of a keyed request: its attempts, its boundary.
	Store() Store
	// Engines is the net/http client to replicas and agents, for a request's calls beside
	// its attempts (the tokenize call that prices a rerun).
	Engines() *http.Client
	// Attempts is the client attempts are sent with: it never sends a request twice, and
	// its responses are read in the attempt's reader, straight from the connection.
	Attempts() *upstream.Client
	// Tracer makes the spans of requests and attempts; nil: tracing is off.
	Tracer() trace.Tracer
	Metrics() Metrics
	// LeaseTTL is how long a lease granted for an attempt on an agent lasts.
	LeaseTTL() time.Duration
}

// Journal is the batching journal (*store.Journal).
type Journal interface {
	// Submit queues a write; it never blocks on the store.
	Submit(m store.Mutation)
	// Flush makes everything submitted so far durable.
	Flush(ctx context.Context) error
}

// Store is the part of the store a keyed request writes synchronously (store.Store).
type Store interface {
	Apply(ctx context.Context, muts []store.Mutation) error
	MarkFirstDelta(ctx context.Context, requestID, owner string, at time.Time) error
}

// Metrics counts what requests do, once per request or attempt, never per token.
type Metrics interface {
	// Rerun counts a rerun, by why the attempt before it ended.
	Rerun(model string, after failover.EndReason)
	// Shed counts a request no replica could take: all were at their load limit (and it
	// could not wait in the pool's queue).
	Shed(model string)
	// SlowFirstToken counts a stream whose first token took longer than the keepalive.
	SlowFirstToken(model string)
	// FirstDelta observes the time to first token.
	FirstDelta(model string, ttft time.Duration)
	// AttemptEnded counts an attempt by replica and end (its failure class, else
	// completed or cancelled).
	AttemptEnded(model, replica, end string)
	// RequestEnded counts a request by outcome, and the output tokens it delivered.
	RequestEnded(model string, api openai.Endpoint, o failover.Outcome, delivered int)
}

// Pool is what a request asks of its model's pool. The gateway's pool implements it behind
// its own lock: no method blocks on I/O or calls back into the request, so the owner may
// call any of them from its loop.
type Pool interface {
	// Acquire picks a replica for attempt a, as Want says, and counts a on it until
	// Release; ok is false when none can take it (Pick.Shed, Pick.QueueFull and
	// Pick.Pinned say why), or when a waits in the pool's queue (Pick.Queued). The pool
	// keeps a to fail it when the replica is found gone (Attempt.ReplicaLost).
	Acquire(now time.Time, w Want, a *Attempt) (p Pick, ok bool)
	// Unqueue takes attempt a, which Acquire queued, out of the queue, and says how its
	// wait ended: QueueGranted (p is its replica, on which a now counts as on Acquire's
	// pick: the caller sends it or Releases it), QueueShed or QueueExpired (the pool
	// decided, and posted to a's inbox), or why, when a was still waiting. QueueNone: a
	// was not in the queue.
	Unqueue(a *Attempt, now time.Time, why QueueEnd) (p Pick, end QueueEnd)
	// Release ends a on its replica and tells the replica's health how it ended: info is
	// the machine's record of it (dispatched false: the attempt was never dispatched).
	Release(a *Attempt, info failover.AttemptInfo, dispatched bool)
	// DialFailed, Overloaded and RefusedCredentials report what an attempt learned of its
	// replica: it could not be reached, it is busy until a time, it refused the gateway's
	// credentials (a 401 or 403 status).
	DialFailed(replica string, now time.Time, reason failover.EndReason)
	Overloaded(replica string, until time.Time, reason failover.EndReason)
	RefusedCredentials(replica string, status int)
	// TryRerun withdraws one rerun from the pool's retry budget (the machine's
	// ActTryRerun); it reports whether there was one.
	TryRerun(now time.Time) bool
	// RetryAfter is the Retry-After, in seconds, of a request no replica could take.
	RetryAfter(now time.Time) int
	// NotePrefix records that replica prefilled the prompt prefix of key.
	NotePrefix(key uint64, replica string, now time.Time)
	// CachedPrefix is the prompt prefix, in bytes, that a replica none of the request's
	// attempts ran on likely holds in its cache for key (0: none does).
	CachedPrefix(key uint64, blocks []uint64, attempts []failover.AttemptInfo, now time.Time) int
	// Targets lists the pool's replicas, for the tokenize call that prices a rerun.
	Targets() []Target
}

// Want is what an attempt asks of a replica.
type Want struct {
	// Affinity is the prompt prefix's affinity key (0: none).
	Affinity uint64
	// Blocks are the prompt's chained block hashes (balance.PrefixBlocks), which the
	// cache-aware policy matches against what each replica was sent (nil: none).
	Blocks []uint64
	// Pinned is the one replica the request may run on ("" : any): a Responses request
	// continuing a response stored there.
	Pinned string
	// Attempts are the request's attempts so far, as the machine records them: a rerun
	// goes to a replica none of them ran on, and keeps to the fingerprint of the first
	// that reached its replica (one that never did ran nothing there) unless the policy
	// allows otherwise. Read during Acquire only.
	Attempts []failover.AttemptInfo
	// Class is how the request waits when every replica is at its capacity; Since is when
	// it first asked for a slot (a rerun keeps its place by it).
	Class Class
	Since time.Time
}

// Class is a request's place in its pool's queue (docs/design.md §3, "The queue").
type Class struct {
	// Flow is its API key's id, Sub the fairness id the key set ("": none), Weight the
	// key's share and Priority the request's class.
	Flow, Sub        string
	Weight, Priority int
}

// QueueEnd is how a wait in the pool's queue ended.
type QueueEnd uint8

const (
	QueueNone    QueueEnd = iota // not queued
	QueueWaiting                 // still waiting
	QueueGranted                 // a slot freed for it
	QueueShed                    // shed for a request of a higher class or a fairer share
	QueueExpired                 // it waited queue.max_wait
	QueueLeft                    // its request ended while it waited (the client left, a deadline)
)

// Pick is the replica Acquire chose.
type Pick struct {
	Replica, URL string
	// Revision is the weights revision the replica reports, if any.
	Revision string
	// Key is the engine's API key; Agent its agent in fenced mode (nil in direct mode).
	Key   string
	Agent Agent
	// UsagePerChunk: the engine reports token usage in every chunk when asked
	// (continuous_usage_stats: vLLM, SGLang).
	UsagePerChunk bool
	// ClosesStreams: the engine closes its connection after every streamed answer while
	// offering keep-alive (llama.cpp's server). A pooled connection would be reused before
	// its close is read, and the next request would meet the close having reached no
	// engine, or one that then died: the gateway cannot tell which, so it does not reuse
	// such connections (docs/design.md §3).
	ClosesStreams bool
	// Shed (every candidate is at its load limit), QueueFull (and the pool's queue is full)
	// and Pinned (the request may run on its pinned replica only, and that one cannot take
	// it) say why Acquire found none. Queued: the attempt waits in the pool's queue until
	// Until; the pool posts to its inbox when that wait ends (Pool.Unqueue says how).
	Shed, QueueFull, Pinned, Queued bool
	Until                           time.Time
}

// Agent is a replica's agent, as a Pick carries it: the leases of the attempts sent through
// it (docs/design.md §4). Safe for concurrent use.
type Agent interface {
	// Grant starts the lease of an attempt about to be sent; its epoch goes in the headers.
	Grant(attempt string, now time.Time) (epoch uint64)
	// Forget drops an attempt whose lease no longer matters.
	Forget(attempt string)
	// Fence stops renewing an attempt's lease and returns when it has certainly expired.
	Fence(attempt string) (expiresBy time.Time)
	// Cancel asks the agent to end an attempt and reports whether it acknowledged; the
	// reply comes once the engine request has ended.
	Cancel(ctx context.Context, attempt string, epoch uint64) (acked bool)
	// Secret is what requests to the agent carry.
	Secret() string
}

// Target is a replica as a request's background calls reach it.
type Target struct {
	URL string
	// EngineKey is the engine's API key, AgentKey the agent's secret ("" : none).
	EngineKey, AgentKey string
}
