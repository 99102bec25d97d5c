package store_test

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/internal/store"
	"github.com/fencegate/fencegate/internal/store/pgtest"
	"github.com/fencegate/fencegate/internal/store/storetest"
)

// postgresDSNs remembers each test store's DSN, so the suite can open a
// second pool (a second gateway) on the same schema.
var postgresDSNs sync.Map // store.Store -> string

func openPostgresAt(t testing.TB, dsn string) store.Store {
	t.Helper()
	s, err := store.Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	postgresDSNs.Store(s, dsn)
	// Registered after the schema's cleanup, so it runs before the drop.
	t.Cleanup(func() {
		postgresDSNs.Delete(s)
		s.Close()
	})
	return s
}

func postgresBackend() storetest.Backend {
	return storetest.Backend{
		New: func(t *testing.T) store.Store {
			return openPostgresAt(t, pgtest.Schema(t))
		},
		Peer: func(t *testing.T, s store.Store) store.Store {
			dsn, ok := postgresDSNs.Load(s)
			if !ok {
				t.Fatal("peer of an unknown postgres store")
			}
			return openPostgresAt(t, dsn.(string))
		},
	}
}

func TestPostgresConformance(t *testing.T) {
	pgtest.DSN(t)
	storetest.Run(t, postgresBackend())
}

// TestPostgresConcurrentMigrations opens one fresh schema from several
// processes' worth of pools at once: every Open must succeed and the
// migrations must be recorded once.
func TestPostgresConcurrentMigrations(t *testing.T) {
	dsn := pgtest.Schema(t)
	const openers = 4
	errs := make([]error, openers)
	stores := make([]store.Store, openers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range openers {
		wg.Go(func() {
			<-start
			stores[i], errs[i] = store.Open(t.Context(), dsn)
		})
	}
	close(start)
	wg.Wait()
	for i, s := range stores {
		if errs[i] != nil {
			t.Errorf("open %d: %v", i, errs[i])
			continue
		}
		t.Cleanup(func() { s.Close() })
	}
	assertMigrationsOnce(t, dsn)

	// Opening again applies nothing.
	openPostgresAt(t, dsn)
	assertMigrationsOnce(t, dsn)
}

func assertMigrationsOnce(t *testing.T, dsn string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var rows, distinct int
	if err := conn.QueryRow(t.Context(), "SELECT count(*), count(DISTINCT version) FROM schema_migrations").Scan(&rows, &distinct); err != nil {
		t.Fatal(err)
	}
	if rows == 0 || rows != distinct {
		t.Errorf("schema_migrations has %d rows for %d versions, want each version once", rows, distinct)
	}
	var tables int
	if err := conn.QueryRow(t.Context(),
		"SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name IN ('requests', 'attempts', 'trace_events')").Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 3 {
		t.Errorf("found %d of the 3 journal tables in the schema", tables)
	}
}
