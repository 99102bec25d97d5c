package store

import (
	"strconv"
	"strings"
)

// SQL shared by SQLite and PostgreSQL. Parameters in expressions whose type
// PostgreSQL could not infer are compared with a column, never with a bare
// literal, so the same text prepares in both.

const requestColumns = `id, tenant, idempotency_key, body_hash, model, stream, phase, outcome,
	owner, owner_lease_until, first_delta_sent, first_delta_at, delivered_output_tokens,
	model_revision, error, response, response_is_sse, response_status,
	created_at, updated_at, expires_at, response_id, response_replica, queued_ms`

// selectRequestColumns reads the key back as "" for rows stored without one
// (NULL, so that keyless rows never collide in the unique index).
const selectRequestColumns = `id, tenant, COALESCE(idempotency_key, ''), body_hash, model, stream, phase, outcome,
	owner, owner_lease_until, first_delta_sent, first_delta_at, delivered_output_tokens,
	model_revision, error, response, response_is_sse, response_status,
	created_at, updated_at, expires_at, response_id, response_replica, queued_ms`

const requestValues = `$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24`

const (
	// insertRequestSQL fails on a duplicate id; used by keyless Claims.
	insertRequestSQL = `INSERT INTO requests (` + requestColumns + `) VALUES (` + requestValues + `)`

	// insertKeyedRequestSQL inserts unless the (tenant, key) pair exists:
	// the first half of Claim's decision, one conditional statement.
	insertKeyedRequestSQL = insertRequestSQL + ` ON CONFLICT (tenant, idempotency_key) DO NOTHING`

	// createRequestSQL is the idempotent insert of CreateRequest.
	createRequestSQL = insertRequestSQL + ` ON CONFLICT DO NOTHING`

	selectRequestByIDSQL  = `SELECT ` + selectRequestColumns + ` FROM requests WHERE id = $1`
	selectRequestByKeySQL = `SELECT ` + selectRequestColumns + ` FROM requests WHERE tenant = $1 AND idempotency_key = $2`

	// selectRequestByResponseIDSQL repeats the partial index's predicate
	// (response_id <> '') word for word: with the id a parameter, neither
	// planner could otherwise prove that the query only wants indexed rows,
	// and would scan the table instead.
	selectRequestByResponseIDSQL = `SELECT ` + selectRequestColumns + ` FROM requests
	WHERE response_id = $1 AND response_id <> ''
	ORDER BY created_at DESC, id DESC LIMIT 1`

	// takeoverSQL moves ownership by compare-and-set on the previous owner
	// and lease: of two gateways taking over the same row, the second
	// matches no row.
	takeoverSQL = `UPDATE requests SET owner = $2, owner_lease_until = $3, updated_at = $4
	WHERE id = $1 AND owner = $5 AND owner_lease_until = $6 AND outcome = '' AND first_delta_sent = FALSE`

	// markInterruptedSQL records the interruption of a request whose owner
	// died after crossing the boundary.
	markInterruptedSQL = `UPDATE requests SET outcome = 'interrupted', phase = 'done', updated_at = $2
	WHERE id = $1 AND outcome = '' AND first_delta_sent = TRUE AND owner_lease_until <= $2`

	markFirstDeltaSQL = `UPDATE requests SET first_delta_sent = TRUE,
	first_delta_at = CASE WHEN first_delta_sent THEN first_delta_at ELSE $3 END,
	phase = CASE WHEN phase IN ('queued', 'routing') THEN 'streaming' ELSE phase END,
	updated_at = CASE WHEN updated_at < $3 THEN $3 ELSE updated_at END
	WHERE id = $1 AND owner = $2 AND owner_lease_until > $3`

	selectOwnerSQL = `SELECT owner FROM requests WHERE id = $1`

	renewOwnerSQL = `UPDATE requests
	SET owner_lease_until = CASE WHEN owner_lease_until < $2 THEN $2 ELSE owner_lease_until END
	WHERE owner = $1 AND outcome = ''`

	attemptColumns = `id, request_id, n, replica, lease_epoch, started_at, ended_at, end_reason, failure, cancel_sent, cancel_acked, model_revision, engine_may_have_acted`

	upsertAttemptSQL = `INSERT INTO attempts (` + attemptColumns + `) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)` + upsertAttemptConflict

	// upsertAttemptConflict is the merge rule of UpsertAttempt (mergeAttempt).
	upsertAttemptConflict = `
	ON CONFLICT (id) DO UPDATE SET
		replica = CASE WHEN excluded.replica <> '' THEN excluded.replica ELSE attempts.replica END,
		lease_epoch = CASE WHEN excluded.lease_epoch > attempts.lease_epoch THEN excluded.lease_epoch ELSE attempts.lease_epoch END,
		started_at = CASE WHEN excluded.started_at <> 0 THEN excluded.started_at ELSE attempts.started_at END,
		ended_at = CASE WHEN excluded.ended_at <> 0 THEN excluded.ended_at ELSE attempts.ended_at END,
		end_reason = CASE WHEN excluded.end_reason <> '' THEN excluded.end_reason ELSE attempts.end_reason END,
		failure = CASE WHEN excluded.failure <> '' THEN excluded.failure ELSE attempts.failure END,
		cancel_sent = attempts.cancel_sent OR excluded.cancel_sent,
		cancel_acked = attempts.cancel_acked OR excluded.cancel_acked,
		model_revision = CASE WHEN excluded.model_revision <> '' THEN excluded.model_revision ELSE attempts.model_revision END,
		engine_may_have_acted = attempts.engine_may_have_acted OR excluded.engine_may_have_acted`

	selectAttemptsSQL = `SELECT ` + attemptColumns + ` FROM attempts WHERE request_id = $1 ORDER BY n, id`

	addTraceSQL = `INSERT INTO trace_events (request_id, seq, at, kind, payload) VALUES ($1, $2, $3, $4, $5)
	ON CONFLICT (request_id, seq) DO NOTHING`

	selectTracesSQL = `SELECT request_id, seq, at, kind, payload FROM trace_events WHERE request_id = $1 ORDER BY seq`

	deleteAttemptsOfSQL = `DELETE FROM attempts WHERE request_id = $1`
	deleteTracesOfSQL   = `DELETE FROM trace_events WHERE request_id = $1`
	deleteRequestSQL    = `DELETE FROM requests WHERE id = $1`

	expiredIDs          = `SELECT id FROM requests WHERE expires_at <> 0 AND expires_at <= $1`
	sweepAttemptsSQL    = `DELETE FROM attempts WHERE request_id IN (` + expiredIDs + `)`
	sweepTracesSQL      = `DELETE FROM trace_events WHERE request_id IN (` + expiredIDs + `)`
	sweepRequestsSQL    = `DELETE FROM requests WHERE expires_at <> 0 AND expires_at <= $1`
	updateResponseSQL   = `UPDATE requests SET response = $2, response_is_sse = $3, response_status = $4 WHERE id = $1 AND idempotency_key IS NOT NULL`
	updateResponseOwned = updateResponseSQL + ` AND owner = $5`
)

// requestColumnCount and attemptColumnCount are the numbers of
// requestColumns and attemptColumns.
const (
	requestColumnCount = 24
	attemptColumnCount = 13
)

// requestArgs are the values of requestColumns, in order.
func requestArgs(r *Request) []any {
	return appendRequestArgs(make([]any, 0, requestColumnCount), r)
}

// appendRequestArgs appends the values of requestColumns, in order.
func appendRequestArgs(args []any, r *Request) []any {
	var key any // NULL when absent
	if r.IdempotencyKey != "" {
		key = r.IdempotencyKey
	}
	return append(args,
		r.ID, r.Tenant, key, r.BodyHash, r.Model, r.Stream, string(r.Phase), string(r.Outcome),
		r.Owner, toNanos(r.OwnerLeaseUntil), r.FirstDeltaSent, toNanos(r.FirstDeltaAt), r.DeliveredOutputTokens,
		r.ModelRevision, r.Error, r.Response, r.ResponseIsSSE, int64(r.ResponseStatus),
		toNanos(r.CreatedAt), toNanos(r.UpdatedAt), toNanos(r.ExpiresAt), r.ResponseID, r.ResponseReplica, r.QueuedMs,
	)
}

func scanRequest(row rowScanner) (*Request, error) {
	var (
		r                                Request
		phase, outcome                   string
		lease, firstAt, created, updated int64
		expires, status                  int64
	)
	err := row.Scan(&r.ID, &r.Tenant, &r.IdempotencyKey, &r.BodyHash, &r.Model, &r.Stream, &phase, &outcome,
		&r.Owner, &lease, &r.FirstDeltaSent, &firstAt, &r.DeliveredOutputTokens,
		&r.ModelRevision, &r.Error, &r.Response, &r.ResponseIsSSE, &status,
		&created, &updated, &expires, &r.ResponseID, &r.ResponseReplica, &r.QueuedMs)
	if err != nil {
		return nil, err
	}
	r.Phase, r.Outcome = Phase(phase), Outcome(outcome)
	r.OwnerLeaseUntil, r.FirstDeltaAt = fromNanos(lease), fromNanos(firstAt)
	r.CreatedAt, r.UpdatedAt, r.ExpiresAt = fromNanos(created), fromNanos(updated), fromNanos(expires)
	r.ResponseStatus = int(status)
	return &r, nil
}

func attemptArgs(a *Attempt) []any {
	return appendAttemptArgs(make([]any, 0, attemptColumnCount), a)
}

// appendAttemptArgs appends the values of attemptColumns, in order.
func appendAttemptArgs(args []any, a *Attempt) []any {
	return append(args,
		a.ID, a.RequestID, int64(a.N), a.Replica, int64(a.LeaseEpoch),
		toNanos(a.StartedAt), toNanos(a.EndedAt), a.EndReason, a.Failure, a.CancelSent, a.CancelAcked, a.ModelRevision,
		a.EngineMayHaveActed,
	)
}

func scanAttempt(row rowScanner) (Attempt, error) {
	var (
		a                    Attempt
		n, epoch, start, end int64
	)
	if err := row.Scan(&a.ID, &a.RequestID, &n, &a.Replica, &epoch, &start, &end, &a.EndReason, &a.Failure, &a.CancelSent, &a.CancelAcked, &a.ModelRevision,
		&a.EngineMayHaveActed); err != nil {
		return Attempt{}, err
	}
	a.N, a.LeaseEpoch = int(n), uint64(epoch)
	a.StartedAt, a.EndedAt = fromNanos(start), fromNanos(end)
	return a, nil
}

// updateStmts turns an UpdateRequest into statements that set only the
// fields it carries, with the merge rules documented on UpdateRequest (the
// Go model is applyUpdate). Building the SET list from the fields present
// keeps every parameter next to a column, which is how PostgreSQL infers
// its type.
func updateStmts(u *UpdateRequest) []sqlStmt {
	var (
		b    strings.Builder
		args = []any{u.ID}
		sets int
	)
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	set := func(clause string) {
		if sets > 0 {
			b.WriteString(", ")
		}
		b.WriteString(clause)
		sets++
	}
	b.WriteString("UPDATE requests SET ")
	if !u.At.IsZero() {
		p := arg(toNanos(u.At))
		set("updated_at = CASE WHEN updated_at < " + p + " THEN " + p + " ELSE updated_at END")
	}
	if u.Phase != "" {
		set("phase = " + arg(string(u.Phase)))
	}
	if u.Outcome != OutcomeRunning {
		set("outcome = COALESCE(NULLIF(outcome, ''), " + arg(string(u.Outcome)) + ")")
	}
	if u.FirstDeltaSent {
		set("first_delta_sent = TRUE")
	}
	if !u.FirstDeltaAt.IsZero() {
		p := arg(toNanos(u.FirstDeltaAt))
		set("first_delta_at = CASE WHEN first_delta_at = 0 THEN " + p + " ELSE first_delta_at END")
	}
	if u.DeliveredOutputTokens > 0 {
		p := arg(u.DeliveredOutputTokens)
		set("delivered_output_tokens = CASE WHEN delivered_output_tokens < " + p + " THEN " + p + " ELSE delivered_output_tokens END")
	}
	if u.QueuedMs > 0 {
		p := arg(u.QueuedMs)
		set("queued_ms = CASE WHEN queued_ms < " + p + " THEN " + p + " ELSE queued_ms END")
	}
	if u.ModelRevision != "" {
		set("model_revision = " + arg(u.ModelRevision))
	}
	if u.Error != nil {
		set("error = " + arg(u.Error))
	}
	if u.ResponseID != "" {
		// Both columns in one SET, so the pair never comes from two updates.
		set("response_id = " + arg(u.ResponseID))
		set("response_replica = " + arg(u.ResponseReplica))
	}
	var stmts []sqlStmt
	if sets > 0 {
		b.WriteString(" WHERE id = $1")
		if u.Owner != "" {
			b.WriteString(" AND owner = " + arg(u.Owner))
		}
		stmts = append(stmts, sqlStmt{b.String(), args})
	}
	if u.Response != nil {
		stmts = append(stmts, updateResponseStmt(u))
	}
	return stmts
}

// updateResponseStmt is the statement of an update's Response. It is a
// separate statement, so the "keyed requests only" rule is a WHERE
// condition rather than a CASE mixing NULL and a parameter.
func updateResponseStmt(u *UpdateRequest) sqlStmt {
	if u.Owner != "" {
		return sqlStmt{updateResponseOwned, []any{u.ID, u.Response, u.ResponseIsSSE, int64(u.ResponseStatus), u.Owner}}
	}
	return sqlStmt{updateResponseSQL, []any{u.ID, u.Response, u.ResponseIsSSE, int64(u.ResponseStatus)}}
}

// updateSetsFields reports whether u changes more than the stored response,
// that is whether updateStmts has a statement other than updateResponseStmt.
func updateSetsFields(u *UpdateRequest) bool {
	return !u.At.IsZero() || u.Phase != "" || u.Outcome != OutcomeRunning || u.FirstDeltaSent || !u.FirstDeltaAt.IsZero() ||
		u.DeliveredOutputTokens > 0 || u.QueuedMs > 0 || u.ModelRevision != "" || u.Error != nil || u.ResponseID != ""
}

// updateRowsUpdate applies many UpdateRequests (without their Response) in
// one statement, in SQLite only: UPDATE … FROM a VALUES list with a row per
// update, each field NULL (or the flag 0) where the update leaves it as it
// is, so that every update has the same shape. It has the effect of
// updateStmts for each row, provided no two rows name the same request (the
// batch planner ensures that). SQLite names the VALUES columns column1,
// column2, …, in the order of appendUpdateRowArgs. PostgreSQL would need
// every parameter cast to its type, and keeps one statement per update,
// pipelined.
var updateRowsUpdate = &multiRowInsert{
	head: `UPDATE requests SET
	updated_at = CASE WHEN v.column3 > requests.updated_at THEN v.column3 ELSE requests.updated_at END,
	phase = COALESCE(v.column4, requests.phase),
	outcome = CASE WHEN requests.outcome = '' AND v.column5 IS NOT NULL THEN v.column5 ELSE requests.outcome END,
	first_delta_sent = CASE WHEN v.column6 THEN TRUE ELSE requests.first_delta_sent END,
	delivered_output_tokens = CASE WHEN v.column7 > requests.delivered_output_tokens THEN v.column7 ELSE requests.delivered_output_tokens END,
	model_revision = COALESCE(v.column8, requests.model_revision),
	error = CASE WHEN v.column9 THEN v.column10 ELSE requests.error END,
	response_id = COALESCE(v.column11, requests.response_id),
	response_replica = CASE WHEN v.column11 IS NOT NULL THEN v.column12 ELSE requests.response_replica END,
	queued_ms = CASE WHEN v.column13 > requests.queued_ms THEN v.column13 ELSE requests.queued_ms END,
	first_delta_at = CASE WHEN requests.first_delta_at = 0 AND v.column14 IS NOT NULL THEN v.column14 ELSE requests.first_delta_at END
	FROM (VALUES `,
	tail: `) AS v
	WHERE requests.id = v.column1 AND (v.column2 IS NULL OR requests.owner = v.column2)`,
	cols: updateRowColumnCount,
}

const updateRowColumnCount = 14

// appendUpdateRowArgs appends the VALUES row of u for updateRowsUpdate.
func appendUpdateRowArgs(args []any, u *UpdateRequest) []any {
	null := func(v any, present bool) any {
		if present {
			return v
		}
		return nil
	}
	return append(args,
		u.ID,
		null(u.Owner, u.Owner != ""),
		null(toNanos(u.At), !u.At.IsZero()),
		null(string(u.Phase), u.Phase != ""),
		null(string(u.Outcome), u.Outcome != OutcomeRunning),
		u.FirstDeltaSent,
		null(u.DeliveredOutputTokens, u.DeliveredOutputTokens > 0),
		null(u.ModelRevision, u.ModelRevision != ""),
		u.Error != nil,
		u.Error,
		null(u.ResponseID, u.ResponseID != ""),
		u.ResponseReplica,
		null(u.QueuedMs, u.QueuedMs > 0),
		null(toNanos(u.FirstDeltaAt), !u.FirstDeltaAt.IsZero()),
	)
}

// mutationStmts appends the statements of one mutation.
func mutationStmts(stmts []sqlStmt, m Mutation) []sqlStmt {
	switch m := m.(type) {
	case CreateRequest:
		r := m.Request
		r.normalize()
		return append(stmts, sqlStmt{createRequestSQL, requestArgs(&r)})
	case UpdateRequest:
		return append(stmts, updateStmts(&m)...)
	case UpsertAttempt:
		return append(stmts, sqlStmt{upsertAttemptSQL, attemptArgs(&m.Attempt)})
	case AddTrace:
		e := &m.Event
		return append(stmts, sqlStmt{addTraceSQL, []any{e.RequestID, e.Seq, toNanos(e.At), e.Kind, e.Payload}})
	}
	return stmts
}

// A request that ran more than one attempt was rerun; recentSQL selects those and the ones
// that ended other than completed, newest first (Store.Recent; RecentQuery.matches is the
// same rule for the memory store). The index on created_at serves the order and bounds.
const (
	rerunExists = `EXISTS (SELECT 1 FROM attempts WHERE attempts.request_id = requests.id AND attempts.n > 1)`
	recentSQL   = `SELECT ` + selectRequestColumns + ` FROM requests
	WHERE created_at >= $1 AND created_at < $2 AND ($3 = '' OR model = $3) AND ($4 = '' OR tenant = $4)
	AND (outcome NOT IN ('', 'completed') OR ` + rerunExists + `)
	AND ($5 = '' OR outcome = $5 OR ($5 = 'rerun' AND ` + rerunExists + `))
	ORDER BY created_at DESC, id DESC LIMIT $6`
)
