package store

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fencegate/fencegate/internal/store/pgtest"
)

// Every statement that changes one request by its id must find it by the primary key,
// whatever the planner knows of the table. On a new, empty table PostgreSQL plans with no
// statistics, and a generic plan (the one a long-lived connection's prepared statement
// keeps) once chose the owner index for "WHERE id = $1 AND owner = $2": one gateway owns
// every request it journals, so each update walked all of that gateway's rows, slower with
// every request (migration 0006). The plans are read on an empty table, with generic plans
// forced.
func TestPostgresUpdatesByIDUseThePrimaryKey(t *testing.T) {
	dsn := pgtest.Schema(t)
	s, err := Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	if _, err := conn.Exec(t.Context(), "SET plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1, 0)
	// The statements of every request (the journal's updates, a keyed request's boundary
	// and stored answer) must take the primary key.
	hot := map[string]string{
		"update":           updateStmts(&UpdateRequest{ID: "r", Owner: "gw", At: now, Phase: PhaseDone, Outcome: OutcomeCompleted, FirstDeltaSent: true, DeliveredOutputTokens: 3, ModelRevision: "v"})[0].query,
		"mark first delta": markFirstDeltaSQL,
		"store response":   updateResponseOwned,
	}
	for name, sql := range hot {
		if plan := genericPlan(t, conn, sql); !strings.Contains(plan, "requests_pkey") {
			t.Errorf("%s: the plan does not find the request by its primary key:\n%s\n%s", name, sql, plan)
		}
	}
	// The takeover of a dead gateway's requests may also take the index of running requests,
	// which holds the requests in flight, not the journal.
	rare := map[string]string{"takeover": takeoverSQL, "mark interrupted": markInterruptedSQL}
	for name, sql := range rare {
		if plan := genericPlan(t, conn, sql); !strings.Contains(plan, "requests_pkey") && !strings.Contains(plan, "requests_owner_running") {
			t.Errorf("%s: the plan takes neither the primary key nor the index of running requests:\n%s\n%s", name, sql, plan)
		}
	}
}

var paramRef = regexp.MustCompile(`\$(\d+)`)

// genericPlan returns PostgreSQL's generic plan of sql, prepared on conn.
func genericPlan(t *testing.T, conn *pgx.Conn, sql string) string {
	t.Helper()
	params := 0
	for _, m := range paramRef.FindAllStringSubmatch(sql, -1) {
		n, _ := strconv.Atoi(m[1])
		params = max(params, n)
	}
	name := fmt.Sprintf("plan_probe_%d", time.Now().UnixNano())
	if _, err := conn.Exec(t.Context(), "PREPARE "+name+" AS "+sql); err != nil {
		t.Fatalf("prepare %s: %v", sql, err)
	}
	// NULL stands for any value: a generic plan does not look at them.
	args := strings.TrimSuffix(strings.Repeat("NULL, ", params), ", ")
	rows, err := conn.Query(t.Context(), "EXPLAIN EXECUTE "+name+"("+args+")")
	if err != nil {
		t.Fatalf("explain %s: %v", sql, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("explain %s: %v", sql, err)
	}
	return strings.Join(lines, "\n")
}
