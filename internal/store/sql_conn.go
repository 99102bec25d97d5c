package store

import (
	"context"
	"errors"
)

// The SQL stores share one engine (sql_engine.go) written against the small
// interfaces below; sqlite.go adapts database/sql (modernc.org/sqlite) and
// postgres.go adapts pgx. The statements are written once, in the subset of
// SQL both dialects accept: $N placeholders, INSERT … ON CONFLICT, CASE,
// COALESCE, TRUE/FALSE, BIGINT times.

// sqlQuerier runs statements, inside a transaction or not.
type sqlQuerier interface {
	// exec runs one statement and returns the number of rows it changed.
	exec(ctx context.Context, query string, args ...any) (int64, error)
	// execBatch runs statements in order, stopping at the first error; the
	// PostgreSQL adapter pipelines them in one round trip.
	execBatch(ctx context.Context, stmts []sqlStmt) error
	// queryRow runs a query expected to return at most one row; its Scan
	// returns errNoRows when there is none.
	queryRow(ctx context.Context, query string, args ...any) rowScanner
	// query runs a query returning rows.
	query(ctx context.Context, query string, args ...any) (sqlRows, error)
}

type sqlStmt struct {
	query string
	args  []any
}

type rowScanner interface {
	Scan(dest ...any) error
}

type sqlRows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// sqlBackend is what differs between SQLite and PostgreSQL.
type sqlBackend interface {
	// inTx runs fn in one write transaction, retrying it on transient
	// conflicts (serialization failures, deadlocks).
	inTx(ctx context.Context, fn func(tx sqlQuerier) error) error
	// applyBatch runs stmts in order in one write transaction (Apply); the
	// SQLite backend keeps them prepared across transactions.
	applyBatch(ctx context.Context, stmts []sqlStmt) error
	// inDurableTx is inTx whose commit is on stable storage when it returns
	// (MarkFirstDelta).
	inDurableTx(ctx context.Context, fn func(tx sqlQuerier) error) error
	// reader runs reads outside a transaction.
	reader() sqlQuerier
	// forUpdate is appended to the SELECT that locks a row inside a Claim:
	// " FOR UPDATE" in PostgreSQL; "" in SQLite, whose write transactions
	// are exclusive from BEGIN IMMEDIATE on.
	forUpdate() string
	// anonParams says whether generated statements (multi-row INSERTs) use
	// "?" parameters, bound by position, instead of $1, $2, …: SQLite binds
	// a "?" without looking its name up.
	anonParams() bool
	close() error
}

// errNoRows is what rowScanner.Scan returns when a query found no row,
// whatever the driver's own sentinel is.
var errNoRows = errors.New("store: no rows")
