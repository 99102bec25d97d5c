package storetest

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/store"
)

// testApplyMatchesModel applies the same seeded random batches to the
// backend and to store.Memory, the reference model, and compares every row.
// It catches a SQL rule that drifts from the documented merge rules.
func testApplyMatchesModel(t *testing.T, b Backend) {
	s := b.New(t)
	model := store.NewMemory()
	rng := rand.New(rand.NewPCG(7, 11))
	ids := []string{"req_a", "req_b", "req_c", "req_d"}

	// Two keyed, two keyless requests, created by Claim in both.
	for i, id := range ids {
		key := ""
		if i%2 == 0 {
			key = "key-" + id
		}
		c := keyed(id, key, id, gwA, t0)
		mustClaim(t, s, c, store.ClaimNew)
		mustClaim(t, model, c, store.ClaimNew)
	}
	for round := range 40 {
		batch := make([]store.Mutation, 1+rng.IntN(6))
		for i := range batch {
			batch[i] = randomMutation(rng, ids)
		}
		mustApply(t, s, batch...)
		mustApply(t, model, batch...)
		if rng.IntN(4) == 0 {
			id := ids[rng.IntN(len(ids))]
			at := t0.Add(time.Duration(rng.IntN(1000)))
			errS := s.MarkFirstDelta(ctx(t), id, gwA, at)
			errM := model.MarkFirstDelta(ctx(t), id, gwA, at)
			if (errS == nil) != (errM == nil) {
				t.Fatalf("round %d: MarkFirstDelta(%s) = %v, model %v", round, id, errS, errM)
			}
		}
		for _, id := range ids {
			assertRequest(t, fmt.Sprintf("round %d: %s against the model", round, id), mustGet(t, s, id), mustGet(t, model, id))
		}
		// All four share CreatedAt, so when several carry one response id
		// this also checks the tie-break.
		for _, rid := range []string{"resp_1", "resp_2", "resp_none"} {
			gotS, errS := s.FindByResponseID(ctx(t), rid)
			gotM, errM := model.FindByResponseID(ctx(t), rid)
			switch {
			case (errS == nil) != (errM == nil):
				t.Errorf("round %d: FindByResponseID(%s) = %v, model %v", round, rid, errS, errM)
			case errS == nil:
				assertRequest(t, fmt.Sprintf("round %d: FindByResponseID(%s) against the model", round, rid), gotS, gotM)
			}
		}
		if t.Failed() {
			t.Fatalf("last batch: %+v", batch)
		}
	}
}

func randomMutation(rng *rand.Rand, ids []string) store.Mutation {
	id := ids[rng.IntN(len(ids))]
	pick := func(opts ...string) string { return opts[rng.IntN(len(opts))] }
	maybeBytes := func() []byte {
		if rng.IntN(3) == 0 {
			return []byte(fmt.Sprintf("b%d", rng.IntN(100)))
		}
		return nil
	}
	switch rng.IntN(3) {
	case 0:
		u := store.UpdateRequest{
			ID:                    id,
			Owner:                 pick("", "", gwA, gwB),
			Phase:                 store.Phase(pick("", "routing", "streaming", "done")),
			Outcome:               store.Outcome(pick("", "", "", "completed", "failed", "interrupted")),
			FirstDeltaSent:        rng.IntN(5) == 0,
			DeliveredOutputTokens: int64(rng.IntN(3) * rng.IntN(100)),
			QueuedMs:              int64(rng.IntN(2) * rng.IntN(5000)),
			FirstDeltaAt:          []time.Time{{}, {}, t0.Add(time.Duration(1 + rng.IntN(1000)))}[rng.IntN(3)],
			ModelRevision:         pick("", "", "rev-1", "rev-2"),
			Error:                 maybeBytes(),
			Response:              maybeBytes(),
			ResponseIsSSE:         rng.IntN(2) == 0,
			ResponseStatus:        200 + rng.IntN(3),
			ResponseID:            pick("", "", "", "resp_1", "resp_2"),
			ResponseReplica:       pick("", "r1", "r2"),
		}
		if rng.IntN(2) == 0 {
			u.At = t0.Add(time.Duration(rng.IntN(1000)))
		}
		return u
	case 1:
		n := 1 + rng.IntN(3)
		a := store.Attempt{
			ID: store.AttemptID(id, n), RequestID: id, N: n,
			Replica: pick("", "r1", "r2"), LeaseEpoch: uint64(rng.IntN(5)), EndReason: pick("", "", "reset", "fenced"), Failure: pick("", "", "dead", "uncertain"),
			CancelSent: rng.IntN(4) == 0, CancelAcked: rng.IntN(6) == 0, ModelRevision: pick("", "", "rev-1", "rev-2"),
			EngineMayHaveActed: rng.IntN(5) == 0,
		}
		if rng.IntN(2) == 0 {
			a.StartedAt = t0.Add(time.Duration(rng.IntN(1000)))
		}
		if rng.IntN(3) == 0 {
			a.EndedAt = t0.Add(time.Duration(1000 + rng.IntN(1000)))
		}
		return store.UpsertAttempt{Attempt: a}
	default:
		return store.AddTrace{Event: store.TraceEvent{RequestID: id, Seq: int64(rng.IntN(20)), At: t0, Kind: pick("a", "b"), Payload: maybeBytes()}}
	}
}

// testApplyBatchesMatchModel applies seeded random batches that create
// requests as well as change them — creates after updates of the same row,
// repeated creates and attempt upserts, batches longer than one multi-row
// statement — to the backend and to store.Memory, and compares every row and
// trace. A backend may group a batch's rows into fewer statements, but the
// result must be that of the mutations applied in order.
func testApplyBatchesMatchModel(t *testing.T, b Backend) {
	s := b.New(t)
	model := store.NewMemory()
	rng := rand.New(rand.NewPCG(3, 5))
	var all []string
	for round := range 30 {
		// A window of ids that moves by four each round: new ids, whose
		// creates meet updates submitted before them, and older ones.
		ids := make([]string, 8)
		for i := range ids {
			ids[i] = fmt.Sprintf("req_m%03d", 4*round+i)
		}
		all = append(all, ids[4:]...)
		if round == 0 {
			all = ids
		}
		n := 1 + rng.IntN(12)
		if round%10 == 9 {
			n = 300 + rng.IntN(200) // several chunks of each kind
		}
		batch := make([]store.Mutation, n)
		for i := range batch {
			if rng.IntN(3) == 0 {
				id := ids[rng.IntN(len(ids))]
				r := fullRequest(id, "")
				r.Owner = []string{gwA, gwB}[rng.IntN(2)]
				r.Outcome, r.Phase = store.OutcomeRunning, store.PhaseRouting
				r.DeliveredOutputTokens = int64(rng.IntN(50))
				r.CreatedAt = t0.Add(time.Duration(rng.IntN(1000)))
				batch[i] = store.CreateRequest{Request: r}
				continue
			}
			batch[i] = randomMutation(rng, ids)
		}
		mustApply(t, s, batch...)
		mustApply(t, model, batch...)
		for _, id := range all {
			gotS, errS := s.Get(ctx(t), id)
			gotM, errM := model.Get(ctx(t), id)
			switch {
			case (errS == nil) != (errM == nil):
				t.Fatalf("round %d: Get(%s) = %v, model %v", round, id, errS, errM)
			case errS == nil:
				assertRequest(t, fmt.Sprintf("round %d: %s against the model", round, id), gotS, gotM)
			}
			trS, errS := s.Traces(ctx(t), id)
			trM, errM := model.Traces(ctx(t), id)
			if errS != nil || errM != nil || fmt.Sprint(trS) != fmt.Sprint(trM) {
				t.Errorf("round %d: traces of %s = %v, %v; model %v, %v", round, id, trS, errS, trM, errM)
			}
		}
		if t.Failed() {
			t.Fatalf("round %d failed", round)
		}
	}
}
