package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// sqlStore implements Store on a sqlBackend; the logic is the same for
// SQLite and PostgreSQL, only transactions and connections differ.
type sqlStore struct {
	b    sqlBackend
	name string // "sqlite" or "postgres", for error messages
}

var _ Store = (*sqlStore)(nil)

// maxClaimRounds bounds the insert-or-judge loop of Claim. A round is
// repeated only when another gateway changed the row between two
// statements (deleted an expired row, won a takeover), which can happen a
// few times at most before the row settles.
const maxClaimRounds = 8

// Claim implements Store. Inside one transaction:
//
//  1. INSERT … ON CONFLICT (tenant, idempotency_key) DO NOTHING. One row
//     inserted: ClaimNew. (In PostgreSQL a concurrent insert of the same key
//     waits here until the other transaction ends.)
//  2. Otherwise SELECT the existing row (FOR UPDATE in PostgreSQL) and judge
//     it (judgeClaim).
//  3. Takeover and interruption are conditional UPDATEs on the state just
//     judged; if one matches no row, someone else changed it: go to 1.
func (s *sqlStore) Claim(ctx context.Context, c Claim) (ClaimResult, error) {
	row, err := c.prepare()
	if err != nil {
		return ClaimResult{}, err
	}
	var res ClaimResult
	err = s.b.inTx(ctx, func(tx sqlQuerier) error {
		res = ClaimResult{}
		if row.IdempotencyKey == "" {
			if _, err := tx.exec(ctx, insertRequestSQL, requestArgs(&row)...); err != nil {
				return fmt.Errorf("insert request: %w", err)
			}
			res = ClaimResult{Status: ClaimNew, Request: row.clone()}
			return nil
		}
		for range maxClaimRounds {
			done, err := s.claimRound(ctx, tx, &row, c.Now, &res)
			if err != nil || done {
				return err
			}
		}
		return fmt.Errorf("no stable decision after %d rounds", maxClaimRounds)
	})
	if err != nil {
		return ClaimResult{}, fmt.Errorf("store: %s: claim %s: %w", s.name, row.ID, err)
	}
	return res, nil
}

// claimRound is one pass of the Claim loop; done is false when the row
// changed under it and the pass must be repeated.
func (s *sqlStore) claimRound(ctx context.Context, tx sqlQuerier, row *Request, now time.Time, res *ClaimResult) (done bool, err error) {
	n, err := tx.exec(ctx, insertKeyedRequestSQL, requestArgs(row)...)
	if err != nil {
		return false, fmt.Errorf("insert keyed request: %w", err)
	}
	if n == 1 {
		*res = ClaimResult{Status: ClaimNew, Request: row.clone()}
		return true, nil
	}
	existing, err := scanRequest(tx.queryRow(ctx, selectRequestByKeySQL+s.b.forUpdate(), row.Tenant, row.IdempotencyKey))
	if errors.Is(err, errNoRows) {
		return false, nil // deleted after our insert found it: insert again
	}
	if err != nil {
		return false, fmt.Errorf("select by key: %w", err)
	}
	nowNs := toNanos(now)
	v := judgeClaim(existing, row.BodyHash, now)
	switch v {
	case verdictExpired:
		for _, q := range []string{deleteAttemptsOfSQL, deleteTracesOfSQL, deleteRequestSQL} {
			if _, err := tx.exec(ctx, q, existing.ID); err != nil {
				return false, fmt.Errorf("delete expired %s: %w", existing.ID, err)
			}
		}
		return false, nil
	case verdictMarkInterrupted:
		n, err := tx.exec(ctx, markInterruptedSQL, existing.ID, nowNs)
		if err != nil {
			return false, fmt.Errorf("mark interrupted: %w", err)
		}
		if n == 0 {
			return false, nil
		}
		existing.Outcome, existing.Phase, existing.UpdatedAt = OutcomeInterrupted, PhaseDone, fromNanos(nowNs)
	case verdictTakeover:
		n, err := tx.exec(ctx, takeoverSQL, existing.ID, row.Owner, toNanos(row.OwnerLeaseUntil), nowNs,
			existing.Owner, toNanos(existing.OwnerLeaseUntil))
		if err != nil {
			return false, fmt.Errorf("take over: %w", err)
		}
		if n == 0 {
			return false, nil
		}
		existing.Owner, existing.OwnerLeaseUntil, existing.UpdatedAt = row.Owner, row.OwnerLeaseUntil, fromNanos(nowNs)
	}
	if existing.Attempts, err = loadAttempts(ctx, tx, existing.ID); err != nil {
		return false, err
	}
	*res = ClaimResult{Status: v.status(), Request: existing}
	return true, nil
}

func loadAttempts(ctx context.Context, q sqlQuerier, requestID string) ([]Attempt, error) {
	rows, err := q.query(ctx, selectAttemptsSQL, requestID)
	if err != nil {
		return nil, fmt.Errorf("select attempts of %s: %w", requestID, err)
	}
	defer rows.Close()
	var out []Attempt
	for rows.Next() {
		a, err := scanAttempt(rows)
		if err != nil {
			return nil, fmt.Errorf("scan attempt of %s: %w", requestID, err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read attempts of %s: %w", requestID, err)
	}
	return out, nil
}

// Apply implements Store.
func (s *sqlStore) Apply(ctx context.Context, muts []Mutation) error {
	if len(muts) == 0 {
		return nil
	}
	for i, m := range muts {
		if err := ValidateMutation(m); err != nil {
			return fmt.Errorf("store: %s: apply: mutation %d: %w", s.name, i, err)
		}
	}
	plan := planBatch(muts, s.b.anonParams())
	err := s.b.applyBatch(ctx, plan.stmts)
	plan.release()
	if err != nil {
		return fmt.Errorf("store: %s: apply %d mutations: %w", s.name, len(muts), err)
	}
	return nil
}

// MarkFirstDelta implements Store.
func (s *sqlStore) MarkFirstDelta(ctx context.Context, requestID, owner string, at time.Time) error {
	err := s.b.inDurableTx(ctx, func(tx sqlQuerier) error {
		n, err := tx.exec(ctx, markFirstDeltaSQL, requestID, owner, toNanos(at))
		if err != nil || n == 1 {
			return err
		}
		var current string
		switch err := tx.queryRow(ctx, selectOwnerSQL, requestID).Scan(&current); {
		case errors.Is(err, errNoRows):
			return ErrNotFound
		case err != nil:
			return err
		}
		return ErrNotOwner
	})
	if err != nil {
		return fmt.Errorf("store: %s: mark first delta %s for %s: %w", s.name, requestID, owner, err)
	}
	return nil
}

// RenewOwner implements Store.
func (s *sqlStore) RenewOwner(ctx context.Context, owner string, until time.Time) (int64, error) {
	var n int64
	err := s.b.inTx(ctx, func(tx sqlQuerier) error {
		var err error
		n, err = tx.exec(ctx, renewOwnerSQL, owner, toNanos(until))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: %s: renew owner %s: %w", s.name, owner, err)
	}
	return n, nil
}

// Get implements Store.
func (s *sqlStore) Get(ctx context.Context, requestID string) (*Request, error) {
	q := s.b.reader()
	r, err := scanRequest(q.queryRow(ctx, selectRequestByIDSQL, requestID))
	if errors.Is(err, errNoRows) {
		return nil, fmt.Errorf("store: %s: get %s: %w", s.name, requestID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: %s: get %s: %w", s.name, requestID, err)
	}
	if r.Attempts, err = loadAttempts(ctx, q, requestID); err != nil {
		return nil, fmt.Errorf("store: %s: get %s: %w", s.name, requestID, err)
	}
	return r, nil
}

// FindByResponseID implements Store.
func (s *sqlStore) FindByResponseID(ctx context.Context, responseID string) (*Request, error) {
	q := s.b.reader()
	r, err := scanRequest(q.queryRow(ctx, selectRequestByResponseIDSQL, responseID))
	if errors.Is(err, errNoRows) {
		return nil, fmt.Errorf("store: %s: find response %s: %w", s.name, responseID, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: %s: find response %s: %w", s.name, responseID, err)
	}
	if r.Attempts, err = loadAttempts(ctx, q, r.ID); err != nil {
		return nil, fmt.Errorf("store: %s: find response %s: %w", s.name, responseID, err)
	}
	return r, nil
}

// Traces implements Store.
func (s *sqlStore) Traces(ctx context.Context, requestID string) ([]TraceEvent, error) {
	rows, err := s.b.reader().query(ctx, selectTracesSQL, requestID)
	if err != nil {
		return nil, fmt.Errorf("store: %s: traces of %s: %w", s.name, requestID, err)
	}
	defer rows.Close()
	var out []TraceEvent
	for rows.Next() {
		var (
			e  TraceEvent
			at int64
		)
		if err := rows.Scan(&e.RequestID, &e.Seq, &at, &e.Kind, &e.Payload); err != nil {
			return nil, fmt.Errorf("store: %s: scan trace of %s: %w", s.name, requestID, err)
		}
		e.At = fromNanos(at)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: %s: read traces of %s: %w", s.name, requestID, err)
	}
	return out, nil
}

// Sweep implements Store.
func (s *sqlStore) Sweep(ctx context.Context, now time.Time) (int64, error) {
	var n int64
	err := s.b.inTx(ctx, func(tx sqlQuerier) error {
		nowNs := toNanos(now)
		for _, q := range []string{sweepAttemptsSQL, sweepTracesSQL} {
			if _, err := tx.exec(ctx, q, nowNs); err != nil {
				return err
			}
		}
		var err error
		n, err = tx.exec(ctx, sweepRequestsSQL, nowNs)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("store: %s: sweep: %w", s.name, err)
	}
	return n, nil
}

// Close implements Store.
func (s *sqlStore) Close() error {
	if err := s.b.close(); err != nil {
		return fmt.Errorf("store: %s: close: %w", s.name, err)
	}
	return nil
}

// Recent implements Store.
func (s *sqlStore) Recent(ctx context.Context, rq RecentQuery) ([]*Request, error) {
	q := s.b.reader()
	since, until := rq.bounds()
	rows, err := q.query(ctx, recentSQL, since, until, rq.Model, rq.Tenant, string(rq.Outcome), rq.limit())
	if err != nil {
		return nil, fmt.Errorf("store: %s: recent requests: %w", s.name, err)
	}
	var out []*Request
	for rows.Next() {
		r, err := scanRequest(rows)
		if err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: %s: scan recent request: %w", s.name, err)
		}
		out = append(out, r)
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return nil, fmt.Errorf("store: %s: read recent requests: %w", s.name, err)
	}
	// The attempts after the rows are closed: a store on one connection (SQLite's reader
	// may be one) cannot run a query while another's rows are open.
	for _, r := range out {
		if r.Attempts, err = loadAttempts(ctx, q, r.ID); err != nil {
			return nil, fmt.Errorf("store: %s: recent requests: %w", s.name, err)
		}
	}
	return out, nil
}
