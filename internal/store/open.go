package store

import (
	"context"
	"fmt"
	"strings"
)

// DefaultDSN is the store used when the configuration names none: an
// SQLite file in the working directory.
const DefaultDSN = "sqlite:fencegate.db"

// Open opens the store named by dsn and brings its schema up to date:
//
//	sqlite:PATH                        SQLite file at PATH (created if absent)
//	memory:                            process memory (tests; nothing survives)
//	postgres://… or postgresql://…     PostgreSQL; query parameters other
//	                                   than libpq's (e.g. search_path) are
//	                                   sent to the server as settings
func Open(ctx context.Context, dsn string) (Store, error) {
	switch {
	case dsn == "memory:":
		return NewMemory(), nil
	case strings.HasPrefix(dsn, "sqlite:"):
		return openSQLite(ctx, strings.TrimPrefix(dsn, "sqlite:"))
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return openPostgres(ctx, dsn)
	default:
		return nil, fmt.Errorf("store: unknown dsn %q: want sqlite:PATH, memory: or postgres://…", redactDSN(dsn))
	}
}

// redactDSN keeps a DSN's scheme only, so an error message never carries a
// password.
func redactDSN(dsn string) string {
	if scheme, _, ok := strings.Cut(dsn, ":"); ok {
		return scheme + ":…"
	}
	if len(dsn) > 16 {
		return dsn[:16] + "…"
	}
	return dsn
}
