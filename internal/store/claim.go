package store

import (
	"errors"
	"fmt"
	"time"
)

// DefaultRetention is how long a logical request, and with it its
// idempotency key, is kept when the configuration says nothing: a Claim
// sets Request.ExpiresAt = CreatedAt + retention.
const DefaultRetention = 24 * time.Hour

// Claim asks the store to register a logical request, or, when its
// idempotency key is already known, what the caller may do instead.
type Claim struct {
	// Request is the row to insert when the key is unused. Required: ID,
	// BodyHash (when IdempotencyKey is set), Owner, OwnerLeaseUntil.
	// Defaults: Phase queued, CreatedAt Now, ExpiresAt CreatedAt +
	// DefaultRetention (set it from the configured key retention). Outcome
	// must be empty. Attempts are ignored.
	Request Request
	// Now is the instant at which the stored owner lease and expiry are
	// judged. Passed in, never read from a clock, so tests do not sleep.
	Now time.Time
}

// ClaimStatus is what a Claim decided.
type ClaimStatus int

const (
	// ClaimNew: the key was unused (or had expired); Claim.Request was
	// inserted and the caller owns it.
	ClaimNew ClaimStatus = iota + 1
	// ClaimInUse: the same body is running under a live owner lease. Answer
	// 409 idempotency_key_in_use.
	ClaimInUse
	// ClaimReplay: the request ended as completed, failed or cancelled.
	// Replay Response (status ResponseStatus) when it is set, else Error.
	// Failed and cancelled requests are replayed rather than rerun because a
	// key names one logical request: it ran once (tools may have acted), so
	// a silent second run would break that promise. The client asks again
	// with a new key.
	ClaimReplay
	// ClaimInterrupted: the request was interrupted after the delivery
	// boundary, or its owner died after crossing it (Claim then recorded
	// the outcome interrupted). Answer with the interruption error
	// (upstream_decode_interrupted, delivered_output_tokens from the row);
	// never rerun.
	ClaimInterrupted
	// ClaimTakeover: the owner's lease expired before the boundary was
	// crossed. The caller is now the owner (Claim.Request.Owner and
	// OwnerLeaseUntil were stored by compare-and-set, so of two takers only
	// one wins) and starts attempt Request.NextAttemptN() under the same
	// request id. The previous owner is fenced: its MarkFirstDelta,
	// RenewOwner and owner-fenced updates no longer apply.
	ClaimTakeover
	// ClaimMismatch: the key was used with a different body. Answer 422.
	ClaimMismatch
)

var claimStatusNames = [...]string{
	ClaimNew:         "new",
	ClaimInUse:       "in_use",
	ClaimReplay:      "replay",
	ClaimInterrupted: "interrupted",
	ClaimTakeover:    "takeover",
	ClaimMismatch:    "mismatch",
}

func (s ClaimStatus) String() string {
	if s > 0 && int(s) < len(claimStatusNames) {
		return claimStatusNames[s]
	}
	return fmt.Sprintf("ClaimStatus(%d)", int(s))
}

// ClaimResult is the decision and the row it was made on.
type ClaimResult struct {
	Status ClaimStatus
	// Request is the stored row after the claim, with its attempts: for
	// ClaimNew the inserted row; otherwise the existing logical request
	// (its ID is the one to put in X-Request-Id).
	Request *Request
}

// claimVerdict is the pure decision on an existing row; the backends turn
// it into statements.
type claimVerdict int

const (
	verdictExpired         claimVerdict = iota + 1 // key free again: delete the row, insert anew
	verdictMismatch                                // different body
	verdictReplay                                  // completed, failed or cancelled
	verdictInterrupted                             // already interrupted
	verdictInUse                                   // running under a live lease
	verdictMarkInterrupted                         // owner dead after the boundary: record interrupted
	verdictTakeover                                // owner dead before the boundary: take it over
)

// judgeClaim decides what a claim on an existing row with the same key may
// do. The checks run in this order, and the order is the contract:
//  1. an expired row is treated as absent (the key's retention ran out);
//  2. a different body hash is a mismatch, whatever state the row is in;
//  3. an ended request is replayed, except an interrupted one;
//  4. a running request with a live owner lease is in use;
//  5. a running request whose owner lease expired is interrupted if the
//     boundary was crossed, else taken over.
//
// A lease is alive while now is before OwnerLeaseUntil.
func judgeClaim(existing *Request, bodyHash string, now time.Time) claimVerdict {
	switch {
	case !existing.ExpiresAt.IsZero() && !now.Before(existing.ExpiresAt):
		return verdictExpired
	case existing.BodyHash != bodyHash:
		return verdictMismatch
	case existing.Outcome == OutcomeInterrupted:
		return verdictInterrupted
	case existing.Outcome != OutcomeRunning:
		return verdictReplay
	case now.Before(existing.OwnerLeaseUntil):
		return verdictInUse
	case existing.FirstDeltaSent:
		return verdictMarkInterrupted
	default:
		return verdictTakeover
	}
}

// status maps a verdict that ends the claim to the status reported.
func (v claimVerdict) status() ClaimStatus {
	switch v {
	case verdictMismatch:
		return ClaimMismatch
	case verdictReplay:
		return ClaimReplay
	case verdictInterrupted, verdictMarkInterrupted:
		return ClaimInterrupted
	case verdictInUse:
		return ClaimInUse
	case verdictTakeover:
		return ClaimTakeover
	default:
		return 0
	}
}

// prepare validates a claim and fills defaults, returning the row to insert.
func (c *Claim) prepare() (Request, error) {
	r := c.Request
	switch {
	case r.ID == "":
		return r, errors.New("store: claim: request id is empty")
	case r.IdempotencyKey != "" && r.BodyHash == "":
		return r, fmt.Errorf("store: claim %s: body hash is empty", r.ID)
	case r.Owner == "":
		return r, fmt.Errorf("store: claim %s: owner is empty", r.ID)
	case r.Outcome != OutcomeRunning:
		return r, fmt.Errorf("store: claim %s: outcome must be empty, got %q", r.ID, r.Outcome)
	case c.Now.IsZero():
		return r, fmt.Errorf("store: claim %s: now is zero", r.ID)
	}
	if r.Phase == "" {
		r.Phase = PhaseQueued
	}
	if r.CreatedAt.IsZero() {
		r.CreatedAt = c.Now
	}
	if r.UpdatedAt.IsZero() {
		r.UpdatedAt = r.CreatedAt
	}
	if r.ExpiresAt.IsZero() {
		r.ExpiresAt = r.CreatedAt.Add(DefaultRetention)
	}
	r.normalize()
	return r, nil
}
