package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/store"
)

func testClaimNew(t *testing.T, b Backend) {
	s := b.New(t)
	c := keyed("req_1", "key-1", "body", gwA, t0)
	res := mustClaim(t, s, c, store.ClaimNew)

	want := c.Request
	want.Phase = store.PhaseQueued
	want.UpdatedAt = t0
	assertRequest(t, "claim result", res.Request, &want)
	assertRequest(t, "stored row", mustGet(t, s, "req_1"), &want)
}

func testClaimWithoutKey(t *testing.T, b Backend) {
	s := b.New(t)
	c1 := keyed("req_1", "", "body", gwA, t0)
	c1.Request.Response = []byte("ignored without a key")
	c2 := keyed("req_2", "", "body", gwA, t0)
	mustClaim(t, s, c1, store.ClaimNew)
	mustClaim(t, s, c2, store.ClaimNew)
	if got := mustGet(t, s, "req_1"); got.Response != nil || got.IdempotencyKey != "" {
		t.Errorf("keyless row: key %q, response %q; want none", got.IdempotencyKey, got.Response)
	}
	if _, err := s.Claim(ctx(t), c1); err == nil {
		t.Errorf("second keyless Claim with the same id succeeded, want a duplicate-id error")
	}
}

func testClaimInUse(t *testing.T, b Backend) {
	s := b.New(t)
	mustClaim(t, s, keyed("req_1", "key-1", "body", gwA, t0), store.ClaimNew)

	// Another gateway, same key and body, while A's lease runs.
	res := mustClaim(t, b.peer(t, s), keyed("req_2", "key-1", "body", gwB, t0.Add(leaseTTL-1)), store.ClaimInUse)
	if res.Request.ID != "req_1" || res.Request.Owner != gwA {
		t.Errorf("in-use result names %s owned by %s, want req_1 owned by %s", res.Request.ID, res.Request.Owner, gwA)
	}
	if _, err := s.Get(ctx(t), "req_2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get(req_2) = %v, want ErrNotFound: an in-use claim must insert nothing", err)
	}
}

func testClaimMismatch(t *testing.T, b Backend) {
	s := b.New(t)
	mustClaim(t, s, keyed("req_1", "key-1", "body", gwA, t0), store.ClaimNew)
	mustClaim(t, s, keyed("req_2", "key-1", "other body", gwB, t0), store.ClaimMismatch)

	// A different body is a mismatch in every state, also once completed.
	mustApply(t, s, store.UpdateRequest{ID: "req_1", Outcome: store.OutcomeCompleted, Phase: store.PhaseDone, Response: []byte("r")})
	mustClaim(t, s, keyed("req_3", "key-1", "other body", gwB, t0), store.ClaimMismatch)
	if got := mustGet(t, s, "req_1"); got.Owner != gwA {
		t.Errorf("owner after mismatching claims = %s, want %s", got.Owner, gwA)
	}
}

func testClaimReplay(t *testing.T, b Backend) {
	s := b.New(t)
	cases := []struct {
		outcome  store.Outcome
		response []byte
		err      []byte
	}{
		{store.OutcomeCompleted, []byte("data: {\"x\":1}\n\ndata: [DONE]\n\n"), nil},
		{store.OutcomeFailed, []byte(`{"error":{"code":"no_replica"}}`), []byte(`{"error":{"code":"no_replica"}}`)},
		{store.OutcomeCancelled, nil, []byte(`{"error":{"code":"client_closed"}}`)},
	}
	for i, tc := range cases {
		id, key := "req_"+string(tc.outcome), "key-"+string(tc.outcome)
		mustClaim(t, s, keyed(id, key, "body", gwA, t0), store.ClaimNew)
		mustApply(t, s, store.UpdateRequest{
			ID: id, Owner: gwA, At: t0.Add(1), Phase: store.PhaseDone, Outcome: tc.outcome,
			Response: tc.response, ResponseIsSSE: i == 0, ResponseStatus: 200 + i, Error: tc.err,
		})
		// Replayed by another gateway, even while the lease still runs.
		res := mustClaim(t, b.peer(t, s), keyed("req_x"+string(tc.outcome), key, "body", gwB, t0.Add(2)), store.ClaimReplay)
		r := res.Request
		if r.ID != id || r.Outcome != tc.outcome || string(r.Response) != string(tc.response) ||
			string(r.Error) != string(tc.err) || r.ResponseIsSSE != (i == 0) || (tc.response != nil && r.ResponseStatus != 200+i) {
			t.Errorf("%s: replay = id %s outcome %q response %q sse %v status %d error %q",
				tc.outcome, r.ID, r.Outcome, r.Response, r.ResponseIsSSE, r.ResponseStatus, r.Error)
		}
		if r.Owner != gwA {
			t.Errorf("%s: replay changed the owner to %s", tc.outcome, r.Owner)
		}
	}
}

func testClaimInterruptedStored(t *testing.T, b Backend) {
	s := b.New(t)
	mustClaim(t, s, keyed("req_1", "key-1", "body", gwA, t0), store.ClaimNew)
	if err := s.MarkFirstDelta(ctx(t), "req_1", gwA, t0.Add(1)); err != nil {
		t.Fatal(err)
	}
	mustApply(t, s, store.UpdateRequest{ID: "req_1", Outcome: store.OutcomeInterrupted, Phase: store.PhaseDone, DeliveredOutputTokens: 37})
	res := mustClaim(t, s, keyed("req_2", "key-1", "body", gwB, t0.Add(2)), store.ClaimInterrupted)
	if res.Request.ID != "req_1" || res.Request.DeliveredOutputTokens != 37 {
		t.Errorf("interrupted result = %s with %d tokens, want req_1 with 37", res.Request.ID, res.Request.DeliveredOutputTokens)
	}
}

func testClaimInterruptedDeadOwner(t *testing.T, b Backend) {
	s := b.New(t)
	mustClaim(t, s, keyed("req_1", "key-1", "body", gwA, t0), store.ClaimNew)
	if err := s.MarkFirstDelta(ctx(t), "req_1", gwA, t0.Add(1)); err != nil {
		t.Fatal(err)
	}
	// A died after crossing the boundary; its lease ran out.
	later := t0.Add(leaseTTL)
	res := mustClaim(t, b.peer(t, s), keyed("req_2", "key-1", "body", gwB, later), store.ClaimInterrupted)
	if res.Request.Outcome != store.OutcomeInterrupted || res.Request.Owner != gwA {
		t.Errorf("result outcome %q owner %s, want interrupted, owner unchanged %s", res.Request.Outcome, res.Request.Owner, gwA)
	}
	got := mustGet(t, s, "req_1")
	if got.Outcome != store.OutcomeInterrupted || got.Phase != store.PhaseDone || !got.UpdatedAt.Equal(later) {
		t.Errorf("stored outcome %q phase %q updated %v; want interrupted, done, %v", got.Outcome, got.Phase, got.UpdatedAt, later)
	}
	// And it stays interrupted for every later claim.
	mustClaim(t, s, keyed("req_3", "key-1", "body", gwB, later.Add(leaseTTL)), store.ClaimInterrupted)
}

func testClaimTakeover(t *testing.T, b Backend) {
	s := b.New(t)
	mustClaim(t, s, keyed("req_1", "key-1", "body", gwA, t0), store.ClaimNew)
	mustApply(t, s, store.UpsertAttempt{Attempt: store.Attempt{
		ID: store.AttemptID("req_1", 1), RequestID: "req_1", N: 1, Replica: "r1", LeaseEpoch: 4, StartedAt: t0,
	}})

	sb := b.peer(t, s)
	later := t0.Add(leaseTTL + 1)
	res := mustClaim(t, sb, keyed("req_2", "key-1", "body", gwB, later), store.ClaimTakeover)
	if res.Request.ID != "req_1" || res.Request.Owner != gwB || !res.Request.OwnerLeaseUntil.Equal(later.Add(leaseTTL)) {
		t.Errorf("takeover result id %s owner %s lease %v; want req_1, %s, %v",
			res.Request.ID, res.Request.Owner, res.Request.OwnerLeaseUntil, gwB, later.Add(leaseTTL))
	}
	if len(res.Request.Attempts) != 1 || res.Request.Attempts[0].Replica != "r1" || res.Request.NextAttemptN() != 2 {
		t.Errorf("takeover result attempts = %+v, want the one attempt on r1 (the next one is a2)", res.Request.Attempts)
	}
	got := mustGet(t, s, "req_1")
	if got.Owner != gwB || !got.OwnerLeaseUntil.Equal(later.Add(leaseTTL)) || got.Outcome != store.OutcomeRunning {
		t.Errorf("stored owner %s lease %v outcome %q; want %s, %v, running", got.Owner, got.OwnerLeaseUntil, got.Outcome, gwB, later.Add(leaseTTL))
	}

	// The old owner is fenced everywhere.
	if err := s.MarkFirstDelta(ctx(t), "req_1", gwA, later); !errors.Is(err, store.ErrNotOwner) {
		t.Errorf("old owner's MarkFirstDelta = %v, want ErrNotOwner", err)
	}
	if n, err := s.RenewOwner(ctx(t), gwA, later.Add(time.Hour)); err != nil || n != 0 {
		t.Errorf("old owner's RenewOwner = %d, %v; want 0", n, err)
	}
	mustApply(t, s, store.UpdateRequest{ID: "req_1", Owner: gwA, Outcome: store.OutcomeFailed, Phase: store.PhaseDone})
	if got := mustGet(t, s, "req_1"); got.Outcome != store.OutcomeRunning || got.FirstDeltaSent {
		t.Errorf("old owner's fenced update changed the row: outcome %q first delta %v", got.Outcome, got.FirstDeltaSent)
	}
	// The new owner's lease is live: a third gateway finds it in use.
	mustClaim(t, s, keyed("req_3", "key-1", "body", "gw-c", later.Add(1)), store.ClaimInUse)
	if err := sb.MarkFirstDelta(ctx(t), "req_1", gwB, later.Add(2)); err != nil {
		t.Errorf("new owner's MarkFirstDelta: %v", err)
	}
}

func testClaimLeaseEdge(t *testing.T, b Backend) {
	s := b.New(t)
	mustClaim(t, s, keyed("req_1", "key-1", "body", gwA, t0), store.ClaimNew)
	until := t0.Add(leaseTTL)
	// Alive while now is before the deadline, expired at it.
	mustClaim(t, s, keyed("req_2", "key-1", "body", gwB, until.Add(-1)), store.ClaimInUse)
	mustClaim(t, s, keyed("req_2", "key-1", "body", gwB, until), store.ClaimTakeover)
}

func testClaimExpiredKey(t *testing.T, b Backend) {
	s := b.New(t)
	mustClaim(t, s, keyed("req_1", "key-1", "body", gwA, t0), store.ClaimNew)
	mustApply(t, s,
		store.UpdateRequest{ID: "req_1", Outcome: store.OutcomeCompleted, Response: []byte("old")},
		store.UpsertAttempt{Attempt: store.Attempt{ID: "req_1.a1", RequestID: "req_1", N: 1}},
		store.AddTrace{Event: store.TraceEvent{RequestID: "req_1", Seq: 1, Kind: "k"}},
	)
	// After the retention the key is free again, even before Sweep ran;
	// a different body is then no mismatch.
	res := mustClaim(t, b.peer(t, s), keyed("req_2", "key-1", "new body", gwB, t0.Add(keep)), store.ClaimNew)
	if res.Request.ID != "req_2" {
		t.Errorf("new claim after expiry has id %s, want req_2", res.Request.ID)
	}
	if _, err := s.Get(ctx(t), "req_1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("expired row still there: %v", err)
	}
	if ev, err := s.Traces(ctx(t), "req_1"); err != nil || len(ev) != 0 {
		t.Errorf("expired row's traces = %v, %v; want none", ev, err)
	}
	if got := mustGet(t, s, "req_2"); len(got.Attempts) != 0 {
		t.Errorf("new row has attempts %+v", got.Attempts)
	}
}

func testClaimTenantsApart(t *testing.T, b Backend) {
	s := b.New(t)
	c1 := keyed("req_1", "key-1", "body", gwA, t0)
	c2 := keyed("req_2", "key-1", "other body", gwA, t0)
	c2.Request.Tenant = "tenant-2"
	mustClaim(t, s, c1, store.ClaimNew)
	mustClaim(t, s, c2, store.ClaimNew)
}

func testClaimDefaults(t *testing.T, b Backend) {
	s := b.New(t)
	c := keyed("req_1", "key-1", "body", gwA, t0)
	c.Request.CreatedAt, c.Request.ExpiresAt = time.Time{}, time.Time{}
	mustClaim(t, s, c, store.ClaimNew)
	got := mustGet(t, s, "req_1")
	if got.Phase != store.PhaseQueued || !got.CreatedAt.Equal(t0) || !got.ExpiresAt.Equal(t0.Add(store.DefaultRetention)) {
		t.Errorf("defaults: phase %q created %v expires %v; want queued, %v, %v",
			got.Phase, got.CreatedAt, got.ExpiresAt, t0, t0.Add(store.DefaultRetention))
	}
}

func testClaimInvalid(t *testing.T, b Backend) {
	s := b.New(t)
	bad := []store.Claim{
		{Now: t0},
		func() store.Claim { c := keyed("req_1", "key-1", "b", gwA, t0); c.Request.BodyHash = ""; return c }(),
		func() store.Claim { c := keyed("req_1", "key-1", "b", "", t0); return c }(),
		func() store.Claim { c := keyed("req_1", "key-1", "b", gwA, t0); c.Now = time.Time{}; return c }(),
		func() store.Claim {
			c := keyed("req_1", "key-1", "b", gwA, t0)
			c.Request.Outcome = store.OutcomeCompleted
			return c
		}(),
	}
	for i, c := range bad {
		if _, err := s.Claim(ctx(t), c); err == nil {
			t.Errorf("invalid claim %d accepted", i)
		}
	}
	if _, err := s.Get(ctx(t), "req_1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an invalid claim stored a row: %v", err)
	}
}
