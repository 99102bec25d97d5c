package store

import (
	"path/filepath"
	"testing"
	"time"
)

// MarkFirstDelta commits with synchronous=FULL and must leave the single
// writer connection back at NORMAL for the batched journal.
func TestSQLiteBoundaryRestoresSynchronousNormal(t *testing.T) {
	s, err := openSQLite(t.Context(), filepath.Join(t.TempDir(), "j.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	writer := s.b.(*sqliteBackend).writer
	synchronous := func() int {
		var v int
		if err := writer.QueryRowContext(t.Context(), "PRAGMA synchronous").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	var mode string
	if err := writer.QueryRowContext(t.Context(), "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
	}
	// Statement journals in memory (sqlite.go): 2 is MEMORY.
	var temp int
	if err := writer.QueryRowContext(t.Context(), "PRAGMA temp_store").Scan(&temp); err != nil || temp != 2 {
		t.Fatalf("temp_store = %d, %v; want 2 (MEMORY)", temp, err)
	}
	if got := synchronous(); got != 1 {
		t.Fatalf("synchronous = %d at open, want 1 (NORMAL)", got)
	}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := s.Claim(t.Context(), Claim{Now: now, Request: Request{ID: "req_1", Owner: "gw", OwnerLeaseUntil: now.Add(time.Minute), CreatedAt: now}}); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkFirstDelta(t.Context(), "req_1", "gw", now); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkFirstDelta(t.Context(), "req_1", "other", now); err == nil {
		t.Fatal("MarkFirstDelta by another owner succeeded")
	}
	if got := synchronous(); got != 1 {
		t.Errorf("synchronous = %d after MarkFirstDelta (also a failed one), want 1 (NORMAL)", got)
	}
}
