package store

import (
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"
)

var base = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func genUpdate(t *rapid.T, label string) UpdateRequest {
	bytesOrNil := func(name string) []byte {
		if rapid.Bool().Draw(t, name+"?") {
			return []byte(rapid.StringMatching(`[a-z]{1,3}`).Draw(t, name))
		}
		return nil
	}
	u := UpdateRequest{
		ID:                    "req_1",
		Phase:                 Phase(rapid.SampledFrom([]string{"", "routing", "streaming", "done"}).Draw(t, label+"phase")),
		Outcome:               Outcome(rapid.SampledFrom([]string{"", "completed", "failed", "interrupted"}).Draw(t, label+"outcome")),
		FirstDeltaSent:        rapid.Bool().Draw(t, label+"delta"),
		DeliveredOutputTokens: rapid.Int64Range(0, 50).Draw(t, label+"tokens"),
		ModelRevision:         rapid.SampledFrom([]string{"", "r1", "r2"}).Draw(t, label+"rev"),
		Error:                 bytesOrNil(label + "error"),
		Response:              bytesOrNil(label + "response"),
		ResponseIsSSE:         rapid.Bool().Draw(t, label+"sse"),
		ResponseStatus:        rapid.IntRange(200, 202).Draw(t, label+"status"),
		ResponseID:            rapid.SampledFrom([]string{"", "resp_1", "resp_2"}).Draw(t, label+"response id"),
		ResponseReplica:       rapid.SampledFrom([]string{"", "r1", "r2"}).Draw(t, label+"response replica"),
	}
	if rapid.Bool().Draw(t, label+"at?") {
		u.At = base.Add(time.Duration(rapid.IntRange(0, 100).Draw(t, label+"at")))
	}
	return u
}

// The Journal may merge two pending updates only because applying their
// merge equals applying them one after the other.
func TestMergeUpdatesEqualsSequentialApply(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		start := Request{
			ID: "req_1", IdempotencyKey: rapid.SampledFrom([]string{"", "k"}).Draw(t, "key"),
			Phase: PhaseQueued, UpdatedAt: base.Add(50),
			Outcome:               Outcome(rapid.SampledFrom([]string{"", "completed"}).Draw(t, "outcome0")),
			DeliveredOutputTokens: rapid.Int64Range(0, 50).Draw(t, "tokens0"),
			ResponseID:            rapid.SampledFrom([]string{"", "resp_0"}).Draw(t, "response id0"),
			ResponseReplica:       rapid.SampledFrom([]string{"", "r0"}).Draw(t, "response replica0"),
		}
		a, b := genUpdate(t, "a."), genUpdate(t, "b.")
		seq, merged := start.clone(), start.clone()
		applyUpdate(seq, &a)
		applyUpdate(seq, &b)
		m := a
		mergeUpdateInto(&m, &b)
		applyUpdate(merged, &m)
		if !reflect.DeepEqual(seq, merged) {
			t.Fatalf("sequential %+v\nmerged     %+v", seq, merged)
		}
	})
}

func genAttempt(t *rapid.T, label string) Attempt {
	a := Attempt{
		ID: "req_1.a1", RequestID: "req_1", N: 1,
		Replica:     rapid.SampledFrom([]string{"", "r1", "r2"}).Draw(t, label+"replica"),
		LeaseEpoch:  rapid.Uint64Range(0, 5).Draw(t, label+"epoch"),
		EndReason:   rapid.SampledFrom([]string{"", "reset", "fenced"}).Draw(t, label+"reason"),
		Failure:     rapid.SampledFrom([]string{"", "dead", "uncertain"}).Draw(t, label+"failure"),
		CancelSent:  rapid.Bool().Draw(t, label+"sent"),
		CancelAcked: rapid.Bool().Draw(t, label+"acked"),
	}
	if rapid.Bool().Draw(t, label+"started?") {
		a.StartedAt = base.Add(time.Duration(rapid.IntRange(1, 9).Draw(t, label+"started")))
	}
	if rapid.Bool().Draw(t, label+"ended?") {
		a.EndedAt = base.Add(time.Duration(rapid.IntRange(10, 19).Draw(t, label+"ended")))
	}
	return a
}

// Coalescing two pending attempt upserts is safe because the attempt merge
// is associative.
func TestMergeAttemptAssociative(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		stored, a, b := genAttempt(t, "s."), genAttempt(t, "a."), genAttempt(t, "b.")
		seq := mergeAttempt(mergeAttempt(stored, a), b)
		merged := mergeAttempt(stored, mergeAttempt(a, b))
		if !reflect.DeepEqual(seq, merged) {
			t.Fatalf("sequential %+v\nmerged     %+v", seq, merged)
		}
	})
}

func TestSplitSQL(t *testing.T) {
	got := splitSQL("-- a comment; with a semicolon\nCREATE TABLE a (\n  x INT\n);\n\nCREATE INDEX b ON a (x);\nSELECT 1")
	want := []string{"CREATE TABLE a (\n  x INT\n)", "CREATE INDEX b ON a (x)", "SELECT 1"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("splitSQL = %q, want %q", got, want)
	}
}

func TestMigrationsLoad(t *testing.T) {
	for name, ms := range map[string][]migration{"sqlite": sqliteMigrations, "postgres": postgresMigrations} {
		if len(ms) == 0 || ms[0].version != 1 || len(ms[0].statements) < 5 {
			t.Errorf("%s migrations = %+v", name, ms)
		}
	}
	if len(sqliteMigrations) != len(postgresMigrations) {
		t.Errorf("sqlite has %d migrations, postgres %d: every schema change goes to both", len(sqliteMigrations), len(postgresMigrations))
	}
	for i := range min(len(sqliteMigrations), len(postgresMigrations)) {
		if s, p := sqliteMigrations[i], postgresMigrations[i]; s.version != p.version || s.name != p.name {
			t.Errorf("migration %d is %d_%s in sqlite, %d_%s in postgres", i, s.version, s.name, p.version, p.name)
		}
	}
}
