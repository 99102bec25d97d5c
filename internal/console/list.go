package console

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/fencegate/fencegate/internal/store"
)

// RequestList is the page of recent requests that did not complete plainly.
type RequestList struct {
	Filter   Filter
	Models   []string
	Outcomes []string
	// Error is the filter the page could not apply (the list is then empty).
	Error *FilterError
	Rows  []RequestRow
	// Full: the list holds Filter.Limit rows, so older ones may be left out.
	Full bool
}

// RequestRow is one request of the list.
type RequestRow struct {
	ID, Model, Key, Outcome string
	CreatedAt               time.Time
	Attempts                int
	// Replicas are the attempts' replicas in order ("sim-1 → sim-2").
	Replicas string
	Rerun    bool
	// Delivered: the delivery boundary was crossed (the client received output).
	Delivered bool
	ErrorCode string
}

// NewRequestList builds the list page from the store's rows.
func NewRequestList(f Filter, models []string, rows []*store.Request) RequestList {
	l := RequestList{Filter: f, Models: models, Outcomes: Outcomes, Full: len(rows) >= f.Limit}
	for _, r := range rows {
		row := RequestRow{ID: r.ID, Model: r.Model, Key: r.Tenant, Outcome: outcomeText(r.Outcome), CreatedAt: r.CreatedAt,
			Attempts: len(r.Attempts), Delivered: r.FirstDeltaSent, ErrorCode: ErrorOf(r.Error).Code}
		var reps []string
		for _, a := range r.Attempts {
			reps = append(reps, a.Replica)
			row.Rerun = row.Rerun || a.N > 1
		}
		row.Replicas = strings.Join(reps, " → ")
		l.Rows = append(l.Rows, row)
	}
	return l
}

// outcomeText names an outcome; a request without one is still running.
func outcomeText(o store.Outcome) string {
	if o == store.OutcomeRunning {
		return "running"
	}
	return string(o)
}

// APIError is the error a request ended with, as its client received it.
type APIError struct {
	Type, Code, Message string
}

// ErrorOf reads the journal's {"error":{...}} envelope (zero when there is none). A code
// that is not a string (Anthropic-shaped errors carry none; some engines send a number) is
// shown as its JSON text.
func ErrorOf(b []byte) APIError {
	var env struct {
		Error struct {
			Type    string          `json:"type"`
			Code    json.RawMessage `json:"code"`
			Message string          `json:"message"`
		} `json:"error"`
	}
	if len(b) == 0 || json.Unmarshal(b, &env) != nil {
		return APIError{}
	}
	e := APIError{Type: env.Error.Type, Message: env.Error.Message}
	if c := env.Error.Code; len(c) > 0 && string(c) != "null" {
		if json.Unmarshal(c, &e.Code) != nil {
			e.Code = string(c)
		}
	}
	return e
}
