package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/store"
)

// The Responses API is stateful on the engine: a request continuing a
// response (previous_response_id) must reach the replica that produced it.
// These tests cover how the journal records that pair and finds it again.

func mustFind(t *testing.T, s store.Store, responseID string) *store.Request {
	t.Helper()
	r, err := s.FindByResponseID(ctx(t), responseID)
	if err != nil {
		t.Fatalf("FindByResponseID(%q): %v", responseID, err)
	}
	return r
}

func assertNotFound(t *testing.T, s store.Store, responseID, why string) {
	t.Helper()
	r, err := s.FindByResponseID(ctx(t), responseID)
	if !errors.Is(err, store.ErrNotFound) {
		id := ""
		if r != nil {
			id = r.ID
		}
		t.Errorf("FindByResponseID(%q) = %s, %v; want ErrNotFound (%s)", responseID, id, err, why)
	}
}

func assertResponse(t *testing.T, s store.Store, id, wantID, wantReplica, why string) {
	t.Helper()
	if got := mustGet(t, s, id); got.ResponseID != wantID || got.ResponseReplica != wantReplica {
		t.Errorf("%s: response %q on %q, want %q on %q (%s)", id, got.ResponseID, got.ResponseReplica, wantID, wantReplica, why)
	}
}

// createdWithResponse is a keyless request inserted by CreateRequest that
// already carries a response id.
func createdWithResponse(id, responseID string, created time.Time) store.CreateRequest {
	return store.CreateRequest{Request: store.Request{
		ID: id, Tenant: "tenant-1", Model: "llama-3-8b", Phase: store.PhaseDone, Outcome: store.OutcomeCompleted,
		Owner: gwA, OwnerLeaseUntil: created.Add(leaseTTL), ResponseID: responseID, ResponseReplica: "vllm-" + id,
		CreatedAt: created, UpdatedAt: created, ExpiresAt: created.Add(keep),
	}}
}

func testResponseIDUpdate(t *testing.T, b Backend) {
	s := b.New(t)
	mustClaim(t, s, keyed("req_1", "key-1", "body", gwA, t0), store.ClaimNew)
	mustClaim(t, s, keyed("req_2", "", "body", gwA, t0), store.ClaimNew)
	before := mustGet(t, s, "req_1")
	if before.ResponseID != "" || before.ResponseReplica != "" {
		t.Fatalf("new request has response %q on %q, want none", before.ResponseID, before.ResponseReplica)
	}

	mustApply(t, s,
		store.UpdateRequest{ID: "req_1", ResponseID: "resp_a", ResponseReplica: "vllm-0"},
		store.UpdateRequest{ID: "req_2", ResponseID: "resp_b", ResponseReplica: "vllm-1"},
	)
	want := *before
	want.ResponseID, want.ResponseReplica = "resp_a", "vllm-0"
	assertRequest(t, "after setting the response", mustGet(t, s, "req_1"), &want)
	assertResponse(t, s, "req_2", "resp_b", "vllm-1", "kept without an idempotency key, unlike Response")

	// Updates without a response id leave the pair alone, also one that
	// names a replica only: a replica without its id means nothing.
	mustApply(t, s,
		store.UpdateRequest{ID: "req_1", Phase: store.PhaseStreaming},
		store.UpdateRequest{ID: "req_1", ResponseReplica: "vllm-9"},
	)
	assertResponse(t, s, "req_1", "resp_a", "vllm-0", "updates without a response id")

	// A new id replaces both, even with an empty replica: the two always
	// come from the same update.
	mustApply(t, s, store.UpdateRequest{ID: "req_1", ResponseID: "resp_c", ResponseReplica: "vllm-2"})
	assertResponse(t, s, "req_1", "resp_c", "vllm-2", "the last id wins")
	mustApply(t, s, store.UpdateRequest{ID: "req_1", ResponseID: "resp_d"})
	assertResponse(t, s, "req_1", "resp_d", "", "an id replaces the replica too")

	// The same rule when a request is created with a replica and no id.
	orphan := createdWithResponse("req_3", "", t0)
	mustApply(t, s, orphan)
	assertResponse(t, s, "req_3", "", "", "a replica without an id is not stored")

	if got := mustFind(t, s, "resp_d"); got.ID != "req_1" {
		t.Errorf("FindByResponseID(resp_d) = %s, want req_1", got.ID)
	}
	if got := mustFind(t, s, "resp_b"); got.ID != "req_2" {
		t.Errorf("FindByResponseID(resp_b) = %s, want req_2", got.ID)
	}
	for _, old := range []string{"resp_a", "resp_c"} {
		assertNotFound(t, s, old, "the request's id was replaced")
	}
}

func testResponseIDFenced(t *testing.T, b Backend) {
	s := b.New(t)
	mustClaim(t, s, keyed("req_1", "key-1", "body", gwA, t0), store.ClaimNew)
	mustApply(t, s,
		store.UpdateRequest{ID: "req_1", Owner: gwB, ResponseID: "resp_other", ResponseReplica: "vllm-b"},
		store.UpdateRequest{ID: "req_1", Owner: gwA, ResponseID: "resp_a", ResponseReplica: "vllm-a"},
	)
	assertResponse(t, s, "req_1", "resp_a", "vllm-a", "only the owner's update applies")
	assertNotFound(t, s, "resp_other", "a non-owner's update was fenced")

	// B takes over (A's lease ran out before the boundary); the takeover
	// result carries what A recorded.
	later := t0.Add(leaseTTL + 1)
	res := mustClaim(t, b.peer(t, s), keyed("req_2", "key-1", "body", gwB, later), store.ClaimTakeover)
	if res.Request.ResponseID != "resp_a" || res.Request.ResponseReplica != "vllm-a" {
		t.Errorf("takeover result has response %q on %q, want resp_a on vllm-a", res.Request.ResponseID, res.Request.ResponseReplica)
	}

	// A late write of the old owner must not point continuations at its
	// replica; the new owner's does.
	mustApply(t, s, store.UpdateRequest{ID: "req_1", Owner: gwA, ResponseID: "resp_late", ResponseReplica: "vllm-a2"})
	assertResponse(t, s, "req_1", "resp_a", "vllm-a", "the old owner is fenced")
	assertNotFound(t, s, "resp_late", "the old owner is fenced")
	mustApply(t, s, store.UpdateRequest{ID: "req_1", Owner: gwB, ResponseID: "resp_b", ResponseReplica: "vllm-b"})
	assertResponse(t, s, "req_1", "resp_b", "vllm-b", "the new owner's update")
	if got := mustFind(t, s, "resp_b"); got.ID != "req_1" || got.Owner != gwB {
		t.Errorf("FindByResponseID(resp_b) = %s owned by %s, want req_1 owned by %s", got.ID, got.Owner, gwB)
	}
}

// testResponseIDJournal sends the updates through a Journal, which merges
// those of one request and owner into one, and checks the row equals the
// updates applied one by one.
func testResponseIDJournal(t *testing.T, b Backend) {
	updates := []store.Mutation{
		store.UpdateRequest{ID: "req_1", Owner: gwA, Phase: store.PhaseRouting, ResponseID: "resp_1", ResponseReplica: "vllm-0"},
		store.UpdateRequest{ID: "req_1", Owner: gwA, Phase: store.PhaseStreaming, ResponseReplica: "ignored without an id"},
		store.UpdateRequest{ID: "req_1", Owner: gwA, ResponseID: "resp_2", ResponseReplica: "vllm-1"},
		store.UpdateRequest{ID: "req_1", Owner: gwA, DeliveredOutputTokens: 5, ResponseReplica: "ignored too"},
		store.UpdateRequest{ID: "req_1", Owner: gwB, ResponseID: "resp_fenced", ResponseReplica: "vllm-b"},
		store.UpdateRequest{ID: "req_2", ResponseReplica: "vllm-2"},
		store.UpdateRequest{ID: "req_2", ResponseID: "resp_3"},
	}
	setup := func(s store.Store) {
		mustClaim(t, s, keyed("req_1", "key-1", "body", gwA, t0), store.ClaimNew)
		mustClaim(t, s, keyed("req_2", "", "body", gwA, t0), store.ClaimNew)
	}

	s := b.New(t)
	setup(s)
	j := store.NewJournal(s, store.JournalOptions{FlushEvery: time.Hour}) // writes on Flush only
	defer func() {
		if err := j.Close(context.Background()); err != nil {
			t.Errorf("journal close: %v", err)
		}
	}()
	for _, m := range updates {
		j.Submit(m)
	}
	if err := j.Flush(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if st := j.Stats(); st.Merged != 4 || st.Written != 3 {
		t.Errorf("journal merged %d and wrote %d updates, want 4 and 3 (one per request and owner)", st.Merged, st.Written)
	}

	ref := b.New(t)
	setup(ref)
	for _, m := range updates {
		mustApply(t, ref, m)
	}
	for _, id := range []string{"req_1", "req_2"} {
		assertRequest(t, id+" through the journal against one by one", mustGet(t, s, id), mustGet(t, ref, id))
	}
	assertResponse(t, s, "req_1", "resp_2", "vllm-1", "the last id of the merged updates, with its replica")
	assertResponse(t, s, "req_2", "resp_3", "", "a replica sent before the id is not paired with it")
	for _, id := range []string{"resp_1", "resp_fenced"} {
		assertNotFound(t, s, id, "replaced, or fenced")
	}
}

func testFindByResponseID(t *testing.T, b Backend) {
	s := b.New(t)
	mustClaim(t, s, keyed("req_1", "key-1", "body", gwA, t0), store.ClaimNew)
	mustClaim(t, s, keyed("req_2", "", "body", gwA, t0), store.ClaimNew) // no response id
	mustApply(t, s,
		store.UpsertAttempt{Attempt: store.Attempt{ID: store.AttemptID("req_1", 2), RequestID: "req_1", N: 2, Replica: "vllm-1", StartedAt: t0.Add(2)}},
		store.UpsertAttempt{Attempt: store.Attempt{ID: store.AttemptID("req_1", 1), RequestID: "req_1", N: 1, Replica: "vllm-0", StartedAt: t0.Add(1), EndedAt: t0.Add(2), Failure: "dead"}},
		store.UpdateRequest{ID: "req_1", ResponseID: "resp_1", ResponseReplica: "vllm-1"},
		createdWithResponse("req_3", "resp_3", t0),
	)

	got := mustFind(t, s, "resp_1")
	assertRequest(t, "found by response id against Get", got, mustGet(t, s, "req_1"))
	if len(got.Attempts) != 2 || got.Attempts[0].N != 1 || got.Attempts[1].N != 2 {
		t.Errorf("found request's attempts = %+v, want N 1 and 2", got.Attempts)
	}
	if got.ResponseReplica != "vllm-1" {
		t.Errorf("found request's replica = %q, want vllm-1", got.ResponseReplica)
	}
	// Another gateway routes the continuation, so it must find it too.
	if r := mustFind(t, b.peer(t, s), "resp_1"); r.ID != "req_1" {
		t.Errorf("peer found %s, want req_1", r.ID)
	}
	// A response id given at creation counts as well.
	if r := mustFind(t, s, "resp_3"); r.ID != "req_3" || r.ResponseReplica != "vllm-req_3" {
		t.Errorf("FindByResponseID(resp_3) = %s on %q, want req_3 on vllm-req_3", r.ID, r.ResponseReplica)
	}

	assertNotFound(t, s, "resp_unknown", "no request has it")
	assertNotFound(t, s, "", "the empty id marks requests without one")
	assertNotFound(t, s, "RESP_1", "ids are compared exactly")
}

func testFindByResponseIDLatest(t *testing.T, b Backend) {
	s := b.New(t)
	// Inserted newest first, so insertion order cannot pass for recency.
	mustApply(t, s,
		createdWithResponse("req_new", "resp_dup", t0.Add(time.Second)),
		createdWithResponse("req_old", "resp_dup", t0),
		createdWithResponse("req_02", "resp_tie", t0),
		createdWithResponse("req_01", "resp_tie", t0),
	)
	if got := mustFind(t, s, "resp_dup"); got.ID != "req_new" {
		t.Errorf("FindByResponseID(resp_dup) = %s, want the later created req_new", got.ID)
	}
	if got := mustFind(t, s, "resp_tie"); got.ID != "req_02" {
		t.Errorf("FindByResponseID(resp_tie) = %s, want req_02 (same CreatedAt: the greater id)", got.ID)
	}
	// Once the newer one moves to another response, the older one is found.
	mustApply(t, s, store.UpdateRequest{ID: "req_new", ResponseID: "resp_moved", ResponseReplica: "vllm-x"})
	if got := mustFind(t, s, "resp_dup"); got.ID != "req_old" {
		t.Errorf("FindByResponseID(resp_dup) = %s after req_new moved, want req_old", got.ID)
	}
}

func testFindByResponseIDSweep(t *testing.T, b Backend) {
	s := b.New(t)
	for i, exp := range []time.Duration{time.Hour, 3 * time.Hour} {
		c := keyed("req_"+string(rune('1'+i)), "", "body", gwA, t0)
		c.Request.ExpiresAt = t0.Add(exp)
		mustClaim(t, s, c, store.ClaimNew)
	}
	mustApply(t, s,
		store.UpdateRequest{ID: "req_1", ResponseID: "resp_1", ResponseReplica: "vllm-0"},
		store.UpdateRequest{ID: "req_2", ResponseID: "resp_2", ResponseReplica: "vllm-1"},
		store.UpsertAttempt{Attempt: store.Attempt{ID: store.AttemptID("req_1", 1), RequestID: "req_1", N: 1, Replica: "vllm-0"}},
	)
	if n, err := s.Sweep(ctx(t), t0.Add(2*time.Hour)); err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want 1", n, err)
	}
	assertNotFound(t, s, "resp_1", "its request was swept")
	if got := mustFind(t, s, "resp_2"); got.ID != "req_2" {
		t.Errorf("FindByResponseID(resp_2) = %s, want the unexpired req_2", got.ID)
	}
	// The id of a swept request may be recorded again, by a new request:
	// that one is found.
	mustClaim(t, s, keyed("req_3", "", "body", gwB, t0.Add(2*time.Hour)), store.ClaimNew)
	mustApply(t, s, store.UpdateRequest{ID: "req_3", ResponseID: "resp_1", ResponseReplica: "vllm-2"})
	if got := mustFind(t, s, "resp_1"); got.ID != "req_3" || len(got.Attempts) != 0 {
		t.Errorf("FindByResponseID(resp_1) = %s with %d attempts, want req_3 with none", got.ID, len(got.Attempts))
	}
}
