package store

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Schema migrations are SQL files named <version>_<name>.sql under
// migrations/<dialect>/, embedded in the binary and applied in version
// order at Open. Each one runs in its own transaction together with the
// insert of its row in schema_migrations, so a migration is applied once:
//
//   - Applying twice is a no-op: the version row exists, the insert changes
//     nothing, the migration is skipped.
//   - Two processes opening one PostgreSQL database at once: the second
//     one's insert of the version row waits on the first one's uncommitted
//     row, then finds it committed and skips. If the first one fails, its
//     row vanishes with its rollback and the second applies the migration.
//     No advisory lock is needed, so this works on Postgres-compatible
//     distributed SQL too (DDL in a transaction is the one requirement).
//   - SQLite: BEGIN IMMEDIATE serialises the same steps.
//
// A released migration file is never edited; changes go in a new file.

//go:embed migrations
var migrationFS embed.FS

var (
	sqliteMigrations   = mustLoadMigrations("migrations/sqlite")
	postgresMigrations = mustLoadMigrations("migrations/postgres")
)

type migration struct {
	version    int64
	name       string
	statements []string
}

const createMigrationsTableSQL = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    BIGINT NOT NULL PRIMARY KEY,
	name       TEXT   NOT NULL,
	applied_at BIGINT NOT NULL
)`

const claimMigrationSQL = `INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)
ON CONFLICT (version) DO NOTHING`

// migrate applies the migrations that are not yet recorded.
func migrate(ctx context.Context, b sqlBackend, migrations []migration) error {
	if err := createMigrationsTable(ctx, b); err != nil {
		return err
	}
	for _, m := range migrations {
		err := b.inTx(ctx, func(tx sqlQuerier) error {
			n, err := tx.exec(ctx, claimMigrationSQL, m.version, m.name, time.Now().UnixNano())
			if err != nil || n == 0 {
				return err // applied already (n == 0), or failed
			}
			for i, st := range m.statements {
				if _, err := tx.exec(ctx, st); err != nil {
					return fmt.Errorf("statement %d: %w", i+1, err)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("migration %d_%s: %w", m.version, m.name, err)
		}
	}
	return nil
}

// createMigrationsTable runs CREATE TABLE IF NOT EXISTS, retrying when a
// concurrent creator won the race: PostgreSQL checks IF NOT EXISTS before
// taking its catalog locks, so two creators can collide with
// unique_violation (on pg_type), duplicate_table or duplicate_object (the
// table's row type), after which the table exists.
func createMigrationsTable(ctx context.Context, b sqlBackend) error {
	var err error
	for range 3 {
		err = b.inTx(ctx, func(tx sqlQuerier) error {
			_, err := tx.exec(ctx, createMigrationsTableSQL)
			return err
		})
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || !slices.Contains([]string{"23505", "42P07", "42710"}, pgErr.Code) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	return nil
}

func mustLoadMigrations(dir string) []migration {
	ms, err := loadMigrations(migrationFS, dir)
	if err != nil {
		panic(err) // the files are embedded: a bad one is a build defect
	}
	return ms
}

func loadMigrations(fsys fs.FS, dir string) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("store: read migrations %s: %w", dir, err)
	}
	var out []migration
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		base := strings.TrimSuffix(e.Name(), ".sql")
		num, name, ok := strings.Cut(base, "_")
		version, err := strconv.ParseInt(num, 10, 64)
		if !ok || err != nil || version <= 0 {
			return nil, fmt.Errorf("store: migration file %s/%s: want <version>_<name>.sql", dir, e.Name())
		}
		text, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("store: read migration %s: %w", e.Name(), err)
		}
		out = append(out, migration{version: version, name: name, statements: splitSQL(string(text))})
	}
	slices.SortFunc(out, func(a, b migration) int { return cmp.Compare(a.version, b.version) })
	for i := 1; i < len(out); i++ {
		if out[i].version == out[i-1].version {
			return nil, fmt.Errorf("store: migrations %s: version %d used twice", dir, out[i].version)
		}
	}
	return out, nil
}

// splitSQL splits a migration file into statements: "--" comment lines are
// dropped and a statement ends with a line ending in ';'. Migration files
// are written to that rule (no semicolons inside statements), which keeps
// this independent of each driver's multi-statement support.
func splitSQL(text string) []string {
	var (
		out []string
		cur strings.Builder
	)
	for line := range strings.Lines(text) {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "--") {
			continue
		}
		cur.WriteString(line)
		if strings.HasSuffix(trimmed, ";") {
			st := strings.TrimSuffix(strings.TrimSpace(cur.String()), ";")
			out = append(out, st)
			cur.Reset()
		}
	}
	if st := strings.TrimSpace(cur.String()); st != "" {
		out = append(out, st)
	}
	return out
}
