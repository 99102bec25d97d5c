// Package storetest is the conformance suite every store.Store
// implementation must pass: memory, SQLite and PostgreSQL run the same
// tests, so the gateway can rely on one behaviour. It imports only store and
// the standard library, and is imported only by tests.
package storetest

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/store"
)

// Backend makes stores for the suite.
type Backend struct {
	// New returns a handle on a fresh, empty storage; the backend closes it
	// and removes the storage in t.Cleanup.
	New func(t *testing.T) store.Store
	// Peer returns one more handle on the storage behind s, opened the way
	// a second gateway process would open it (own connections). Nil when
	// the backend cannot be shared between processes (memory): the suite
	// then uses s itself for both "gateways".
	Peer func(t *testing.T, s store.Store) store.Store
}

// Run runs the conformance suite against b.
func Run(t *testing.T, b Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b Backend)
	}{
		{"ClaimNew", testClaimNew},
		{"ClaimWithoutKey", testClaimWithoutKey},
		{"ClaimInUse", testClaimInUse},
		{"ClaimMismatch", testClaimMismatch},
		{"ClaimReplay", testClaimReplay},
		{"ClaimInterruptedStored", testClaimInterruptedStored},
		{"ClaimInterruptedDeadOwner", testClaimInterruptedDeadOwner},
		{"ClaimTakeover", testClaimTakeover},
		{"ClaimLeaseEdge", testClaimLeaseEdge},
		{"ClaimExpiredKey", testClaimExpiredKey},
		{"ClaimTenantsApart", testClaimTenantsApart},
		{"ClaimInvalid", testClaimInvalid},
		{"ClaimDefaults", testClaimDefaults},
		{"RoundTrip", testRoundTrip},
		{"ApplyCreate", testApplyCreate},
		{"ApplyUpdate", testApplyUpdate},
		{"ApplyUpdateFenced", testApplyUpdateFenced},
		{"ApplyAttempts", testApplyAttempts},
		{"ApplyTraces", testApplyTraces},
		{"ApplyAtomic", testApplyAtomic},
		{"ApplyMatchesModel", testApplyMatchesModel},
		{"ApplyBatchesMatchModel", testApplyBatchesMatchModel},
		{"GetNotFound", testGetNotFound},
		{"MarkFirstDelta", testMarkFirstDelta},
		{"RenewOwner", testRenewOwner},
		{"Sweep", testSweep},
		{"ResponseIDUpdate", testResponseIDUpdate},
		{"ResponseIDFenced", testResponseIDFenced},
		{"ResponseIDJournal", testResponseIDJournal},
		{"FindByResponseID", testFindByResponseID},
		{"FindByResponseIDLatest", testFindByResponseIDLatest},
		{"FindByResponseIDSweep", testFindByResponseIDSweep},
		{"Recent", testRecent},
		{"RaceClaimNew", testRaceClaimNew},
		{"RaceTakeover", testRaceTakeover},
		{"RaceTakeoverVersusBoundary", testRaceTakeoverVersusBoundary},
		{"KeysRoundTrip", testKeysRoundTrip},
		{"KeysDuplicate", testKeysDuplicate},
		{"KeysRevoke", testKeysRevoke},
		{"KeysInvalid", testKeysInvalid},
		{"KeysRaceCreate", testKeysRaceCreate},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, b) })
	}
}

// t0 is the suite's "now": time is passed in, never read from a clock.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 123456789, time.UTC)

const (
	gwA      = "gw-a"
	gwB      = "gw-b"
	leaseTTL = 30 * time.Second
	keep     = 24 * time.Hour
)

func ctx(t *testing.T) context.Context { return t.Context() }

// peer returns a second handle on s's storage.
func (b Backend) peer(t *testing.T, s store.Store) store.Store {
	if b.Peer == nil {
		return s
	}
	return b.Peer(t, s)
}

// keyed returns a claim for a request with an idempotency key, owned by
// owner with a lease from now.
func keyed(id, key, body, owner string, now time.Time) store.Claim {
	return store.Claim{
		Now: now,
		Request: store.Request{
			ID:              id,
			Tenant:          "tenant-1",
			IdempotencyKey:  key,
			BodyHash:        store.HashBody([]byte(body)),
			Model:           "llama-3-8b",
			Stream:          true,
			Owner:           owner,
			OwnerLeaseUntil: now.Add(leaseTTL),
			CreatedAt:       now,
			ExpiresAt:       now.Add(keep),
		},
	}
}

func mustClaim(t *testing.T, s store.Store, c store.Claim, want store.ClaimStatus) store.ClaimResult {
	t.Helper()
	res, err := s.Claim(ctx(t), c)
	if err != nil {
		t.Fatalf("Claim(%s, key %q): %v", c.Request.ID, c.Request.IdempotencyKey, err)
	}
	if res.Status != want {
		t.Fatalf("Claim(%s, key %q) = %v, want %v", c.Request.ID, c.Request.IdempotencyKey, res.Status, want)
	}
	if res.Request == nil {
		t.Fatalf("Claim(%s) = %v with nil Request", c.Request.ID, res.Status)
	}
	return res
}

func mustApply(t *testing.T, s store.Store, muts ...store.Mutation) {
	t.Helper()
	if err := s.Apply(ctx(t), muts); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

func mustGet(t *testing.T, s store.Store, id string) *store.Request {
	t.Helper()
	r, err := s.Get(ctx(t), id)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return r
}

// diffRequest describes how two requests differ, or returns "".
func diffRequest(got, want *store.Request) string {
	g, w := reflect.ValueOf(*got), reflect.ValueOf(*want)
	var diff bytes.Buffer
	for i := range g.NumField() {
		name := g.Type().Field(i).Name
		gf, wf := g.Field(i).Interface(), w.Field(i).Interface()
		if !equalField(gf, wf) {
			fmt.Fprintf(&diff, "\n  %s: got %v, want %v", name, show(gf), show(wf))
		}
	}
	return diff.String()
}

func equalField(a, b any) bool {
	switch a := a.(type) {
	case time.Time:
		return a.Equal(b.(time.Time))
	case []byte:
		return bytes.Equal(a, b.([]byte)) && (a == nil) == (b.([]byte) == nil)
	case []store.Attempt:
		bb := b.([]store.Attempt)
		if len(a) != len(bb) {
			return false
		}
		for i := range a {
			if !equalAttempt(a[i], bb[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

func equalAttempt(a, b store.Attempt) bool {
	return a.StartedAt.Equal(b.StartedAt) && a.EndedAt.Equal(b.EndedAt) &&
		a.ID == b.ID && a.RequestID == b.RequestID && a.N == b.N && a.Replica == b.Replica &&
		a.LeaseEpoch == b.LeaseEpoch && a.EndReason == b.EndReason && a.Failure == b.Failure &&
		a.CancelSent == b.CancelSent && a.CancelAcked == b.CancelAcked && a.ModelRevision == b.ModelRevision &&
		a.EngineMayHaveActed == b.EngineMayHaveActed
}

func show(v any) any {
	if b, ok := v.([]byte); ok {
		if b == nil {
			return "nil"
		}
		return fmt.Sprintf("%q", b)
	}
	return v
}

func assertRequest(t *testing.T, what string, got, want *store.Request) {
	t.Helper()
	if d := diffRequest(got, want); d != "" {
		t.Errorf("%s differs:%s", what, d)
	}
}
