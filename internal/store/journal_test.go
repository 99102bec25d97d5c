package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fencegate/fencegate/internal/store"
)

var jt0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// recordingStore is a memory store that records each Apply batch, can fail
// the next Applies, and can hold Apply until released.
type recordingStore struct {
	*store.Memory
	mu      sync.Mutex
	batches [][]store.Mutation
	failN   int           // fail this many Applies from now on
	hold    chan struct{} // when non-nil, Apply waits for it (or ctx)
	entered chan struct{} // when non-nil, gets a value each time Apply starts
	applied chan int      // when non-nil, receives each applied batch's size
}

func newRecordingStore() *recordingStore {
	return &recordingStore{Memory: store.NewMemory()}
}

func (r *recordingStore) Apply(ctx context.Context, muts []store.Mutation) error {
	r.mu.Lock()
	hold, entered := r.hold, r.entered
	r.mu.Unlock()
	if entered != nil {
		entered <- struct{}{}
	}
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	r.mu.Lock()
	if r.failN > 0 {
		r.failN--
		r.mu.Unlock()
		return errors.New("database unavailable")
	}
	r.batches = append(r.batches, append([]store.Mutation(nil), muts...))
	r.mu.Unlock()
	if err := r.Memory.Apply(ctx, muts); err != nil {
		return err
	}
	if r.applied != nil {
		r.applied <- len(muts)
	}
	return nil
}

func (r *recordingStore) recorded() [][]store.Mutation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]store.Mutation(nil), r.batches...)
}

// idle options: no timer-driven write during the test; writes come from
// Flush, Close or a full batch.
var idle = store.JournalOptions{FlushEvery: time.Hour}

func create(id string) store.CreateRequest {
	return store.CreateRequest{Request: store.Request{
		ID: id, Phase: store.PhaseQueued, Owner: "gw", CreatedAt: jt0, ExpiresAt: jt0.Add(time.Hour),
	}}
}

func closeJournal(t *testing.T, j *store.Journal) {
	t.Helper()
	if err := j.Close(t.Context()); err != nil {
		t.Errorf("journal close: %v", err)
	}
}

func TestJournalMergesPendingMutationsInOrder(t *testing.T) {
	rec := newRecordingStore()
	j := store.NewJournal(rec, idle)
	defer closeJournal(t, j)

	a1 := store.Attempt{ID: "req_1.a1", RequestID: "req_1", N: 1, Replica: "r1", StartedAt: jt0}
	a1end := store.Attempt{ID: "req_1.a1", RequestID: "req_1", N: 1, EndedAt: jt0.Add(time.Second), EndReason: "done"}
	muts := []store.Mutation{
		create("req_1"),
		store.UpdateRequest{ID: "req_1", Phase: store.PhaseRouting},
		store.UpsertAttempt{Attempt: a1},
		store.UpdateRequest{ID: "req_1", Phase: store.PhaseStreaming, FirstDeltaSent: true, DeliveredOutputTokens: 3},
		store.AddTrace{Event: store.TraceEvent{RequestID: "req_1", Seq: 1, Kind: "first_delta"}},
		store.UpsertAttempt{Attempt: a1end},
		store.UpdateRequest{ID: "req_1", Phase: store.PhaseDone, Outcome: store.OutcomeCompleted, DeliveredOutputTokens: 9},
	}
	for _, m := range muts {
		j.Submit(m)
	}
	if err := j.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}

	batches := rec.recorded()
	if len(batches) != 1 {
		t.Fatalf("%d batches, want 1", len(batches))
	}
	var kinds []string
	for _, m := range batches[0] {
		kinds = append(kinds, fmt.Sprintf("%T", m))
	}
	// The updates before the trace are folded into the pending create, and the attempt's
	// end into its start; the update after the trace stays after it, so that the outcome
	// is never written before a trace submitted ahead of it.
	want := "[store.CreateRequest store.UpsertAttempt store.AddTrace store.UpdateRequest]"
	if fmt.Sprint(kinds) != want {
		t.Errorf("batch = %v, want %s (merged, first-position order)", kinds, want)
	}

	// The merged batch leaves the same rows as the mutations one by one.
	ref := store.NewMemory()
	for _, m := range muts {
		if err := ref.Apply(t.Context(), []store.Mutation{m}); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := rec.Get(t.Context(), "req_1")
	exp, _ := ref.Get(t.Context(), "req_1")
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", exp) {
		t.Errorf("merged result\n%+v\nwant\n%+v", got, exp)
	}
	st := j.Stats()
	if st.Submitted != 7 || st.Merged != 3 || st.Written != 4 || st.Batches != 1 || st.Pending != 0 {
		t.Errorf("stats = %+v", st)
	}
}

// A trace submitted before a request's final update is written before it, even when the
// request's earlier update sits in an earlier batch: the reader who sees the outcome sees
// the trace (docs/design.md §7, Traces).
func TestJournalWritesATraceBeforeTheUpdatesAfterIt(t *testing.T) {
	rec := newRecordingStore()
	j := store.NewJournal(rec, store.JournalOptions{FlushEvery: time.Hour, MaxBatch: 2})
	defer closeJournal(t, j)
	rec.hold = make(chan struct{})
	rec.entered = make(chan struct{}, 8)
	j.Submit(create("req_0"))
	j.Submit(create("req_9")) // a full batch: the writer takes it and waits in Apply
	<-rec.entered
	j.Submit(store.UpdateRequest{ID: "req_0", Owner: "gw", Phase: store.PhaseStreaming})
	j.Submit(create("req_1"))
	j.Submit(store.AddTrace{Event: store.TraceEvent{RequestID: "req_0", Seq: 1, Kind: "document"}})
	j.Submit(store.UpdateRequest{ID: "req_0", Owner: "gw", Phase: store.PhaseDone, Outcome: store.OutcomeCompleted})
	close(rec.hold)
	if err := j.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, b := range rec.recorded() {
		for _, m := range b {
			switch m := m.(type) {
			case store.AddTrace:
				order = append(order, "trace")
			case store.UpdateRequest:
				if m.ID == "req_0" {
					order = append(order, "update:"+string(m.Phase))
				}
			}
		}
	}
	if want := "[update:streaming trace update:done]"; fmt.Sprint(order) != want {
		t.Fatalf("req_0 written in the order %v, want %s", order, want)
	}
}

// An update folds into its request's create only while that create is pending: once it
// was written, the update is written as one. An update from another owner is folded by
// the store's own rule, which ignores it, exactly as the store would.
func TestJournalFoldsUpdatesIntoAPendingCreateOnly(t *testing.T) {
	rec := newRecordingStore()
	j := store.NewJournal(rec, idle)
	defer closeJournal(t, j)

	first := []store.Mutation{
		create("req_1"),
		store.UpdateRequest{ID: "req_1", Owner: "other-gw", Phase: store.PhaseDone, Outcome: store.OutcomeCancelled},
		store.UpdateRequest{ID: "req_1", Owner: "gw", Phase: store.PhaseStreaming, FirstDeltaSent: true, DeliveredOutputTokens: 2},
	}
	second := []store.Mutation{
		store.UpdateRequest{ID: "req_1", Phase: store.PhaseDone, Outcome: store.OutcomeCompleted, DeliveredOutputTokens: 5},
	}
	ref := store.NewMemory()
	for _, batch := range [][]store.Mutation{first, second} {
		for _, m := range batch {
			j.Submit(m)
			if err := ref.Apply(t.Context(), []store.Mutation{m}); err != nil {
				t.Fatal(err)
			}
		}
		if err := j.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	batches := rec.recorded()
	if len(batches) != 2 || len(batches[0]) != 1 || len(batches[1]) != 1 {
		t.Fatalf("batches %v, want [[create] [update]]", batches)
	}
	if _, ok := batches[1][0].(store.UpdateRequest); !ok {
		t.Fatalf("second batch %T, want the update of the written request", batches[1][0])
	}
	got, _ := rec.Get(t.Context(), "req_1")
	exp, _ := ref.Get(t.Context(), "req_1")
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", exp) {
		t.Errorf("journaled\n%+v\nwant\n%+v", got, exp)
	}
	if got.Outcome != store.OutcomeCompleted || got.DeliveredOutputTokens != 5 || !got.FirstDeltaSent || got.Owner != "gw" {
		t.Errorf("row %+v", got)
	}
}

func TestJournalWritesAFullBatchAtOnce(t *testing.T) {
	rec := newRecordingStore()
	rec.applied = make(chan int, 4)
	j := store.NewJournal(rec, store.JournalOptions{FlushEvery: time.Hour, MaxBatch: 4})
	defer closeJournal(t, j)
	for i := range 4 {
		j.Submit(create(fmt.Sprintf("req_%d", i)))
	}
	// No Flush: the fourth Submit must start the write by itself.
	if n := <-rec.applied; n != 4 {
		t.Errorf("first batch has %d mutations, want 4", n)
	}
}

func TestJournalSplitsIntoMaxBatch(t *testing.T) {
	rec := newRecordingStore()
	j := store.NewJournal(rec, store.JournalOptions{FlushEvery: time.Hour, MaxBatch: 3})
	rec.mu.Lock()
	rec.hold = make(chan struct{}) // keep the background writer from racing the Flush below
	rec.mu.Unlock()
	for i := range 7 {
		j.Submit(create(fmt.Sprintf("req_%d", i)))
	}
	rec.mu.Lock()
	close(rec.hold)
	rec.hold = nil
	rec.mu.Unlock()
	closeJournal(t, j)
	var sizes []int
	total := 0
	for _, b := range rec.recorded() {
		sizes = append(sizes, len(b))
		total += len(b)
		if len(b) > 3 {
			t.Errorf("batch of %d mutations exceeds MaxBatch 3", len(b))
		}
	}
	if total != 7 {
		t.Errorf("batches %v hold %d mutations, want 7", sizes, total)
	}
}

func TestJournalWritesEveryFlushEvery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecordingStore()
		j := store.NewJournal(rec, store.JournalOptions{FlushEvery: 20 * time.Millisecond})
		defer closeJournal(t, j)

		j.Submit(create("req_1"))
		time.Sleep(19 * time.Millisecond) // fake time inside the bubble
		synctest.Wait()
		if n := len(rec.recorded()); n != 0 {
			t.Fatalf("%d batches written before FlushEvery", n)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if n := len(rec.recorded()); n != 1 {
			t.Fatalf("%d batches written after FlushEvery, want 1", n)
		}
	})
}

func TestJournalRetriesAFailedBatchFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newRecordingStore()
		rec.failN = 3
		j := store.NewJournal(rec, store.JournalOptions{FlushEvery: 20 * time.Millisecond})
		defer closeJournal(t, j)

		j.Submit(create("req_1"))
		if err := j.Flush(t.Context()); err == nil {
			t.Fatal("Flush succeeded against a failing store")
		}
		j.Submit(store.UpdateRequest{ID: "req_1", Phase: store.PhaseRouting})
		st := j.Stats()
		if st.FailedBatches != 1 || st.Pending != 2 || st.LastError == nil {
			t.Fatalf("after a failure: stats %+v, want 1 failed batch, 2 pending", st)
		}
		// The outage goes on: more updates of the same request keep
		// merging, whatever number of retries fail meanwhile.
		rec.mu.Lock()
		rec.failN = 1 << 30
		rec.mu.Unlock()
		for i := range 100 {
			j.Submit(store.UpdateRequest{ID: "req_1", DeliveredOutputTokens: int64(i)})
			time.Sleep(20 * time.Millisecond)
		}
		synctest.Wait()
		if st := j.Stats(); st.Pending != 2 || st.FailedBatches < 5 {
			t.Fatalf("during an outage: stats %+v, want 2 pending across %d+ failed retries", st, 5)
		}
		// Recovery: the writer retries with backoff (capped at 1s) in fake
		// time.
		rec.mu.Lock()
		rec.failN = 0
		rec.mu.Unlock()
		time.Sleep(2 * time.Second)
		synctest.Wait()

		batches := rec.recorded()
		if len(batches) != 2 {
			t.Fatalf("%d batches after recovery, want 2", len(batches))
		}
		if _, ok := batches[0][0].(store.CreateRequest); !ok {
			t.Errorf("first written batch starts with %T, want the retried CreateRequest", batches[0][0])
		}
		if r, err := rec.Get(t.Context(), "req_1"); err != nil || r.Phase != store.PhaseRouting || r.DeliveredOutputTokens != 99 {
			t.Errorf("after recovery: %+v, %v; want phase routing, 99 tokens (create written before the update)", r, err)
		}
		if st := j.Stats(); st.Pending != 0 || st.LastError != nil {
			t.Errorf("after recovery: stats %+v", st)
		}
	})
}

// While the database hangs, Submit keeps returning and memory stays
// bounded by the live requests, except traces, which are capped.
func TestJournalSubmitNeverBlocks(t *testing.T) {
	rec := newRecordingStore()
	rec.hold = make(chan struct{})
	rec.entered = make(chan struct{}, 8)
	j := store.NewJournal(rec, store.JournalOptions{FlushEvery: time.Hour, MaxBatch: 2, MaxPendingTraces: 10})
	j.Submit(create("req_1"))
	j.Submit(create("req_2")) // full batch: the writer starts and hangs in Apply
	<-rec.entered
	for i := range 10000 {
		j.Submit(store.UpdateRequest{ID: "req_1", DeliveredOutputTokens: int64(i)})
		j.Submit(store.UpsertAttempt{Attempt: store.Attempt{ID: "req_1.a1", RequestID: "req_1", N: 1, LeaseEpoch: uint64(i)}})
	}
	for i := range 15 {
		j.Submit(store.AddTrace{Event: store.TraceEvent{RequestID: "req_1", Seq: int64(i)}})
	}
	st := j.Stats()
	if st.Pending != 2+2+10 { // 2 creates in the hung write; 1 update, 1 attempt, 10 traces
		t.Errorf("pending = %d, want 14: updates were not merged", st.Pending)
	}
	if st.DroppedTraces != 5 {
		t.Errorf("dropped traces = %d, want 5 over the cap of 10", st.DroppedTraces)
	}
	close(rec.hold)
	closeJournal(t, j)
	r, err := rec.Get(t.Context(), "req_1")
	if err != nil || r.DeliveredOutputTokens != 9999 || len(r.Attempts) != 1 || r.Attempts[0].LeaseEpoch != 9999 {
		t.Errorf("after the hang: %+v, %v; want the last values written", r, err)
	}
}

func TestJournalCloseWritesAndRejectsLateSubmits(t *testing.T) {
	rec := newRecordingStore()
	j := store.NewJournal(rec, idle)
	j.Submit(create("req_1"))
	closeJournal(t, j)
	if _, err := rec.Get(t.Context(), "req_1"); err != nil {
		t.Errorf("Close did not write the pending mutation: %v", err)
	}
	j.Submit(create("req_2"))
	if st := j.Stats(); st.Rejected != 1 {
		t.Errorf("late submit: rejected = %d, want 1", st.Rejected)
	}
	if err := j.Close(t.Context()); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestJournalRejectsInvalidMutations(t *testing.T) {
	rec := newRecordingStore()
	j := store.NewJournal(rec, idle)
	defer closeJournal(t, j)
	j.Submit(store.UpdateRequest{})                                                // no id
	j.Submit(store.UpsertAttempt{Attempt: store.Attempt{ID: "x", RequestID: "r"}}) // N = 0
	j.Submit(nil)
	j.Submit(create("req_1"))
	if err := j.Flush(t.Context()); err != nil {
		t.Fatalf("one invalid mutation blocked the journal: %v", err)
	}
	if st := j.Stats(); st.Rejected != 3 || st.Written != 1 {
		t.Errorf("stats = %+v, want 3 rejected, 1 written", st)
	}
}

func TestJournalCloseGivesUpWhenContextEnds(t *testing.T) {
	rec := newRecordingStore()
	rec.hold = make(chan struct{}) // the database hangs forever
	j := store.NewJournal(rec, store.JournalOptions{FlushEvery: time.Hour, MaxBatch: 1})
	j.Submit(create("req_1")) // full batch: the writer hangs in Apply
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := j.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Close with a done context = %v, want context.Canceled", err)
	}
	if st := j.Stats(); st.Pending != 1 {
		t.Errorf("pending after a failed Close = %d, want 1 (reported, not hidden)", st.Pending)
	}
}
