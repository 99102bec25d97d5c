package store

import (
	"strconv"
	"strings"
	"sync"
)

// Turning a batch of mutations into statements (Apply).
//
// A journal batch is mostly CreateRequests and UpsertAttempts of different
// rows, interleaved (create r1, attempt r1, create r2, attempt r2, …). One
// statement per mutation costs SQLite (and database/sql) a bind, a step and a
// reset each, and PostgreSQL one queued query each; most of that is per
// statement, not per row. So the rows of consecutive creates and attempt
// upserts are gathered into multi-row INSERTs.
//
// Apply's contract is that the batch has the effect of its mutations applied
// in order, in one transaction. Mutations of different rows commute (no
// statement of a mutation reads another row: an update is fenced by its own
// row's owner, an attempt's upsert by its own row), and a transaction is seen
// whole or not at all, so only the order of mutations of one row matters.
// The batch is therefore cut into rounds; a round runs its creates (one
// multi-row INSERT per chunk), then its attempt upserts (likewise), then, in
// SQLite, its updates (one UPDATE … FROM a VALUES list per chunk), then its
// remaining statements (traces, stored responses, and in PostgreSQL the
// updates), one each, in submission order. A mutation that would be moved
// before an earlier mutation of its own row starts a new round:
//
//   - a create of a request updated earlier in the round (the update must
//     miss the row, as it would have before the insert), or created earlier
//     in the round;
//   - an upsert of an attempt already upserted in the round (PostgreSQL
//     refuses to change one row twice in one statement, and two upserts are
//     applied one after the other anyway);
//   - in SQLite, a second update of a request in the round (an UPDATE … FROM
//     applies one VALUES row per table row).
//
// The Journal never submits any of these (it merges them), so its batches
// are one round.

// maxRowsPerStmt is the most rows one INSERT carries: 128 requests are 2944
// parameters, far below SQLite's limit (SQLITE_MAX_VARIABLE_NUMBER, 32766
// since 3.32) and PostgreSQL's (65535). Chunks are powers of two (a run of
// 37 rows is 32 + 4 + 1), so each table has at most 8 statement texts, which
// are built once and stay prepared.
const maxRowsPerStmt = 128

// multiRowInsert is an INSERT whose VALUES list is repeated per row.
type multiRowInsert struct {
	head string // up to and including "VALUES "
	tail string // after the last row, e.g. an ON CONFLICT clause
	cols int

	mu    sync.Mutex
	texts map[multiRowKey]string
}

type multiRowKey struct {
	rows int
	anon bool
}

// text returns the statement for rows rows; anon numbers no parameters ("?"
// in SQLite, which binds them by position without looking up their names),
// otherwise they are $1, $2, … (PostgreSQL).
func (m *multiRowInsert) text(rows int, anon bool) string {
	k := multiRowKey{rows, anon}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.texts[k]; ok {
		return s
	}
	var b strings.Builder
	b.WriteString(m.head)
	n := 0
	for r := range rows {
		if r > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for c := range m.cols {
			if c > 0 {
				b.WriteString(", ")
			}
			n++
			if anon {
				b.WriteByte('?')
			} else {
				b.WriteByte('$')
				b.WriteString(strconv.Itoa(n))
			}
		}
		b.WriteByte(')')
	}
	b.WriteString(m.tail)
	if m.texts == nil {
		m.texts = make(map[multiRowKey]string)
	}
	s := b.String()
	m.texts[k] = s
	return s
}

var (
	createRequestsInsert = &multiRowInsert{
		head: `INSERT INTO requests (` + requestColumns + `) VALUES `,
		tail: ` ON CONFLICT DO NOTHING`,
		cols: requestColumnCount,
	}
	upsertAttemptsInsert = &multiRowInsert{
		head: `INSERT INTO attempts (` + attemptColumns + `) VALUES `,
		tail: upsertAttemptConflict,
		cols: attemptColumnCount,
	}
)

// batchPlanner collects one round. The rows' values of every round of a batch go into
// one buffer per statement kind (creates, attempts, updates), a round's statements taking
// the part after the previous round's; planners are pooled with those buffers, so that
// a batch writes its values into room the batches before it made: boxed values and the
// buffers' growth were otherwise the largest part of the journal's garbage, which the
// heap carries until the next collection (docs/performance.md).
type batchPlanner struct {
	anon     bool
	stmts    []sqlStmt
	creates  []any // requestColumnCount values per row
	attempts []any // attemptColumnCount values per row
	updates  []any // updateRowColumnCount values per row, when anon (SQLite)
	// from are where the current round's values start in creates, attempts and updates.
	from     [3]int
	ordered  []sqlStmt
	created  map[string]struct{}
	updated  map[string]struct{}
	upserted map[string]struct{}
}

// planners pools batchPlanners between batches (see batchPlanner).
var planners = sync.Pool{New: func() any {
	return &batchPlanner{
		stmts:    make([]sqlStmt, 0, 8),
		created:  make(map[string]struct{}),
		updated:  make(map[string]struct{}),
		upserted: make(map[string]struct{}),
	}
}}

// maxPooledValues bounds the value buffers a pooled planner keeps: a burst's batch does
// not pin its room for good.
const maxPooledValues = 64 * maxRowsPerStmt * requestColumnCount

// planBatch returns a planner holding the statements of muts (see above, p.stmts); anon
// is passed to multiRowInsert.text. Once the statements were executed, release gives the
// planner back.
func planBatch(muts []Mutation, anon bool) *batchPlanner {
	p := planners.Get().(*batchPlanner)
	p.anon = anon
	for _, m := range muts {
		p.add(m)
	}
	p.endRound()
	return p
}

// release drops what the planner refers to (the statements' values) and pools it.
func (p *batchPlanner) release() {
	clear(p.stmts)
	clear(p.creates)
	clear(p.attempts)
	clear(p.updates)
	clear(p.ordered)
	if cap(p.creates)+cap(p.attempts)+cap(p.updates) > maxPooledValues {
		return
	}
	p.stmts, p.ordered = p.stmts[:0], p.ordered[:0]
	p.creates, p.attempts, p.updates = p.creates[:0], p.attempts[:0], p.updates[:0]
	p.from = [3]int{}
	planners.Put(p)
}

// add puts m in the round, ending the round first when m must come after one of its
// mutations.
func (p *batchPlanner) add(m Mutation) {
	switch m := m.(type) {
	case CreateRequest:
		id := m.Request.ID
		_, u := p.updated[id]
		_, c := p.created[id]
		if u || c {
			p.endRound()
		}
		p.created[id] = struct{}{}
		r := m.Request
		r.normalize()
		p.creates = appendRequestArgs(p.creates, &r)
	case UpsertAttempt:
		if _, ok := p.upserted[m.Attempt.ID]; ok {
			p.endRound()
		}
		p.upserted[m.Attempt.ID] = struct{}{}
		p.attempts = appendAttemptArgs(p.attempts, &m.Attempt)
	case UpdateRequest:
		if !p.anon {
			p.updated[m.ID] = struct{}{}
			p.ordered = append(p.ordered, updateStmts(&m)...)
			return
		}
		if updateSetsFields(&m) {
			if _, ok := p.updated[m.ID]; ok {
				p.endRound() // one row per request in an UPDATE … FROM
			}
			p.updates = appendUpdateRowArgs(p.updates, &m)
		}
		p.updated[m.ID] = struct{}{}
		if m.Response != nil {
			p.ordered = append(p.ordered, updateResponseStmt(&m))
		}
	default:
		p.ordered = mutationStmts(p.ordered, m)
	}
}

// endRound emits the round's statements and starts an empty one.
func (p *batchPlanner) endRound() {
	p.stmts = appendMultiRow(p.stmts, createRequestsInsert, p.creates[p.from[0]:], p.anon)
	p.stmts = appendMultiRow(p.stmts, upsertAttemptsInsert, p.attempts[p.from[1]:], p.anon)
	p.stmts = appendMultiRow(p.stmts, updateRowsUpdate, p.updates[p.from[2]:], p.anon)
	p.stmts = append(p.stmts, p.ordered...)
	p.from = [3]int{len(p.creates), len(p.attempts), len(p.updates)}
	clear(p.ordered)
	p.ordered = p.ordered[:0]
	clear(p.created)
	clear(p.updated)
	clear(p.upserted)
}

// appendMultiRow appends the INSERTs of the rows in vals, in order, in
// chunks of at most maxRowsPerStmt rows whose sizes are powers of two.
func appendMultiRow(stmts []sqlStmt, m *multiRowInsert, vals []any, anon bool) []sqlStmt {
	rows := len(vals) / m.cols
	for rows > 0 {
		n := maxRowsPerStmt
		for n > rows {
			n /= 2
		}
		stmts = append(stmts, sqlStmt{m.text(n, anon), vals[: n*m.cols : n*m.cols]})
		vals = vals[n*m.cols:]
		rows -= n
	}
	return stmts
}
