package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// JournalOptions configures a Journal. The zero value gives the defaults.
type JournalOptions struct {
	// FlushEvery is the longest a submitted mutation waits before its batch
	// is written. Default 20ms.
	FlushEvery time.Duration
	// MaxBatch is the most mutations written in one Apply (one
	// transaction); reaching it starts a write at once. Default 256.
	MaxBatch int
	// MaxPendingTraces bounds the trace events waiting to be written. Past
	// it, new trace events are dropped and counted (JournalStats.DroppedTraces):
	// traces are diagnostics, never the record of what happened. Journal
	// records (requests, attempts) are never dropped. Default 8192.
	MaxPendingTraces int
	// Logger receives write failures. Default slog.Default().
	Logger *slog.Logger
}

func (o JournalOptions) withDefaults() JournalOptions {
	if o.FlushEvery <= 0 {
		o.FlushEvery = 20 * time.Millisecond
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 256
	}
	if o.MaxPendingTraces <= 0 {
		o.MaxPendingTraces = 8192
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// maxRetryBackoff caps the wait between two failed writes.
const maxRetryBackoff = time.Second

// Journal writes mutations to a Store asynchronously, in batches, so that
// journaling stays off the token path.
//
// Why coalescing instead of a bounded channel: Submit is called from the
// streaming path and must never block it, and a journal record must never
// be silently lost. A bounded channel forces a choice between the two when
// the database is slow. Instead, pending mutations are merged per key: all
// pending UpdateRequests of one request (and owner) become one, all pending
// UpsertAttempts of one attempt become one, using the same merge rules the
// store applies (mergeUpdateInto, mergeAttempt), and an update of a request whose
// CreateRequest is still pending is folded into it (applyUpdate): a short
// request is then one INSERT of its final state instead of an INSERT and an
// UPDATE, which is most of what the journal costs a SQLite gateway. Memory is then bounded by the
// number of live requests and attempts, not by the event rate, even while
// the database is down; Submit only takes a mutex for a map lookup. Only
// trace events, which cannot be merged, have a cap (MaxPendingTraces).
//
// Order: mutations are written in submission order, except that a merged
// update or attempt keeps the position of the first one it absorbed. A
// CreateRequest is written before any update submitted after it.
//
// A failed Apply is retried (with backoff) before anything newer is
// written. Flush writes everything submitted before it was called; Close
// stops the background writer and flushes.
type Journal struct {
	store Store
	opts  JournalOptions

	mu       sync.Mutex
	pending  []Mutation
	creates  map[string]int    // index in pending of a request's CreateRequest, by request id
	updates  map[updateKey]int // index in pending of the merged update
	attempts map[string]int    // index in pending of the merged attempt upsert
	traces   int               // trace events in pending
	inflight int               // mutations taken by a writer, not yet written
	closed   bool
	stats    JournalStats
	// merging holds an update while it is merged into a pending mutation of its row, and
	// that mutation, under mu: in the frames of the merge they would double the stack of
	// the request goroutine that submits the update (docs/performance.md, "Memory per
	// idle stream"). Zeroed after each merge.
	merging struct {
		update, prev UpdateRequest
		create       CreateRequest
	}

	// writing is a one-slot semaphore: one writer at a time (the
	// background loop or a Flush caller), and waiting for it honours ctx.
	writing chan struct{}
	// retry holds batches taken from pending whose Apply has not
	// succeeded yet, oldest first. Guarded by writing.
	retry [][]Mutation

	kick   chan struct{} // "a batch is full", capacity 1
	stop   chan struct{}
	done   chan struct{}
	ctx    context.Context // cancelled by Close to abort a hung write
	cancel context.CancelFunc
}

// NewJournal starts a journal writing to s. Call Close to stop it; the
// journal does not close s.
func NewJournal(s Store, opts JournalOptions) *Journal {
	ctx, cancel := context.WithCancel(context.Background())
	j := &Journal{
		store:    s,
		opts:     opts.withDefaults(),
		creates:  make(map[string]int),
		updates:  make(map[updateKey]int),
		attempts: make(map[string]int),
		writing:  make(chan struct{}, 1),
		kick:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		ctx:      ctx,
		cancel:   cancel,
	}
	go j.run()
	return j
}

// Submit queues a mutation for writing and returns at once; it never blocks
// on I/O. The journal takes ownership of the byte slices in m. An invalid
// mutation (see ValidateMutation) is dropped, logged and counted in
// Rejected: it would fail its whole batch forever.
func (j *Journal) Submit(m Mutation) {
	if err := ValidateMutation(m); err != nil {
		j.opts.Logger.Error("journal: mutation rejected", "err", err)
		j.mu.Lock()
		j.stats.Rejected++
		j.mu.Unlock()
		return
	}
	j.mu.Lock()
	full, accepted := j.addLocked(m)
	j.mu.Unlock()
	if !accepted {
		return
	}
	if full {
		select {
		case j.kick <- struct{}{}:
		default: // a kick is already pending
		}
	}
}

// Flush writes everything submitted before it was called, and returns the
// first write error (the failed batch stays queued and is retried).
func (j *Journal) Flush(ctx context.Context) error {
	select {
	case j.writing <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("store: journal flush: %w", ctx.Err())
	}
	defer func() { <-j.writing }()
	return j.writeLocked(ctx)
}

// writeLocked writes the batches of a failed earlier write, then takes what
// is pending (once) and writes it; the caller holds j.writing. Pending
// mutations are taken only after the retried batches succeeded, so during
// an outage they stay in pending, where they keep merging, instead of
// piling up as one more retry batch per attempt.
func (j *Journal) writeLocked(ctx context.Context) error {
	took := false
	for {
		if len(j.retry) == 0 {
			if took {
				return nil
			}
			j.mu.Lock()
			j.retry = j.takeLocked()
			j.mu.Unlock()
			took = true
			continue
		}
		batch := j.retry[0]
		err := j.store.Apply(ctx, batch)
		j.mu.Lock()
		if err != nil {
			j.stats.FailedBatches++
			j.stats.LastError = err
			j.mu.Unlock()
			return fmt.Errorf("store: journal write: %w", err)
		}
		j.stats.Batches++
		j.stats.Written += uint64(len(batch))
		j.stats.LastError = nil
		j.inflight -= len(batch)
		j.mu.Unlock()
		j.retry[0] = nil
		j.retry = j.retry[1:]
		if len(j.retry) == 0 {
			j.retry = nil
		}
	}
}

// run is the background writer: every FlushEvery, or at once when a batch
// is full; after a failure it backs off, doubling up to maxRetryBackoff.
func (j *Journal) run() {
	defer close(j.done)
	ticker := time.NewTicker(j.opts.FlushEvery)
	defer ticker.Stop()
	backoff := j.opts.FlushEvery
	for {
		select {
		case <-j.stop:
			return
		case <-ticker.C:
		case <-j.kick:
		}
		if j.pendingOrRetry() == 0 {
			continue
		}
		j.writing <- struct{}{}
		err := j.writeLocked(j.ctx)
		<-j.writing
		if err == nil {
			backoff = j.opts.FlushEvery
			continue
		}
		if errors.Is(j.ctx.Err(), context.Canceled) {
			return
		}
		j.opts.Logger.Warn("journal: write failed, will retry", "err", err, "retry_in", backoff)
		wait := time.NewTimer(backoff)
		select {
		case <-j.stop:
			wait.Stop()
			return
		case <-wait.C:
		}
		backoff = min(2*backoff, maxRetryBackoff)
	}
}

func (j *Journal) pendingOrRetry() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.pending) + j.inflight
}

// Close stops the background writer and writes what is still queued. If
// ctx ends first, a write in progress is aborted and ctx's error returned;
// mutations not written by then are lost (Stats().Pending says how many).
// Submit after Close drops the mutation and counts it as Rejected.
func (j *Journal) Close(ctx context.Context) error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return nil
	}
	j.closed = true
	j.mu.Unlock()
	close(j.stop)
	select {
	case <-j.done:
	case <-ctx.Done():
		j.cancel()
		<-j.done
	}
	defer j.cancel()
	if err := j.Flush(ctx); err != nil {
		return fmt.Errorf("store: journal close: %w", err)
	}
	return nil
}
