package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/fencegate/fencegate/internal/store"
)

// claimers is how many goroutines race; they alternate between two store
// handles, i.e. two gateways.
const claimers = 8

// raceClaims runs claims concurrently, released together, and returns the
// results in order.
func raceClaims(t *testing.T, handles []store.Store, claims []store.Claim) []store.ClaimResult {
	t.Helper()
	results := make([]store.ClaimResult, len(claims))
	errs := make([]error, len(claims))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, c := range claims {
		h := handles[i%len(handles)]
		wg.Go(func() {
			<-start
			results[i], errs[i] = h.Claim(ctx(t), c)
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent claims: %v", err)
	}
	return results
}

func countStatus(results []store.ClaimResult) map[store.ClaimStatus]int {
	n := map[store.ClaimStatus]int{}
	for _, r := range results {
		n[r.Status]++
	}
	return n
}

func testRaceClaimNew(t *testing.T, b Backend) {
	s := b.New(t)
	handles := []store.Store{s, b.peer(t, s)}
	claims := make([]store.Claim, claimers)
	for i := range claims {
		claims[i] = keyed(fmt.Sprintf("req_%d", i), "key-race", "body", fmt.Sprintf("gw-%d", i), t0)
	}
	results := raceClaims(t, handles, claims)
	n := countStatus(results)
	if n[store.ClaimNew] != 1 || n[store.ClaimInUse] != claimers-1 {
		t.Fatalf("statuses = %v, want exactly one new and %d in use", n, claimers-1)
	}
	var winner string
	for i, r := range results {
		if r.Status == store.ClaimNew {
			winner = claims[i].Request.ID
		}
	}
	for i, r := range results {
		if r.Request.ID != winner {
			t.Errorf("claimer %d was told about %s, want the winner %s", i, r.Request.ID, winner)
		}
	}
}

func testRaceTakeover(t *testing.T, b Backend) {
	s := b.New(t)
	mustClaim(t, s, keyed("req_1", "key-race", "body", gwA, t0), store.ClaimNew)
	later := t0.Add(leaseTTL + 1)
	handles := []store.Store{s, b.peer(t, s)}
	claims := make([]store.Claim, claimers)
	for i := range claims {
		claims[i] = keyed(fmt.Sprintf("req_%d", i+2), "key-race", "body", fmt.Sprintf("gw-%d", i), later)
	}
	results := raceClaims(t, handles, claims)
	n := countStatus(results)
	if n[store.ClaimTakeover] != 1 || n[store.ClaimInUse] != claimers-1 {
		t.Fatalf("statuses = %v, want exactly one takeover and %d in use", n, claimers-1)
	}
	for i, r := range results {
		if r.Status == store.ClaimTakeover {
			if got := mustGet(t, s, "req_1"); got.Owner != claims[i].Request.Owner {
				t.Errorf("owner = %s, want the taker %s", got.Owner, claims[i].Request.Owner)
			}
		}
	}
}

// testRaceTakeoverVersusBoundary races the old owner's boundary record
// against takers: either the old owner crosses the boundary and nobody takes
// over, or one taker wins and the old owner is fenced. Never both.
func testRaceTakeoverVersusBoundary(t *testing.T, b Backend) {
	s := b.New(t)
	peer := b.peer(t, s)
	later := t0.Add(leaseTTL + 1)
	for round := range 6 {
		id, key := fmt.Sprintf("req_r%d", round), fmt.Sprintf("key-r%d", round)
		mustClaim(t, s, keyed(id, key, "body", gwA, t0), store.ClaimNew)

		var markErr error
		results := make([]store.ClaimResult, 3)
		errs := make([]error, 3)
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			<-start
			// A decided while its lease was alive; the write lands
			// while the others already judge it expired.
			markErr = s.MarkFirstDelta(ctx(t), id, gwA, t0.Add(1))
		})
		for i := range results {
			wg.Go(func() {
				<-start
				results[i], errs[i] = peer.Claim(ctx(t), keyed(fmt.Sprintf("%s_%d", id, i), key, "body", fmt.Sprintf("gw-%d", i), later))
			})
		}
		close(start)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		n := countStatus(results)
		switch {
		case markErr == nil:
			if n[store.ClaimTakeover] != 0 || n[store.ClaimInterrupted] != len(results) {
				t.Errorf("round %d: boundary recorded, yet claims = %v; want all interrupted", round, n)
			}
		case errors.Is(markErr, store.ErrNotOwner):
			if n[store.ClaimTakeover] != 1 {
				t.Errorf("round %d: old owner fenced, claims = %v; want exactly one takeover", round, n)
			}
		default:
			t.Fatalf("round %d: MarkFirstDelta: %v", round, markErr)
		}
	}
}
