package store

import "time"

// Times are stored as int64 unix nanoseconds in both SQL dialects: the same
// column type and comparisons work in SQLite (which has no time type) and
// PostgreSQL, round trips are exact, and 0 stands for "not set".

func toNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// normTime drops the monotonic reading and location, so values kept by the
// memory store compare and print like values read back from SQL.
func normTime(t time.Time) time.Time {
	return fromNanos(toNanos(t))
}
