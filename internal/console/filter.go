package console

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fencegate/fencegate/internal/store"
)

// DefaultLimit is how many requests the list shows when the query does not say.
const DefaultLimit = 100

// Outcomes are the values of the list's outcome filter: the outcomes other than completed,
// and rerun (more than one attempt, whatever the outcome). "failed" is a request that
// ended with an error before any output: refused or failed upstream.
var Outcomes = []string{string(store.OutcomeInterrupted), string(store.OutcomeRerun), string(store.OutcomeFailed),
	string(store.OutcomeCancelled), string(store.OutcomeClientStalled)}

// Filter is the list's query as the operator wrote it, kept to fill the form again.
type Filter struct {
	Model, Key, Outcome, Since, Until string
	Limit                             int
}

// FilterError is a filter the list cannot apply: which parameter, and why.
type FilterError struct {
	Param, Message string
}

func (e *FilterError) Error() string { return e.Param + ": " + e.Message }

// ParseFilter reads the list's query parameters — model, key (an API key id), outcome,
// since and until (an RFC 3339 time, or a duration meaning that long before now) and limit
// — into the store's query.
func ParseFilter(v url.Values, now time.Time) (Filter, store.RecentQuery, error) {
	f := Filter{Model: strings.TrimSpace(v.Get("model")), Key: strings.TrimSpace(v.Get("key")), Outcome: v.Get("outcome"),
		Since: strings.TrimSpace(v.Get("since")), Until: strings.TrimSpace(v.Get("until")), Limit: DefaultLimit}
	q := store.RecentQuery{Model: f.Model, Tenant: f.Key, Outcome: store.Outcome(f.Outcome)}
	if f.Outcome != "" && !slices.Contains(Outcomes, f.Outcome) {
		return f, q, &FilterError{"outcome", fmt.Sprintf("outcome must be one of %s, or empty for all", strings.Join(Outcomes, ", "))}
	}
	var err error
	if q.Since, err = parseTime(f.Since, now); err != nil {
		return f, q, &FilterError{"since", err.Error()}
	}
	if q.Until, err = parseTime(f.Until, now); err != nil {
		return f, q, &FilterError{"until", err.Error()}
	}
	if !q.Since.IsZero() && !q.Until.IsZero() && !q.Since.Before(q.Until) {
		return f, q, &FilterError{"until", "until must be after since"}
	}
	if s := strings.TrimSpace(v.Get("limit")); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > store.MaxRecent {
			return f, q, &FilterError{"limit", fmt.Sprintf("limit must be a number from 1 to %d", store.MaxRecent)}
		}
		f.Limit = n
	}
	q.Limit = f.Limit
	return f, q, nil
}

// parseTime reads s as an RFC 3339 time or as a duration before now ("" is zero).
func parseTime(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%q is neither a time such as 2026-01-02T15:04:05Z nor a duration such as 1h", s)
}
