package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PostgreSQL notes:
//
//   - Several gateways share one database. Claim is race-free without
//     advisory locks: a unique index on (tenant, idempotency_key), INSERT …
//     ON CONFLICT DO NOTHING, SELECT … FOR UPDATE and compare-and-set
//     UPDATEs, all of which Postgres-compatible distributed SQL supports.
//   - Transactions run at the server's default isolation (READ COMMITTED on
//     PostgreSQL, SERIALIZABLE on CockroachDB); a serialization failure or
//     deadlock is retried (pgMaxTxRetries), as distributed SQL asks clients to.
//   - Every commit waits for the WAL flush (synchronous_commit=on, the
//     default), so MarkFirstDelta needs nothing special. Batching the journal
//     amortises that flush over up to MaxBatch mutations.
//   - Apply pipelines its statements (pgx.Batch): one round trip per batch,
//     not per mutation.
const pgMaxTxRetries = 5

// openPostgres connects to dsn (a postgres:// URL; query parameters such as
// search_path are passed to the server) and applies the migrations.
func openPostgres(ctx context.Context, dsn string) (*sqlStore, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("store: postgres: parse dsn: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: postgres: connect: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: postgres: connect %s:%d: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	b := &pgBackend{pool: pool}
	if err := migrate(ctx, b, postgresMigrations); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: postgres: %w", err)
	}
	return &sqlStore{b: b, name: "postgres"}, nil
}

type pgBackend struct {
	pool *pgxpool.Pool
}

func (b *pgBackend) inTx(ctx context.Context, fn func(tx sqlQuerier) error) error {
	var err error
	for range pgMaxTxRetries {
		if err = b.tryTx(ctx, fn); !isRetryablePgError(err) {
			return err
		}
	}
	return fmt.Errorf("gave up after %d tries: %w", pgMaxTxRetries, err)
}

func (b *pgBackend) tryTx(ctx context.Context, fn func(tx sqlQuerier) error) error {
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(pgQuerier{tx}); err != nil {
		tx.Rollback(context.WithoutCancel(ctx))
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// applyBatch implements sqlBackend: one pipelined round trip (execBatch).
func (b *pgBackend) applyBatch(ctx context.Context, stmts []sqlStmt) error {
	return b.inTx(ctx, func(tx sqlQuerier) error { return tx.execBatch(ctx, stmts) })
}

// inDurableTx is inTx: with synchronous_commit=on every commit is flushed.
func (b *pgBackend) inDurableTx(ctx context.Context, fn func(tx sqlQuerier) error) error {
	return b.inTx(ctx, fn)
}

func (b *pgBackend) reader() sqlQuerier { return pgQuerier{b.pool} }
func (b *pgBackend) forUpdate() string  { return " FOR UPDATE" }
func (b *pgBackend) anonParams() bool   { return false }
func (b *pgBackend) close() error       { b.pool.Close(); return nil }

// isRetryablePgError reports a transient conflict after which the whole
// transaction may run again: serialization_failure or deadlock_detected.
func isRetryablePgError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}

// pgQuerier adapts a pgx pool or transaction.
type pgQuerier struct {
	q interface {
		Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
		Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
		QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
		SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	}
}

func (p pgQuerier) exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := p.q.Exec(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (p pgQuerier) execBatch(ctx context.Context, stmts []sqlStmt) error {
	if len(stmts) == 1 {
		_, err := p.q.Exec(ctx, stmts[0].query, stmts[0].args...)
		return err
	}
	var batch pgx.Batch
	for _, st := range stmts {
		batch.Queue(st.query, st.args...)
	}
	br := p.q.SendBatch(ctx, &batch)
	for range stmts {
		if _, err := br.Exec(); err != nil {
			br.Close()
			return err
		}
	}
	return br.Close()
}

func (p pgQuerier) queryRow(ctx context.Context, query string, args ...any) rowScanner {
	return pgRow{p.q.QueryRow(ctx, query, args...)}
}

func (p pgQuerier) query(ctx context.Context, query string, args ...any) (sqlRows, error) {
	return p.q.Query(ctx, query, args...)
}

type pgRow struct{ r pgx.Row }

func (r pgRow) Scan(dest ...any) error {
	err := r.r.Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return errNoRows
	}
	return err
}
