package store_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/internal/store"
	"github.com/fencegate/fencegate/internal/store/storetest"
)

const defaultTestPostgres = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// postgresDSN returns the DSN of the test server (FENCEGATE_TEST_POSTGRES),
// skipping the test when it is unreachable, unless CI=true, where the
// server must be up.
func postgresDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("FENCEGATE_TEST_POSTGRES")
	if dsn == "" {
		dsn = defaultTestPostgres
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("postgres unreachable at FENCEGATE_TEST_POSTGRES: %v", err)
		}
		t.Skipf("postgres unreachable (set FENCEGATE_TEST_POSTGRES): %v", err)
	}
	conn.Close(ctx)
	return dsn
}

var schemaSeq atomic.Int64

// newPostgresSchema creates a fresh schema for one test and drops it at the
// end; it returns a DSN whose search_path points at it, so the store's
// tables (and schema_migrations) live there alone.
func newPostgresSchema(t testing.TB) string {
	t.Helper()
	base := postgresDSN(t)
	schema := fmt.Sprintf("fg_test_%d_%d_%d", os.Getpid(), time.Now().UnixNano()%1e9, schemaSeq.Add(1))
	admin, err := pgx.Connect(t.Context(), base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(t.Context(), "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

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
			return openPostgresAt(t, newPostgresSchema(t))
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
	postgresDSN(t)
	storetest.Run(t, postgresBackend())
}

// TestPostgresConcurrentMigrations opens one fresh schema from several
// processes' worth of pools at once: every Open must succeed and the
// migrations must be recorded once.
func TestPostgresConcurrentMigrations(t *testing.T) {
	dsn := newPostgresSchema(t)
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
