package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver (pure Go)
)

// SQLite settings, and why:
//
//   - journal_mode=WAL: readers (GET /v1/requests/…) never block the writer.
//   - synchronous=NORMAL for the batched journal: in WAL mode a commit is then
//     safe against a crash of the gateway process (it is in the OS page
//     cache) and the file is never corrupted, but the last commits may be
//     lost on power failure or a kernel crash. That is the price of keeping
//     fsync off the token path, and the journal can afford it.
//   - synchronous=FULL for MarkFirstDelta only: the boundary record must
//     survive the machine too. FULL fsyncs the WAL at commit, and since the
//     WAL is appended in order, that one fsync also makes every earlier
//     NORMAL commit durable. It is switched per transaction on the single
//     writer connection (sqliteBackend.inDurableTx).
//   - one writer connection with BEGIN IMMEDIATE (_txlock=immediate): writes
//     of this process queue in database/sql instead of failing with
//     SQLITE_BUSY, and a transaction takes the write lock at BEGIN, so the
//     read-then-write of a Claim cannot race another process sharing the file.
//   - busy_timeout: another process holding the write lock is waited for.
//   - temp_store=MEMORY on the writer: a multi-row INSERT of the journal (up to
//     128 rows, sql_batch.go) keeps a statement journal of the pages it
//     changes, to undo the statement alone if a row fails; past 64 KiB SQLite
//     spills it to a temporary file, opened, written and closed each time. In
//     memory it is bounded by the statement (a batch), and the file's system
//     calls are gone: 20,000 journaled requests made 231 opens, 243 closes and
//     35,535 pwrites before, 17, 29 and 31,307 after (strace -c of
//     BenchmarkJournalRequest/sqlite/one-batch, docs/performance.md).
const (
	sqliteBusyTimeoutMs = 10000
	sqliteReaders       = 4
)

// openSQLite opens (creating if needed) the SQLite store at path and
// applies the migrations.
func openSQLite(ctx context.Context, path string) (*sqlStore, error) {
	if path == "" {
		return nil, errors.New("store: sqlite: empty path")
	}
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("store: sqlite: path %q must not contain '?' or '#'", path)
	}
	writerOpts := url.Values{}
	writerOpts.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", sqliteBusyTimeoutMs))
	writerOpts.Add("_pragma", "journal_mode(WAL)")
	writerOpts.Add("_pragma", "synchronous(NORMAL)")
	writerOpts.Add("_pragma", "temp_store(MEMORY)")
	writerOpts.Set("_txlock", "immediate")
	writer, err := sql.Open("sqlite", "file:"+path+"?"+writerOpts.Encode())
	if err != nil {
		return nil, fmt.Errorf("store: sqlite: open %s: %w", path, err)
	}
	writer.SetMaxOpenConns(1)
	writer.SetMaxIdleConns(1)
	writer.SetConnMaxLifetime(0)
	writer.SetConnMaxIdleTime(0)
	if err := writer.PingContext(ctx); err != nil {
		writer.Close()
		return nil, fmt.Errorf("store: sqlite: open %s: %w", path, err)
	}

	readerOpts := url.Values{}
	readerOpts.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", sqliteBusyTimeoutMs))
	readerOpts.Add("_pragma", "query_only(1)")
	reader, err := sql.Open("sqlite", "file:"+path+"?"+readerOpts.Encode())
	if err != nil {
		writer.Close()
		return nil, fmt.Errorf("store: sqlite: open reader %s: %w", path, err)
	}
	reader.SetMaxOpenConns(sqliteReaders)
	reader.SetMaxIdleConns(sqliteReaders)

	b := &sqliteBackend{writer: writer, readers: reader}
	if err := migrate(ctx, b, sqliteMigrations); err != nil {
		b.close()
		return nil, fmt.Errorf("store: sqlite: %s: %w", path, err)
	}
	return &sqlStore{b: b, name: "sqlite"}, nil
}

type sqliteBackend struct {
	writer  *sql.DB // exactly one connection
	readers *sql.DB

	// stmts are the journal's statements, prepared once on the writer and
	// kept: parsing a multi-row INSERT costs more than running it.
	mu    sync.Mutex
	stmts map[string]*sql.Stmt
}

// maxCachedStmts bounds stmts. The journal's statements are few (a multi-row
// INSERT per table and chunk size, an UPDATE per set of fields an update
// carries); past the bound a statement is prepared in its transaction, as
// without a cache.
const maxCachedStmts = 128

// applyBatch implements sqlBackend.
func (b *sqliteBackend) applyBatch(ctx context.Context, stmts []sqlStmt) error {
	// Statements are prepared on the writer before BEGIN: preparing on the
	// *sql.DB needs its one connection, which the transaction then holds.
	shared := make(map[string]*sql.Stmt, 8)
	for _, st := range stmts {
		if _, ok := shared[st.query]; ok {
			continue
		}
		ps, err := b.prepared(ctx, st.query)
		if err != nil {
			return err
		}
		shared[st.query] = ps
	}
	tx, err := b.writer.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	// Inside the transaction the statements run without ctx's cancellation,
	// which costs the driver a goroutine per statement to watch ctx: BEGIN
	// IMMEDIATE took the write lock, so no statement waits for another
	// process, and ctx is checked between statements instead.
	execCtx := context.WithoutCancel(ctx)
	inTx := make(map[string]*sql.Stmt, len(shared))
	for _, st := range stmts {
		if err := ctx.Err(); err != nil {
			tx.Rollback()
			return err
		}
		ts, ok := inTx[st.query]
		if !ok {
			if ps := shared[st.query]; ps != nil {
				ts = tx.StmtContext(ctx, ps) // the statement prepared on this connection
			} else if ts, err = tx.PrepareContext(ctx, st.query); err != nil {
				tx.Rollback()
				return err
			}
			inTx[st.query] = ts
		}
		if _, err := ts.ExecContext(execCtx, st.args...); err != nil {
			tx.Rollback()
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// prepared returns the writer's cached statement for query, preparing it if
// needed; nil when the cache is full.
func (b *sqliteBackend) prepared(ctx context.Context, query string) (*sql.Stmt, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ps, ok := b.stmts[query]; ok {
		return ps, nil
	}
	if len(b.stmts) >= maxCachedStmts {
		return nil, nil
	}
	ps, err := b.writer.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if b.stmts == nil {
		b.stmts = make(map[string]*sql.Stmt)
	}
	b.stmts[query] = ps
	return ps, nil
}

func (b *sqliteBackend) inTx(ctx context.Context, fn func(tx sqlQuerier) error) error {
	tx, err := b.writer.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(stdQuerier{tx}); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// inDurableTx runs fn with synchronous=FULL for this one commit, on the
// writer connection (there is only one, so no other transaction can run
// between switching the setting and switching it back).
func (b *sqliteBackend) inDurableTx(ctx context.Context, fn func(tx sqlQuerier) error) error {
	conn, err := b.writer.Conn(ctx)
	if err != nil {
		return fmt.Errorf("writer connection: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "PRAGMA synchronous = FULL"); err != nil {
		return fmt.Errorf("synchronous=FULL: %w", err)
	}
	// Back to NORMAL even when ctx is done; a failure here leaves the
	// connection slower (FULL), never less safe.
	defer conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA synchronous = NORMAL")
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(stdQuerier{tx}); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func (b *sqliteBackend) reader() sqlQuerier { return stdQuerier{b.readers} }
func (b *sqliteBackend) forUpdate() string  { return "" }
func (b *sqliteBackend) anonParams() bool   { return true }

func (b *sqliteBackend) close() error {
	b.mu.Lock()
	errs := make([]error, 0, len(b.stmts)+2)
	for _, ps := range b.stmts {
		errs = append(errs, ps.Close())
	}
	b.stmts = nil
	b.mu.Unlock()
	return errors.Join(append(errs, b.readers.Close(), b.writer.Close())...)
}

// stdQuerier adapts database/sql (a *sql.DB, *sql.Conn or *sql.Tx).
type stdQuerier struct {
	q interface {
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
		QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
		PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
	}
}

func (s stdQuerier) exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := s.q.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// execBatch prepares each distinct statement once per batch: in a journal
// batch a handful of statements repeat hundreds of times, and SQLite spends
// most of a lone Exec parsing the SQL.
func (s stdQuerier) execBatch(ctx context.Context, stmts []sqlStmt) error {
	prepared := make(map[string]*sql.Stmt)
	defer func() {
		for _, st := range prepared {
			st.Close()
		}
	}()
	for _, st := range stmts {
		ps, ok := prepared[st.query]
		if !ok {
			var err error
			if ps, err = s.q.PrepareContext(ctx, st.query); err != nil {
				return err
			}
			prepared[st.query] = ps
		}
		if _, err := ps.ExecContext(ctx, st.args...); err != nil {
			return err
		}
	}
	return nil
}

func (s stdQuerier) queryRow(ctx context.Context, query string, args ...any) rowScanner {
	return stdRow{s.q.QueryRowContext(ctx, query, args...)}
}

func (s stdQuerier) query(ctx context.Context, query string, args ...any) (sqlRows, error) {
	rows, err := s.q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return stdRows{rows}, nil
}

type stdRow struct{ r *sql.Row }

func (r stdRow) Scan(dest ...any) error {
	err := r.r.Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return errNoRows
	}
	return err
}

type stdRows struct{ *sql.Rows }

func (r stdRows) Close() { r.Rows.Close() }
