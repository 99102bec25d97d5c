package store

import (
	"context"
	"errors"
	"time"
)

// ErrNotFound is returned when a logical request is not in the store.
var ErrNotFound = errors.New("store: request not found")

// ErrNotOwner is returned by MarkFirstDelta when the caller no longer owns
// the request: another gateway took it over, or the caller's owner lease
// had run out at the given time (so another gateway may take it over at
// any moment). Either way the caller must not write output to its client.
var ErrNotOwner = errors.New("store: request not owned by this gateway")

// Store is the durable request journal. All methods are safe for concurrent
// use, also by several gateways sharing one database (PostgreSQL, or one
// SQLite file on one host).
//
// Write order the gateway must keep, for a request with an Idempotency-Key:
//
//	Claim                 before anything is sent upstream
//	MarkFirstDelta        returns before the first output-bearing byte is written to the client
//	RenewOwner            every renew interval, well inside the owner lease TTL
//	Journal.Submit(...)   everything else, off the token path
type Store interface {
	// KeyStore keeps the API keys managed with `fencegate keys`.
	KeyStore

	// Claim registers a new logical request, deciding atomically (one
	// transaction, safe across gateways) what the caller may do when the
	// (tenant, idempotency key) pair is already known; see ClaimStatus.
	// Without an idempotency key it simply inserts and returns ClaimNew.
	Claim(ctx context.Context, c Claim) (ClaimResult, error)

	// Apply writes one batch of mutations in one transaction: all or none.
	// An invalid mutation fails the whole batch before anything is written.
	// Updates and upserts naming a request that does not exist are no-ops.
	Apply(ctx context.Context, muts []Mutation) error

	// MarkFirstDelta durably records that owner is about to cross the
	// delivery boundary of requestID at time at (and moves a queued or routing
	// request to the streaming phase). It is synchronous: on a
	// nil return the record survives a crash of the gateway and of the
	// machine. It succeeds only while owner owns the request with a lease
	// alive at at, and fails with ErrNotOwner otherwise: the record and a
	// takeover exclude each other, so no two gateways ever both stream one
	// logical request. It fails with ErrNotFound when the row does not
	// exist, which for a request without a key means its CreateRequest is
	// still in the Journal. Marking twice is harmless.
	MarkFirstDelta(ctx context.Context, requestID, owner string, at time.Time) error

	// RenewOwner moves the owner lease of every running request of this
	// gateway to until (never backwards) and returns how many requests it
	// holds. Requests taken over by another gateway are not touched.
	RenewOwner(ctx context.Context, owner string, until time.Time) (int64, error)

	// Get returns a logical request with its attempts ordered by N, or
	// ErrNotFound.
	Get(ctx context.Context, requestID string) (*Request, error)

	// FindByResponseID returns, as Get does, the logical request whose
	// ResponseID is responseID, so that a request continuing that response
	// can be routed to Request.ResponseReplica. It returns ErrNotFound when
	// there is none (also for an empty responseID, and once Sweep deleted
	// the row). Engine ids are unique, so one row is expected; should
	// several carry the id, the one with the latest CreatedAt wins, and
	// among those the greatest ID (ids are ULIDs, so the later one).
	FindByResponseID(ctx context.Context, responseID string) (*Request, error)

	// Recent returns the requests q selects — recent ones that did not complete plainly
	// (see RecentQuery) — newest first (by CreatedAt, then ID), at most q's limit, each
	// with its attempts as Get returns them.
	Recent(ctx context.Context, q RecentQuery) ([]*Request, error)

	// Traces returns the trace events of a request ordered by Seq (none
	// when traces are off).
	Traces(ctx context.Context, requestID string) ([]TraceEvent, error)

	// Sweep deletes the requests whose ExpiresAt is at or before now (a
	// zero ExpiresAt never expires), with their attempts and traces, and
	// returns how many requests it deleted.
	Sweep(ctx context.Context, now time.Time) (int64, error)

	// Close releases the store. Use the store no more after it.
	Close() error
}
