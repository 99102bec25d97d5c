package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/store"
)

// fullRequest has every field set to a non-zero value.
func fullRequest(id, key string) store.Request {
	return store.Request{
		ID:                    id,
		Tenant:                "tenant-1",
		IdempotencyKey:        key,
		BodyHash:              store.HashBody([]byte(id)),
		Model:                 "qwen-2.5-7b",
		Stream:                true,
		Phase:                 store.PhaseStreaming,
		Outcome:               store.OutcomeCompleted,
		Owner:                 gwA,
		OwnerLeaseUntil:       t0.Add(leaseTTL),
		FirstDeltaSent:        true,
		FirstDeltaAt:          t0.Add(time.Millisecond),
		DeliveredOutputTokens: 1 << 40,
		QueuedMs:              1<<33 + 7,
		ModelRevision:         "rev-abc",
		Error:                 []byte(`{"error":{"code":"x"}}`),
		Response:              []byte("data: {}\n\n\x00\xff"),
		ResponseIsSSE:         true,
		ResponseStatus:        200,
		ResponseID:            "resp_" + id,
		ResponseReplica:       "vllm-3",
		CreatedAt:             t0,
		UpdatedAt:             t0.Add(2 * time.Millisecond),
		ExpiresAt:             t0.Add(keep),
	}
}

func testRoundTrip(t *testing.T, b Backend) {
	s := b.New(t)
	r := fullRequest("req_1", "key-1")
	a := store.Attempt{
		ID: "req_1.a1", RequestID: "req_1", N: 1, Replica: "vllm-0", LeaseEpoch: 1<<63 + 5,
		StartedAt: t0, EndedAt: t0.Add(time.Second), EndReason: "upstream_reset", Failure: "dead", CancelSent: true, CancelAcked: true,
		ModelRevision: "0e9e39f249a16976918f6564b8830bc894c89659",
	}
	mustApply(t, s, store.CreateRequest{Request: r}, store.UpsertAttempt{Attempt: a})
	want := r
	want.Attempts = []store.Attempt{a}
	assertRequest(t, "round trip", mustGet(t, s, "req_1"), &want)
}

func testApplyCreate(t *testing.T, b Backend) {
	s := b.New(t)
	r := fullRequest("req_1", "")
	r.Outcome, r.FirstDeltaSent, r.Error = store.OutcomeRunning, false, nil
	mustApply(t, s, store.CreateRequest{Request: r})

	// Creating again (a retried batch) changes nothing.
	again := r
	again.Model = "changed"
	mustApply(t, s, store.CreateRequest{Request: again})

	want := r
	want.Response, want.ResponseIsSSE, want.ResponseStatus = nil, false, 0 // no key, no stored response
	assertRequest(t, "created row", mustGet(t, s, "req_1"), &want)
}

func testApplyUpdate(t *testing.T, b Backend) {
	s := b.New(t)
	mustClaim(t, s, keyed("req_1", "key-1", "body", gwA, t0), store.ClaimNew)
	plain := keyed("req_2", "", "body", gwA, t0)
	mustClaim(t, s, plain, store.ClaimNew)

	mustApply(t, s,
		store.UpdateRequest{ID: "req_1", At: t0.Add(5), Phase: store.PhaseRouting, ModelRevision: "rev-1"},
		store.UpdateRequest{ID: "req_1", At: t0.Add(3), Phase: store.PhaseStreaming, FirstDeltaSent: true, DeliveredOutputTokens: 10},
		store.UpdateRequest{ID: "req_1", DeliveredOutputTokens: 4, QueuedMs: 250}, // tokens never go down
		store.UpdateRequest{ID: "req_1", QueuedMs: 120},                           // nor the time queued
		store.UpdateRequest{ID: "req_1", FirstDeltaAt: t0.Add(7)},
		store.UpdateRequest{ID: "req_1", FirstDeltaAt: t0.Add(9)}, // the first one stays
		store.UpdateRequest{ID: "req_1", Outcome: store.OutcomeInterrupted, Error: []byte("e1")},
		store.UpdateRequest{ID: "req_1", Outcome: store.OutcomeCompleted, Error: []byte("e2")}, // outcome is write-once
		store.UpdateRequest{ID: "req_1", Response: []byte("resp"), ResponseIsSSE: true, ResponseStatus: 200},
		store.UpdateRequest{ID: "req_2", Response: []byte("resp"), ResponseStatus: 200, Phase: store.PhaseDone},
		store.UpdateRequest{ID: "req_missing", Phase: store.PhaseDone}, // no row: no-op
	)
	got := mustGet(t, s, "req_1")
	switch {
	case !got.UpdatedAt.Equal(t0.Add(5)):
		t.Errorf("UpdatedAt = %v, want the latest given %v", got.UpdatedAt, t0.Add(5))
	case got.Phase != store.PhaseStreaming:
		t.Errorf("Phase = %q, want the last one set (streaming)", got.Phase)
	case got.ModelRevision != "rev-1":
		t.Errorf("ModelRevision = %q", got.ModelRevision)
	case !got.FirstDeltaSent:
		t.Errorf("FirstDeltaSent not set")
	case got.DeliveredOutputTokens != 10:
		t.Errorf("DeliveredOutputTokens = %d, want 10", got.DeliveredOutputTokens)
	case !got.FirstDeltaAt.Equal(t0.Add(7)):
		t.Errorf("FirstDeltaAt = %v, want the first given %v", got.FirstDeltaAt, t0.Add(7))
	case got.QueuedMs != 250:
		t.Errorf("QueuedMs = %d, want the largest given, 250", got.QueuedMs)
	case got.Outcome != store.OutcomeInterrupted:
		t.Errorf("Outcome = %q, want the first one (interrupted)", got.Outcome)
	case string(got.Error) != "e2":
		t.Errorf("Error = %q, want the last one (e2)", got.Error)
	case string(got.Response) != "resp" || !got.ResponseIsSSE || got.ResponseStatus != 200:
		t.Errorf("Response = %q sse %v status %d", got.Response, got.ResponseIsSSE, got.ResponseStatus)
	}
	// A later update without those fields leaves them alone.
	mustApply(t, s, store.UpdateRequest{ID: "req_1", Phase: store.PhaseDone})
	got2 := mustGet(t, s, "req_1")
	got.Phase = store.PhaseDone
	assertRequest(t, "after a phase-only update", got2, got)

	if p := mustGet(t, s, "req_2"); p.Response != nil || p.ResponseStatus != 0 || p.Phase != store.PhaseDone {
		t.Errorf("keyless request: response %q status %d phase %q; want no response, phase done", p.Response, p.ResponseStatus, p.Phase)
	}
	if _, err := s.Get(ctx(t), "req_missing"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("update of a missing request created it: %v", err)
	}
}

func testApplyUpdateFenced(t *testing.T, b Backend) {
	s := b.New(t)
	mustClaim(t, s, keyed("req_1", "key-1", "body", gwA, t0), store.ClaimNew)
	mustApply(t, s,
		store.UpdateRequest{ID: "req_1", Owner: gwB, Phase: store.PhaseDone, Response: []byte("x")},
		store.UpdateRequest{ID: "req_1", Owner: gwA, Phase: store.PhaseRouting},
	)
	if got := mustGet(t, s, "req_1"); got.Phase != store.PhaseRouting || got.Response != nil {
		t.Errorf("phase %q response %q: the update fenced to another owner was applied, or the owner's was not", got.Phase, got.Response)
	}
}

func testApplyAttempts(t *testing.T, b Backend) {
	s := b.New(t)
	mustClaim(t, s, keyed("req_1", "key-1", "body", gwA, t0), store.ClaimNew)
	att := func(n int) store.Attempt {
		return store.Attempt{ID: store.AttemptID("req_1", n), RequestID: "req_1", N: n, Replica: "r", LeaseEpoch: uint64(n), StartedAt: t0,
			ModelRevision: "rev-a"}
	}
	// Inserted out of order, with N=10 to catch a text sort.
	mustApply(t, s, store.UpsertAttempt{Attempt: att(10)}, store.UpsertAttempt{Attempt: att(2)}, store.UpsertAttempt{Attempt: att(1)})

	ended := att(2)
	ended.EndedAt, ended.EndReason, ended.Failure, ended.CancelSent = t0.Add(time.Second), "fenced", "uncertain", true
	ended.EngineMayHaveActed = true
	mustApply(t, s, store.UpsertAttempt{Attempt: ended})
	// A later partial upsert neither clears the latches, the end nor the revision.
	mustApply(t, s, store.UpsertAttempt{Attempt: store.Attempt{ID: ended.ID, RequestID: "req_1", N: 2, CancelAcked: true, LeaseEpoch: 1}})

	got := mustGet(t, s, "req_1").Attempts
	if len(got) != 3 || got[0].N != 1 || got[1].N != 2 || got[2].N != 10 {
		t.Fatalf("attempts = %+v, want N 1, 2, 10", got)
	}
	a2 := got[1]
	want := ended
	want.CancelAcked = true
	if !equalAttempt(a2, want) {
		t.Errorf("attempt 2 = %+v, want %+v", a2, want)
	}
}

func testApplyTraces(t *testing.T, b Backend) {
	s := b.New(t)
	ev := func(seq int64, kind string) store.Mutation {
		return store.AddTrace{Event: store.TraceEvent{RequestID: "req_1", Seq: seq, At: t0.Add(time.Duration(seq)), Kind: kind, Payload: []byte(kind)}}
	}
	mustApply(t, s, ev(3, "c"), ev(1, "a"), ev(2, "b"), ev(1, "duplicate"))
	got, err := s.Traces(ctx(t), "req_1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("traces = %+v, want 3", got)
	}
	for i, kind := range []string{"a", "b", "c"} {
		e := got[i]
		if e.Seq != int64(i+1) || e.Kind != kind || string(e.Payload) != kind || !e.At.Equal(t0.Add(time.Duration(i+1))) || e.RequestID != "req_1" {
			t.Errorf("trace %d = %+v, want seq %d kind %s", i, e, i+1, kind)
		}
	}
	if none, err := s.Traces(ctx(t), "req_2"); err != nil || len(none) != 0 {
		t.Errorf("traces of another request = %v, %v", none, err)
	}
}

func testApplyAtomic(t *testing.T, b Backend) {
	s := b.New(t)
	r := fullRequest("req_1", "")
	err := s.Apply(ctx(t), []store.Mutation{
		store.CreateRequest{Request: r},
		store.UpsertAttempt{Attempt: store.Attempt{ID: "req_1.a0", RequestID: "req_1", N: 0}}, // invalid N
	})
	if err == nil {
		t.Fatal("Apply with an invalid mutation succeeded")
	}
	if _, err := s.Get(ctx(t), "req_1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a failed batch wrote part of itself: Get = %v", err)
	}
	if err := s.Apply(ctx(t), nil); err != nil {
		t.Errorf("empty Apply: %v", err)
	}
}

func testGetNotFound(t *testing.T, b Backend) {
	s := b.New(t)
	if _, err := s.Get(ctx(t), "req_nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get(missing) = %v, want ErrNotFound", err)
	}
}

func testMarkFirstDelta(t *testing.T, b Backend) {
	s := b.New(t)
	mustClaim(t, s, keyed("req_1", "key-1", "body", gwA, t0), store.ClaimNew)
	if err := s.MarkFirstDelta(ctx(t), "req_1", gwA, t0.Add(7)); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkFirstDelta(ctx(t), "req_1", gwA, t0.Add(9)); err != nil {
		t.Fatalf("marking twice: %v", err)
	}
	got := mustGet(t, s, "req_1")
	if got.Phase != store.PhaseStreaming {
		t.Errorf("phase %q after the boundary record, want streaming", got.Phase)
	}
	if !got.FirstDeltaSent || !got.FirstDeltaAt.Equal(t0.Add(7)) || !got.UpdatedAt.Equal(t0.Add(9)) {
		t.Errorf("first delta %v at %v updated %v; want true at %v (the first mark), updated %v",
			got.FirstDeltaSent, got.FirstDeltaAt, got.UpdatedAt, t0.Add(7), t0.Add(9))
	}
	// Visible to another gateway at once (it is what makes a rerun unsafe).
	if r := mustGet(t, b.peer(t, s), "req_1"); !r.FirstDeltaSent {
		t.Errorf("peer does not see the boundary record")
	}
	if err := s.MarkFirstDelta(ctx(t), "req_nope", gwA, t0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("MarkFirstDelta(missing) = %v, want ErrNotFound", err)
	}
	if err := s.MarkFirstDelta(ctx(t), "req_1", gwB, t0); !errors.Is(err, store.ErrNotOwner) {
		t.Errorf("MarkFirstDelta(other owner) = %v, want ErrNotOwner", err)
	}
	// The owner itself, once its lease ran out: no boundary record, since
	// another gateway may be taking the request over.
	mustClaim(t, s, keyed("req_2", "key-2", "body", gwA, t0), store.ClaimNew)
	if err := s.MarkFirstDelta(ctx(t), "req_2", gwA, t0.Add(leaseTTL)); !errors.Is(err, store.ErrNotOwner) {
		t.Errorf("MarkFirstDelta(lease expired) = %v, want ErrNotOwner", err)
	}
	if got := mustGet(t, s, "req_2"); got.FirstDeltaSent {
		t.Errorf("a refused boundary record was written")
	}
}

func testRenewOwner(t *testing.T, b Backend) {
	s := b.New(t)
	mustClaim(t, s, keyed("req_1", "key-1", "body", gwA, t0), store.ClaimNew)
	mustClaim(t, s, keyed("req_2", "", "body", gwA, t0), store.ClaimNew)
	mustClaim(t, s, keyed("req_3", "key-3", "body", gwA, t0), store.ClaimNew)
	mustClaim(t, s, keyed("req_4", "key-4", "body", gwB, t0), store.ClaimNew)
	mustApply(t, s, store.UpdateRequest{ID: "req_3", Outcome: store.OutcomeCompleted})

	until := t0.Add(2 * leaseTTL)
	n, err := s.RenewOwner(ctx(t), gwA, until)
	if err != nil || n != 2 {
		t.Fatalf("RenewOwner = %d, %v; want 2 (running requests of %s)", n, err, gwA)
	}
	for id, want := range map[string]time.Time{"req_1": until, "req_2": until, "req_3": t0.Add(leaseTTL), "req_4": t0.Add(leaseTTL)} {
		if got := mustGet(t, s, id).OwnerLeaseUntil; !got.Equal(want) {
			t.Errorf("%s lease = %v, want %v", id, got, want)
		}
	}
	// Never backwards.
	if _, err := s.RenewOwner(ctx(t), gwA, t0); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, s, "req_1").OwnerLeaseUntil; !got.Equal(until) {
		t.Errorf("lease moved back to %v", got)
	}
	// A renewed lease keeps other gateways out past the first deadline.
	mustClaim(t, s, keyed("req_5", "key-1", "body", gwB, t0.Add(leaseTTL+1)), store.ClaimInUse)
}

func testSweep(t *testing.T, b Backend) {
	s := b.New(t)
	for i, exp := range []time.Duration{time.Hour, 2 * time.Hour, 3 * time.Hour} {
		c := keyed("req_"+string(rune('1'+i)), "key-"+string(rune('1'+i)), "body", gwA, t0)
		c.Request.ExpiresAt = t0.Add(exp)
		mustClaim(t, s, c, store.ClaimNew)
	}
	forever := fullRequest("req_0", "")
	forever.ExpiresAt = time.Time{}
	mustApply(t, s,
		store.CreateRequest{Request: forever},
		store.UpsertAttempt{Attempt: store.Attempt{ID: "req_1.a1", RequestID: "req_1", N: 1}},
		store.AddTrace{Event: store.TraceEvent{RequestID: "req_1", Seq: 1}},
		store.AddTrace{Event: store.TraceEvent{RequestID: "req_3", Seq: 1}},
	)
	n, err := s.Sweep(ctx(t), t0.Add(2*time.Hour)) // expiry "at or before now"
	if err != nil || n != 2 {
		t.Fatalf("Sweep = %d, %v; want 2", n, err)
	}
	for _, id := range []string{"req_1", "req_2"} {
		if _, err := s.Get(ctx(t), id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s survived the sweep: %v", id, err)
		}
	}
	mustGet(t, s, "req_3")
	mustGet(t, s, "req_0")
	if ev, _ := s.Traces(ctx(t), "req_1"); len(ev) != 0 {
		t.Errorf("traces of a swept request remain: %v", ev)
	}
	if ev, _ := s.Traces(ctx(t), "req_3"); len(ev) != 1 {
		t.Errorf("traces of a kept request = %v, want 1", ev)
	}
	// The swept key is free: a new claim with it is new.
	mustClaim(t, s, keyed("req_9", "key-1", "body", gwB, t0.Add(2*time.Hour)), store.ClaimNew)
	if n, err := s.Sweep(ctx(t), t0.Add(2*time.Hour)); err != nil || n != 0 {
		t.Errorf("second Sweep = %d, %v; want 0", n, err)
	}
}
