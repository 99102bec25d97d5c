package store

import (
	"testing"
	"time"
)

func TestJudgeClaim(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	running := Request{BodyHash: "h", OwnerLeaseUntil: now.Add(time.Second), ExpiresAt: now.Add(time.Hour)}
	with := func(f func(r *Request)) *Request {
		r := running
		f(&r)
		return &r
	}
	tests := []struct {
		name string
		row  *Request
		hash string
		want claimVerdict
	}{
		{"running, lease alive", with(func(r *Request) {}), "h", verdictInUse},
		{"lease ends exactly now", with(func(r *Request) { r.OwnerLeaseUntil = now }), "h", verdictTakeover},
		{"lease expired, no delta", with(func(r *Request) { r.OwnerLeaseUntil = now.Add(-1) }), "h", verdictTakeover},
		{"lease expired after delta", with(func(r *Request) { r.OwnerLeaseUntil = now.Add(-1); r.FirstDeltaSent = true }), "h", verdictMarkInterrupted},
		{"lease alive after delta", with(func(r *Request) { r.FirstDeltaSent = true }), "h", verdictInUse},
		{"completed", with(func(r *Request) { r.Outcome = OutcomeCompleted }), "h", verdictReplay},
		{"failed", with(func(r *Request) { r.Outcome = OutcomeFailed }), "h", verdictReplay},
		{"cancelled", with(func(r *Request) { r.Outcome = OutcomeCancelled }), "h", verdictReplay},
		{"interrupted", with(func(r *Request) { r.Outcome = OutcomeInterrupted }), "h", verdictInterrupted},
		{"other body while running", with(func(r *Request) {}), "x", verdictMismatch},
		{"other body when completed", with(func(r *Request) { r.Outcome = OutcomeCompleted }), "x", verdictMismatch},
		{"expired key beats everything", with(func(r *Request) { r.ExpiresAt = now; r.Outcome = OutcomeInterrupted }), "x", verdictExpired},
		{"no expiry", with(func(r *Request) { r.ExpiresAt = time.Time{}; r.Outcome = OutcomeCompleted }), "h", verdictReplay},
	}
	for _, tc := range tests {
		if got := judgeClaim(tc.row, tc.hash, now); got != tc.want {
			t.Errorf("%s: judgeClaim = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestClaimStatusString(t *testing.T) {
	if got := ClaimTakeover.String(); got != "takeover" {
		t.Errorf("ClaimTakeover.String() = %q", got)
	}
	if got := ClaimStatus(99).String(); got != "ClaimStatus(99)" {
		t.Errorf("unknown status prints %q", got)
	}
}
