package store

import (
	"database/sql"
	"errors"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fencegate/fencegate/internal/store/pgtest"
)

// Databases created before migration 2 must open and migrate in place:
// their rows read back with no response id, and the new columns and index
// work on them.

// insertV1RequestSQL inserts a request with the columns of migration 1.
const insertV1RequestSQL = `INSERT INTO requests (id, tenant, idempotency_key, body_hash, model, stream, phase, outcome,
	owner, owner_lease_until, first_delta_sent, first_delta_at, delivered_output_tokens,
	model_revision, error, response, response_is_sse, response_status,
	created_at, updated_at, expires_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)`

// insertV1AttemptSQL inserts an attempt with the columns of migration 1.
const insertV1AttemptSQL = `INSERT INTO attempts (id, request_id, n, replica, lease_epoch, started_at, ended_at, end_reason, failure, cancel_sent, cancel_acked)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`

var mt0 = time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)

// v1Rows are the rows written at schema version 1: a keyed request with an
// attempt, and a keyless one.
func v1Rows() ([]Request, Attempt) {
	keyed := Request{
		ID: "req_old_keyed", Tenant: "t", IdempotencyKey: "k", BodyHash: HashBody([]byte("b")), Model: "m", Stream: true,
		Phase: PhaseDone, Outcome: OutcomeCompleted, Owner: "gw-a", OwnerLeaseUntil: mt0.Add(time.Minute),
		FirstDeltaSent: true, FirstDeltaAt: mt0.Add(1), DeliveredOutputTokens: 12, ModelRevision: "rev",
		Error: []byte("e"), Response: []byte("r"), ResponseIsSSE: true, ResponseStatus: 200,
		CreatedAt: mt0, UpdatedAt: mt0.Add(2), ExpiresAt: mt0.Add(time.Hour),
	}
	keyless := Request{
		ID: "req_old_plain", Tenant: "t", BodyHash: HashBody([]byte("b")), Model: "m",
		Phase: PhaseQueued, Owner: "gw-a", OwnerLeaseUntil: mt0.Add(time.Minute),
		CreatedAt: mt0, UpdatedAt: mt0, ExpiresAt: mt0.Add(time.Hour),
	}
	a := Attempt{ID: AttemptID(keyed.ID, 1), RequestID: keyed.ID, N: 1, Replica: "vllm-0", LeaseEpoch: 3, StartedAt: mt0, EndedAt: mt0.Add(3), EndReason: "done"}
	return []Request{keyed, keyless}, a
}

// writeV1 brings b to schema version 1 only and writes v1Rows.
func writeV1(t *testing.T, b sqlBackend, migrations []migration) {
	t.Helper()
	if migrations[0].version != 1 || len(migrations) < 2 || migrations[1].version != 2 {
		t.Fatalf("want migrations 1 and 2, have %d", len(migrations))
	}
	if err := migrate(t.Context(), b, migrations[:1]); err != nil {
		t.Fatalf("migrate to version 1: %v", err)
	}
	rows, a := v1Rows()
	err := b.inTx(t.Context(), func(tx sqlQuerier) error {
		for _, r := range rows {
			// The version 1 columns are the leading ones of requestArgs.
			if _, err := tx.exec(t.Context(), insertV1RequestSQL, requestArgs(&r)[:21]...); err != nil {
				return err
			}
		}
		_, err := tx.exec(t.Context(), insertV1AttemptSQL, attemptArgs(&a)[:11]...)
		return err
	})
	if err != nil {
		t.Fatalf("write version 1 rows: %v", err)
	}
}

// checkMigrated checks a store opened on a version 1 database.
func checkMigrated(t *testing.T, s *sqlStore, migrations []migration) {
	t.Helper()
	ctx := t.Context()
	var version int64
	if err := s.b.reader().queryRow(ctx, "SELECT MAX(version) FROM schema_migrations").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if last := migrations[len(migrations)-1].version; version != last {
		t.Errorf("schema version %d after open, want %d", version, last)
	}

	rows, a := v1Rows()
	for _, want := range rows {
		got, err := s.Get(ctx, want.ID)
		if err != nil {
			t.Fatalf("Get(%s) after migrating: %v", want.ID, err)
		}
		if want.IdempotencyKey != "" {
			want.Attempts = []Attempt{a}
		}
		if !reflect.DeepEqual(got, &want) {
			t.Errorf("%s after migrating:\n got %+v\nwant %+v", want.ID, got, &want)
		}
	}
	if _, err := s.FindByResponseID(ctx, ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("FindByResponseID(\"\") on migrated rows = %v, want ErrNotFound", err)
	}

	err := s.Apply(ctx, []Mutation{
		UpdateRequest{ID: "req_old_keyed", ResponseID: "resp_old", ResponseReplica: "vllm-0"},
		UpdateRequest{ID: "req_old_plain", ResponseID: "resp_plain", ResponseReplica: "vllm-1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	// An attempt written before its table had a revision column takes one like any other.
	rev := a
	rev.ModelRevision = "rev-after"
	if err := s.Apply(ctx, []Mutation{UpsertAttempt{Attempt: rev}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.FindByResponseID(ctx, "resp_old")
	if err != nil || got.ID != "req_old_keyed" || got.ResponseReplica != "vllm-0" || len(got.Attempts) != 1 {
		t.Fatalf("FindByResponseID(resp_old) after migrating = %+v, %v; want req_old_keyed on vllm-0 with its attempt", got, err)
	}
	if got.Attempts[0].ModelRevision != "rev-after" {
		t.Errorf("migrated attempt's revision %q, want rev-after", got.Attempts[0].ModelRevision)
	}
	if got, err := s.FindByResponseID(ctx, "resp_plain"); err != nil || got.ID != "req_old_plain" {
		t.Errorf("FindByResponseID(resp_plain) = %+v, %v; want req_old_plain", got, err)
	}
}

func TestSQLiteMigratesVersion1Database(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v1.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	writeV1(t, &sqliteBackend{writer: db, readers: db}, sqliteMigrations)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := openSQLite(t.Context(), path)
	if err != nil {
		t.Fatalf("open a version 1 database: %v", err)
	}
	defer s.Close()
	checkMigrated(t, s, sqliteMigrations)
	assertSQLiteFindUsesIndex(t, s)
}

func TestPostgresMigratesVersion1Database(t *testing.T) {
	dsn := pgtest.Schema(t)
	pool, err := pgxpool.New(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	writeV1(t, &pgBackend{pool: pool}, postgresMigrations)
	pool.Close()

	s, err := openPostgres(t.Context(), dsn)
	if err != nil {
		t.Fatalf("open a version 1 database: %v", err)
	}
	defer s.Close()
	checkMigrated(t, s, postgresMigrations)
	assertPostgresFindUsesIndex(t, s)
}

// assertSQLiteFindUsesIndex checks FindByResponseID's query searches the
// partial index rather than scanning requests. The id is a bound parameter,
// as in the store.
func assertSQLiteFindUsesIndex(t *testing.T, s *sqlStore) {
	t.Helper()
	rows, err := s.b.reader().query(t.Context(), "EXPLAIN QUERY PLAN "+selectRequestByResponseIDSQL, "resp_x")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var (
			id, parent, unused int64
			detail             string
		)
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if p := strings.Join(plan, "; "); !strings.Contains(p, "USING INDEX requests_response_id") {
		t.Errorf("FindByResponseID plan = %q, want a search of requests_response_id", p)
	}
}

// assertPostgresFindUsesIndex checks the generic plan (the one a prepared
// statement with the id as a parameter gets) can use the partial index.
// Sequential scans are switched off because on a table this small the
// planner would rightly prefer one; if the index could not serve the
// query, the plan would still show a (disabled) sequential scan.
func assertPostgresFindUsesIndex(t *testing.T, s *sqlStore) {
	t.Helper()
	ctx := t.Context()
	pooled, err := s.b.(*pgBackend).pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The settings and the prepared statement would stay on a pooled
	// connection: take it out of the pool and close it afterwards.
	conn := pooled.Hijack()
	defer conn.Close(ctx)
	for _, q := range []string{
		"SET plan_cache_mode = force_generic_plan",
		"SET enable_seqscan = off",
		"PREPARE find_response(text) AS " + selectRequestByResponseIDSQL,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	rows, err := conn.Query(ctx, "EXPLAIN EXECUTE find_response('resp_x')")
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if p := strings.Join(plan, "\n"); !strings.Contains(p, "requests_response_id") {
		t.Errorf("FindByResponseID generic plan does not use requests_response_id:\n%s", p)
	}
}

// Keys created before migration 5 had no trace mode and, before migration 7, no admin
// flag: they read back with none (the gateway's) and as tenant keys, and keys created
// after them keep theirs.

// insertV4KeySQL inserts a key with the columns of migration 3.
const insertV4KeySQL = `INSERT INTO api_keys (id, key_sha256, models, max_concurrent, rpm, tpm, created_at, revoked_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`

// writeV4Key brings b to schema version 4 and writes a key.
func writeV4Key(t *testing.T, b sqlBackend, migrations []migration) {
	t.Helper()
	i := slices.IndexFunc(migrations, func(m migration) bool { return m.version == 5 })
	if i < 0 {
		t.Fatal("no migration 5")
	}
	if err := migrate(t.Context(), b, migrations[:i]); err != nil {
		t.Fatalf("migrate to version 4: %v", err)
	}
	err := b.inTx(t.Context(), func(tx sqlQuerier) error {
		_, err := tx.exec(t.Context(), insertV4KeySQL, "old", strings.Repeat("a", 64), `["m"]`, 2, 0, 0, toNanos(mt0), 0)
		return err
	})
	if err != nil {
		t.Fatalf("write a version 4 key: %v", err)
	}
}

func checkKeysMigrated(t *testing.T, s *sqlStore) {
	t.Helper()
	newer := APIKey{ID: "new", KeySHA256: strings.Repeat("b", 64), Traces: "all", Admin: true, CreatedAt: mt0}
	if err := s.CreateKey(t.Context(), newer); err != nil {
		t.Fatal(err)
	}
	keys, err := s.ListKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := []APIKey{newer, {ID: "old", KeySHA256: strings.Repeat("a", 64), Models: []string{"m"}, MaxConcurrent: 2, CreatedAt: mt0}}
	if len(keys) != 2 {
		t.Fatalf("keys after migrating = %+v, want %+v", keys, want)
	}
	for i := range keys {
		if keys[i].ID != want[i].ID || keys[i].Traces != want[i].Traces || keys[i].Admin != want[i].Admin || !slices.Equal(keys[i].Models, want[i].Models) ||
			keys[i].MaxConcurrent != want[i].MaxConcurrent || !keys[i].CreatedAt.Equal(want[i].CreatedAt) {
			t.Errorf("key %d after migrating = %+v, want %+v", i, keys[i], want[i])
		}
	}
}

func TestSQLiteMigratesKeysWithoutTraces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v4.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	writeV4Key(t, &sqliteBackend{writer: db, readers: db}, sqliteMigrations)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := openSQLite(t.Context(), path)
	if err != nil {
		t.Fatalf("open a version 4 database: %v", err)
	}
	defer s.Close()
	checkKeysMigrated(t, s)
}

func TestPostgresMigratesKeysWithoutTraces(t *testing.T) {
	dsn := pgtest.Schema(t)
	pool, err := pgxpool.New(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	writeV4Key(t, &pgBackend{pool: pool}, postgresMigrations)
	pool.Close()
	s, err := openPostgres(t.Context(), dsn)
	if err != nil {
		t.Fatalf("open a version 4 database: %v", err)
	}
	defer s.Close()
	checkKeysMigrated(t, s)
}
