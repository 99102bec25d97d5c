package store_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/store"
	"github.com/fencegate/fencegate/internal/store/pgtest"
)

// Short benchmarks; run e.g.
//
//	go test -run '^$' -bench . -benchtime=2000x ./internal/store/

type benchBackend struct {
	name string
	open func(b *testing.B) store.Store
}

func benchBackends() []benchBackend {
	return []benchBackend{
		{"sqlite", func(b *testing.B) store.Store {
			return openSQLiteAt(b, filepath.Join(b.TempDir(), "bench.db"))
		}},
		{"postgres", func(b *testing.B) store.Store {
			return openPostgresAt(b, pgtest.Schema(b))
		}},
	}
}

// BenchmarkJournalThroughput journals whole request lifecycles (create, two
// attempt upserts, first delta, finish) through the Journal's batching and
// reports requests journaled per second, including the final Flush.
func BenchmarkJournalThroughput(b *testing.B) {
	for _, be := range benchBackends() {
		b.Run(be.name, func(b *testing.B) {
			s := be.open(b)
			j := store.NewJournal(s, store.JournalOptions{})
			b.ResetTimer()
			start := time.Now()
			for i := range b.N {
				journalLifecycle(j, fmt.Sprintf("req_b%08d", i), jt0)
			}
			if err := j.Flush(b.Context()); err != nil {
				b.Fatal(err)
			}
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "requests/s")
			st := j.Stats()
			b.ReportMetric(float64(st.Written)/float64(max(st.Batches, 1)), "mutations/batch")
			if err := j.Close(b.Context()); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkMarkFirstDelta measures the synchronous, durable boundary record
// (the latency a keyed request adds before its first output byte), next to
// the same update committed without the durability step.
func BenchmarkMarkFirstDelta(b *testing.B) {
	for _, be := range benchBackends() {
		b.Run(be.name, func(b *testing.B) {
			s := be.open(b)
			ids := claimMany(b, s, b.N)
			durations := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				t := time.Now()
				if err := s.MarkFirstDelta(b.Context(), ids[i], "gw", jt0); err != nil {
					b.Fatal(err)
				}
				durations = append(durations, time.Since(t))
			}
			b.StopTimer()
			reportPercentiles(b, durations)
		})
		b.Run(be.name+"/batched-commit-for-comparison", func(b *testing.B) {
			s := be.open(b)
			ids := claimMany(b, s, b.N)
			durations := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				t := time.Now()
				err := s.Apply(b.Context(), []store.Mutation{store.UpdateRequest{ID: ids[i], Owner: "gw", FirstDeltaSent: true}})
				if err != nil {
					b.Fatal(err)
				}
				durations = append(durations, time.Since(t))
			}
			b.StopTimer()
			reportPercentiles(b, durations)
		})
	}
}

// BenchmarkClaim measures the synchronous Claim of a new keyed request.
func BenchmarkClaim(b *testing.B) {
	for _, be := range benchBackends() {
		b.Run(be.name, func(b *testing.B) {
			s := be.open(b)
			durations := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				t := time.Now()
				if _, err := s.Claim(b.Context(), keyedClaim(fmt.Sprintf("req_c%08d", i))); err != nil {
					b.Fatal(err)
				}
				durations = append(durations, time.Since(t))
			}
			b.StopTimer()
			reportPercentiles(b, durations)
		})
	}
}

func keyedClaim(id string) store.Claim {
	return store.Claim{Now: jt0, Request: store.Request{
		ID: id, Tenant: "t", IdempotencyKey: "key-" + id, BodyHash: store.HashBody([]byte(id)), Owner: "gw",
		OwnerLeaseUntil: jt0.Add(30 * time.Second), CreatedAt: jt0, ExpiresAt: jt0.Add(24 * time.Hour),
	}}
}

func claimMany(b *testing.B, s store.Store, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("req_m%08d", i)
		if _, err := s.Claim(b.Context(), keyedClaim(ids[i])); err != nil {
			b.Fatal(err)
		}
	}
	return ids
}

func reportPercentiles(b *testing.B, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	b.ReportMetric(float64(d[len(d)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(d[len(d)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkJournalRequest journals what the gateway submits for one plain
// (keyless) request — create, attempt start, phase routing, first delta,
// attempt end, final update — in batches of journalBenchBatch requests, and
// reports the cost per request (ns/op, allocs/op), the final Flush included.
//
//   - one-batch: the whole request fits in one batch (a short request, or
//     one stream at a time).
//   - across-batches: the request starts in one batch and ends in the next,
//     as at 64 streams, where a request outlives the 20 ms flush interval:
//     a create and an attempt in one batch, an update and the attempt's
//     second upsert in the next.
func BenchmarkJournalRequest(b *testing.B) {
	for _, be := range benchBackends() {
		for _, shape := range []struct {
			name string
			lag  int // requests between a request's start and its end
		}{{"one-batch", 0}, {"across-batches", journalBenchBatch}} {
			b.Run(be.name+"/"+shape.name, func(b *testing.B) {
				s := be.open(b)
				// Flushed by hand every journalBenchBatch requests, as the timer would.
				j := store.NewJournal(s, store.JournalOptions{FlushEvery: time.Hour, MaxBatch: 4096})
				defer j.Close(b.Context())
				ids := make([]string, b.N)
				for i := range ids {
					ids[i] = fmt.Sprintf("req_r%08d", i)
				}
				b.ReportAllocs()
				b.ResetTimer()
				cpu0 := processCPU(b)
				for i := range b.N + shape.lag {
					if i < b.N {
						journalRequestStart(j, ids[i], jt0)
					}
					if k := i - shape.lag; k >= 0 {
						journalRequestEnd(j, ids[k], jt0)
					}
					if (i+1)%journalBenchBatch == 0 {
						if err := j.Flush(b.Context()); err != nil {
							b.Fatal(err)
						}
					}
				}
				if err := j.Flush(b.Context()); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
				r, err := s.Get(b.Context(), ids[b.N-1])
				if err != nil || r.Outcome != store.OutcomeCompleted || len(r.Attempts) != 1 || r.Attempts[0].EndedAt.IsZero() {
					b.Fatalf("last request not journaled whole: %+v, %v", r, err)
				}
			})
		}
	}
}

// journalBenchBatch is about what one 20 ms batch holds at 1500 requests/s.
const journalBenchBatch = 32

func journalRequestStart(j *store.Journal, id string, at time.Time) {
	j.Submit(store.CreateRequest{Request: store.Request{
		ID: id, Tenant: "key1", Model: "m", Stream: true, Phase: store.PhaseRouting, Owner: "gw",
		OwnerLeaseUntil: at.Add(30 * time.Second), CreatedAt: at, UpdatedAt: at, ExpiresAt: at.Add(24 * time.Hour),
	}})
	j.Submit(store.UpsertAttempt{Attempt: store.Attempt{
		ID: store.AttemptID(id, 1), RequestID: id, N: 1, Replica: "r1", StartedAt: at, ModelRevision: "rev1",
	}})
	j.Submit(store.UpdateRequest{ID: id, Owner: "gw", At: at, Phase: store.PhaseRouting})
}

func journalRequestEnd(j *store.Journal, id string, at time.Time) {
	j.Submit(store.UpdateRequest{ID: id, Owner: "gw", At: at.Add(time.Millisecond), Phase: store.PhaseStreaming,
		FirstDeltaSent: true, ModelRevision: "rev1"})
	j.Submit(store.UpsertAttempt{Attempt: store.Attempt{
		ID: store.AttemptID(id, 1), RequestID: id, N: 1, Replica: "r1", StartedAt: at, ModelRevision: "rev1",
		EndedAt: at.Add(2 * time.Millisecond), EndReason: "completed",
	}})
	j.Submit(store.UpdateRequest{ID: id, Owner: "gw", At: at.Add(2 * time.Millisecond), Phase: store.PhaseDone,
		Outcome: store.OutcomeCompleted, DeliveredOutputTokens: 64})
}
