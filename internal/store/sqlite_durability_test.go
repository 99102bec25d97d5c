package store_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencegate/fencegate/internal/store"
)

// journalLifecycle submits what the gateway journals for one keyless
// request: create, two attempts (the first fenced, the second finished),
// the boundary, and the outcome.
func journalLifecycle(j *store.Journal, id string, at time.Time) {
	j.Submit(store.CreateRequest{Request: store.Request{
		ID: id, Phase: store.PhaseQueued, Owner: "gw", OwnerLeaseUntil: at.Add(30 * time.Second),
		CreatedAt: at, ExpiresAt: at.Add(24 * time.Hour), Model: "m", Stream: true,
	}})
	j.Submit(store.UpsertAttempt{Attempt: store.Attempt{
		ID: store.AttemptID(id, 1), RequestID: id, N: 1, Replica: "r1", LeaseEpoch: 1,
		StartedAt: at, EndedAt: at.Add(time.Millisecond), EndReason: "upstream_reset", CancelSent: true,
	}})
	j.Submit(store.UpsertAttempt{Attempt: store.Attempt{
		ID: store.AttemptID(id, 2), RequestID: id, N: 2, Replica: "r2", LeaseEpoch: 2, StartedAt: at.Add(time.Millisecond),
	}})
	j.Submit(store.UpdateRequest{ID: id, At: at.Add(2 * time.Millisecond), Phase: store.PhaseStreaming, FirstDeltaSent: true})
	j.Submit(store.UpdateRequest{ID: id, At: at.Add(3 * time.Millisecond), Phase: store.PhaseDone,
		Outcome: store.OutcomeCompleted, DeliveredOutputTokens: 42})
}

func assertLifecycle(t *testing.T, s store.Store, id string) {
	t.Helper()
	r, err := s.Get(t.Context(), id)
	if err != nil {
		t.Fatalf("%s lost: %v", id, err)
	}
	if r.Outcome != store.OutcomeCompleted || !r.FirstDeltaSent || r.DeliveredOutputTokens != 42 ||
		len(r.Attempts) != 2 || !r.Attempts[0].CancelSent || r.Attempts[1].Replica != "r2" {
		t.Fatalf("%s incomplete after reopen: %+v", id, r)
	}
}

// Everything the journal accepted before Close is on disk after a reopen,
// with no Flush call anywhere.
func TestSQLiteJournalSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.db")
	s, err := store.Open(t.Context(), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	claim := store.Claim{Now: jt0, Request: store.Request{
		ID: "req_keyed", IdempotencyKey: "k", BodyHash: store.HashBody([]byte("b")), Owner: "gw",
		OwnerLeaseUntil: jt0.Add(30 * time.Second), CreatedAt: jt0, ExpiresAt: jt0.Add(24 * time.Hour),
	}}
	if _, err := s.Claim(t.Context(), claim); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkFirstDelta(t.Context(), "req_keyed", "gw", jt0.Add(time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	j := store.NewJournal(s, store.JournalOptions{MaxBatch: 16})
	const n = 50
	for i := range n {
		journalLifecycle(j, fmt.Sprintf("req_%02d", i), jt0.Add(time.Duration(i)*time.Second))
	}
	if err := j.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2, err := store.Open(t.Context(), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	for i := range n {
		assertLifecycle(t, s2, fmt.Sprintf("req_%02d", i))
	}
	if r, err := s2.Get(t.Context(), "req_keyed"); err != nil || !r.FirstDeltaSent {
		t.Fatalf("boundary record lost: %+v, %v", r, err)
	}
}

// The files on disk while the gateway still runs (no Close, as after a
// crash of the process) hold every acknowledged write: the boundary record
// on MarkFirstDelta's return, the journal on Flush's return. The copy is
// opened as a new process would open it after the crash.
func TestSQLiteAcknowledgedWritesAreOnDiskBeforeClose(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "journal.db")
	s, err := store.Open(t.Context(), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	j := store.NewJournal(s, store.JournalOptions{FlushEvery: time.Hour})
	defer j.Close(t.Context())

	claim := store.Claim{Now: jt0, Request: store.Request{
		ID: "req_keyed", IdempotencyKey: "k", BodyHash: store.HashBody([]byte("b")), Owner: "gw",
		OwnerLeaseUntil: jt0.Add(30 * time.Second), CreatedAt: jt0, ExpiresAt: jt0.Add(24 * time.Hour),
	}}
	if _, err := s.Claim(t.Context(), claim); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkFirstDelta(t.Context(), "req_keyed", "gw", jt0.Add(time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	journalLifecycle(j, "req_journaled", jt0)
	if err := j.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}

	crashed := filepath.Join(t.TempDir(), "journal.db")
	for _, suffix := range []string{"", "-wal"} {
		copyFile(t, path+suffix, crashed+suffix)
	}
	after, err := store.Open(t.Context(), "sqlite:"+crashed)
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	// A gateway starting after the crash must see that the boundary was
	// crossed: a rerun would now be unsafe, the claim says interrupted.
	res, err := after.Claim(t.Context(), store.Claim{Now: jt0.Add(time.Minute), Request: store.Request{
		ID: "req_other", IdempotencyKey: "k", BodyHash: store.HashBody([]byte("b")), Owner: "gw2",
		OwnerLeaseUntil: jt0.Add(2 * time.Minute), CreatedAt: jt0.Add(time.Minute), ExpiresAt: jt0.Add(24 * time.Hour),
	}})
	if err != nil || res.Status != store.ClaimInterrupted {
		t.Fatalf("claim after crash = %v, %v; want interrupted", res.Status, err)
	}
	assertLifecycle(t, after, "req_journaled")
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if os.IsNotExist(err) {
		return // e.g. no WAL after a checkpoint
	}
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestOpenRejectsUnknownDSN(t *testing.T) {
	for _, dsn := range []string{"", "mysql://user:secret@host/db", "sqlite:", "sqlite:a?b"} {
		s, err := store.Open(t.Context(), dsn)
		if err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", dsn)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q) error leaks the password: %v", dsn, err)
		}
	}
	s, err := store.Open(t.Context(), "memory:")
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}
