package store

import "time"

// MaxRecent bounds RecentQuery.Limit: the console lists at most this many requests at once.
const MaxRecent = 500

// OutcomeRerun selects, in a RecentQuery, the requests that ran more than one attempt
// (whatever their outcome): the gateway reran them before the delivery boundary.
const OutcomeRerun Outcome = "rerun"

// RecentQuery selects recent requests that did not complete plainly: they ended other
// than completed (interrupted, failed — refused or errors —, cancelled, client_stalled),
// or they ran more than one attempt. Empty fields select everything.
type RecentQuery struct {
	Model  string
	Tenant string // API key id
	// Outcome is one Outcome other than running and completed, or OutcomeRerun.
	Outcome Outcome
	// Since and Until bound CreatedAt: Since <= CreatedAt < Until; zero is unbounded.
	Since, Until time.Time
	// Limit is how many requests at most (1..MaxRecent; 0 or above MaxRecent is
	// MaxRecent).
	Limit int
}

// limit is q's Limit within 1..MaxRecent.
func (q RecentQuery) limit() int {
	if q.Limit <= 0 || q.Limit > MaxRecent {
		return MaxRecent
	}
	return q.Limit
}

// bounds are q's Since and Until as the stores compare them: nanoseconds, Until
// unbounded as the greatest time.
func (q RecentQuery) bounds() (since, until int64) {
	since, until = toNanos(q.Since), toNanos(q.Until)
	if q.Until.IsZero() {
		until = 1<<63 - 1
	}
	return since, until
}

// matches reports whether r (with its attempts) is selected by q, as the SQL stores'
// query decides it.
func (q RecentQuery) matches(r *Request) bool {
	since, until := q.bounds()
	created := toNanos(r.CreatedAt)
	if created < since || created >= until || (q.Model != "" && r.Model != q.Model) || (q.Tenant != "" && r.Tenant != q.Tenant) {
		return false
	}
	rerun := false
	for _, a := range r.Attempts {
		rerun = rerun || a.N > 1
	}
	if !rerun && (r.Outcome == OutcomeRunning || r.Outcome == OutcomeCompleted) {
		return false // completed plainly, or still running without a rerun
	}
	switch q.Outcome {
	case "":
		return true
	case OutcomeRerun:
		return rerun
	}
	return r.Outcome == q.Outcome
}
