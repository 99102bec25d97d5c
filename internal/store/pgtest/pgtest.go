// Package pgtest gives tests a PostgreSQL schema of their own on the test server.
//
// The server is FENCEGATE_TEST_POSTGRES (default postgres://postgres@127.0.0.1:5432/test).
// When it is unreachable the test is skipped, except with CI=true, where it must be up.
// It is test support only: nothing outside _test.go files imports it.
package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultDSN is the test server used when FENCEGATE_TEST_POSTGRES is unset.
const DefaultDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// DSN returns the DSN of the test server, skipping the test when it is unreachable, unless
// CI=true, where the server must be up.
func DSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("FENCEGATE_TEST_POSTGRES")
	if dsn == "" {
		dsn = DefaultDSN
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

// Schema creates a fresh schema for one test and drops it at the end; it returns a DSN whose
// search_path points at it, so the store's tables live there alone.
func Schema(t testing.TB) string {
	t.Helper()
	base := DSN(t)
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
