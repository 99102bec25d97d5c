package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/store"
)

// The console's list of recent requests that did not complete plainly (Store.Recent).

// recentRow is a request of the Recent tests: its outcome, how many attempts it ran, its
// model and tenant, and how long after t0 it was created.
type recentRow struct {
	id       string
	outcome  store.Outcome
	attempts int
	model    string
	tenant   string
	after    time.Duration
}

func testRecent(t *testing.T, b Backend) {
	s := b.New(t)
	rows := []recentRow{
		{"req_plain", store.OutcomeCompleted, 1, "m1", "team-a", 1 * time.Second},
		{"req_running", store.OutcomeRunning, 1, "m1", "team-a", 2 * time.Second},
		{"req_interrupted", store.OutcomeInterrupted, 1, "m1", "team-a", 3 * time.Second},
		{"req_rerun", store.OutcomeCompleted, 2, "m1", "team-b", 4 * time.Second},
		{"req_failed", store.OutcomeFailed, 0, "m2", "team-a", 5 * time.Second},
		{"req_cancelled", store.OutcomeCancelled, 1, "m2", "team-b", 6 * time.Second},
		{"req_stalled", store.OutcomeClientStalled, 1, "m1", "team-a", 7 * time.Second},
		{"req_rerun_failed", store.OutcomeFailed, 3, "m2", "team-a", 8 * time.Second},
		{"req_running_rerun", store.OutcomeRunning, 2, "m1", "team-b", 9 * time.Second},
	}
	var muts []store.Mutation
	for _, r := range rows {
		at := t0.Add(r.after)
		phase := store.PhaseDone
		if r.outcome == store.OutcomeRunning {
			phase = store.PhaseRouting
		}
		muts = append(muts, store.CreateRequest{Request: store.Request{ID: r.id, Tenant: r.tenant, Model: r.model, Phase: phase,
			Outcome: r.outcome, Owner: gwA, OwnerLeaseUntil: at.Add(leaseTTL), CreatedAt: at, UpdatedAt: at, ExpiresAt: at.Add(keep)}})
		for n := 1; n <= r.attempts; n++ {
			muts = append(muts, store.UpsertAttempt{Attempt: store.Attempt{ID: store.AttemptID(r.id, n), RequestID: r.id, N: n,
				Replica: fmt.Sprintf("r%d", n), LeaseEpoch: uint64(n), StartedAt: at}})
		}
	}
	mustApply(t, s, muts...)

	for _, tc := range []struct {
		name string
		q    store.RecentQuery
		want []string
	}{
		{"all", store.RecentQuery{}, []string{"req_running_rerun", "req_rerun_failed", "req_stalled", "req_cancelled", "req_failed", "req_rerun", "req_interrupted"}},
		{"limit", store.RecentQuery{Limit: 2}, []string{"req_running_rerun", "req_rerun_failed"}},
		{"model", store.RecentQuery{Model: "m2"}, []string{"req_rerun_failed", "req_cancelled", "req_failed"}},
		{"tenant", store.RecentQuery{Tenant: "team-b"}, []string{"req_running_rerun", "req_cancelled", "req_rerun"}},
		{"interrupted", store.RecentQuery{Outcome: store.OutcomeInterrupted}, []string{"req_interrupted"}},
		{"failed", store.RecentQuery{Outcome: store.OutcomeFailed}, []string{"req_rerun_failed", "req_failed"}},
		{"rerun", store.RecentQuery{Outcome: store.OutcomeRerun}, []string{"req_running_rerun", "req_rerun_failed", "req_rerun"}},
		{"completed reruns only", store.RecentQuery{Outcome: store.OutcomeCompleted}, []string{"req_rerun"}},
		{"since and until", store.RecentQuery{Since: t0.Add(4 * time.Second), Until: t0.Add(7 * time.Second)},
			[]string{"req_cancelled", "req_failed", "req_rerun"}},
		{"model and tenant", store.RecentQuery{Model: "m2", Tenant: "team-a", Outcome: store.OutcomeRerun}, []string{"req_rerun_failed"}},
		{"nothing", store.RecentQuery{Model: "none"}, nil},
	} {
		got, err := s.Recent(ctx(t), tc.q)
		if err != nil {
			t.Fatalf("%s: Recent: %v", tc.name, err)
		}
		var ids []string
		for _, r := range got {
			ids = append(ids, r.ID)
		}
		if !slices.Equal(ids, tc.want) {
			t.Errorf("%s: Recent = %v, want %v", tc.name, ids, tc.want)
		}
		for _, r := range got {
			// Each row comes with its attempts, as Get returns them.
			assertRequest(t, tc.name+": "+r.ID, r, mustGet(t, s, r.ID))
		}
	}
}
