package store

import (
	"testing"
	"time"
)

// A pooled planner's buffers keep nothing of the batch before: the statements of the next
// batch carry its own rows' values alone, a round after a round takes the values after
// the first round's, and a released planner holds no value of the rows it wrote.
func TestPooledPlannerCarriesOnlyItsBatch(t *testing.T) {
	now := time.Unix(100, 0)
	create := func(id string) Mutation {
		return CreateRequest{Request: Request{ID: id, Tenant: "t", BodyHash: "h", Model: "m", Phase: PhaseRouting,
			Outcome: OutcomeRunning, Owner: "gw", CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour)}}
	}
	first := planBatch([]Mutation{create("a"), create("b"), create("c")}, true)
	if len(first.stmts) != 2 { // 3 rows: a statement of 2 and one of 1
		t.Fatalf("first batch: %d statements, want 2", len(first.stmts))
	}
	first.release()
	for _, v := range first.creates[:cap(first.creates)] {
		if v != nil {
			t.Fatalf("a released planner still holds %v", v)
		}
	}

	// "d" twice: the second create must come in a round of its own, after the first.
	second := planBatch([]Mutation{create("d"), create("e"), create("d")}, true)
	defer second.release()
	var ids []any
	for _, st := range second.stmts {
		if len(st.args)%requestColumnCount != 0 {
			t.Fatalf("statement with %d values, not whole rows of %d", len(st.args), requestColumnCount)
		}
		for i := 0; i < len(st.args); i += requestColumnCount {
			ids = append(ids, st.args[i])
		}
	}
	if len(ids) != 3 || ids[0] != "d" || ids[1] != "e" || ids[2] != "d" {
		t.Fatalf("rows of the second batch %v, want [d e d] in rounds [d e] then [d]", ids)
	}
}
